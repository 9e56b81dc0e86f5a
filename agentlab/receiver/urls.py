from __future__ import annotations

import re

from django.urls import path

from agentlab.receiver import views

# Mounted at the root: OTLP exporters append /v1/traces to OTEL_EXPORTER_OTLP_ENDPOINT.
urlpatterns = [path("v1/traces", views.receive_traces, name="receive_traces")]

# Served past the middleware (agentlab/fast_api.py, wired in agentlab/asgi.py): the view reads
# no session, cookie or CSRF token (a token on every request), and its errors are the spec's.
FAST = (re.compile(r"^/v1/traces$"), "receiver", views.fast_error)
