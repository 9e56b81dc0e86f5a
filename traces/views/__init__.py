"""The trace viewer's views: runs list, one run, diff, export and import (one module each)."""

from __future__ import annotations

from traces.views.diff import run_diff
from traces.views.export import run_export, run_export_otlp, run_export_otlp_protobuf
from traces.views.find import run_find
from traces.views.graph import run_graph_page, run_graph_step, run_graphs
from traces.views.otel import otel_status
from traces.views.run import run_detail, run_steps, step_messages, step_payload
from traces.views.runs import run_import, run_list
from traces.views.timeline import run_timeline

__all__ = ["run_detail", "run_diff", "run_export", "run_export_otlp",
           "run_export_otlp_protobuf", "run_find", "run_graph_page", "run_graph_step", "run_graphs",
           "run_import", "run_list", "otel_status",
           "run_steps", "run_timeline", "step_messages", "step_payload"]
