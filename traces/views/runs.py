"""The runs list: search, filters, sort, pagination, select two to diff; import of a bundle
or of OTLP traces (protobuf or JSON, one run per trace)."""

from __future__ import annotations

import logging
from typing import Any

from django.contrib import messages
from django.core.files.uploadhandler import MemoryFileUploadHandler, StopUpload
from django.core.paginator import Paginator
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_POST

from traces.bundle import BundleError
from traces.models import Run
from traces.otel.decode import OTLPError
from traces.otel.importer import import_file
from traces.views import filters

log = logging.getLogger(__name__)
PAGE_SIZE = 50
LIVE_REFRESH_S, IDLE_REFRESH_S = 2, 10  # the first page reloads itself (see _refresh_s)
# Only what the table shows: a run's snapshot, history and error stay in the database.
LIST_FIELDS = ("pk", "input", "final_answer", "agent_name", "paradigm", "status", "step_count",
               "llm_calls", "tool_calls", "tokens_in", "tokens_out", "cost_usd", "wall_ms",
               "created", "started_at", "parent_run_id", "user__username")
# An uploaded bundle: at most this many bytes, and the request around it at most
# MAX_IMPORT_BYTES + FORM_OVERHEAD_BYTES (the multipart boundaries, the CSRF token).
MAX_IMPORT_BYTES = 20 * 1024 * 1024
FORM_OVERHEAD_BYTES = 64 * 1024


def run_list(request: HttpRequest) -> HttpResponse:
    visible = Run.objects.visible_to(request.user)
    form = filters.RunFilterForm(request.GET, runs=visible, staff=request.user.is_staff)
    runs = filters.apply(visible, form).select_related("user").only(*LIST_FIELDS)
    page = Paginator(runs, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {"page": page, "form": form, "sort": form.sort_key(), "ignored": form.ignored(),
               "columns": _columns(form.sort_key()), "refresh_s": _refresh_s(page)}
    # The filter form, the sort links and the pager swap only the table (htmx).
    if request.htmx and request.htmx.target == "run-table":
        return render(request, "traces/run_list.html#table", context)
    return render(request, "traces/run_list.html", context)


def _refresh_s(page: Any) -> int | None:
    """How often the first page of the list reloads itself, so runs that are going (and new
    ones: a received trace, a run started elsewhere) show as they change: often while one on
    it is going, now and then otherwise; later pages stay still."""
    if page.number != 1:
        return None
    return LIVE_REFRESH_S if any(run.is_active for run in page.object_list) else IDLE_REFRESH_S


def _columns(sort: str) -> dict[str, dict[str, str]]:
    """Sortable headers: each links to its own sort, flipping direction when already sorted."""
    columns = {}
    for key, label in (("started", "Started"), ("duration", "Duration"), ("steps", "Steps"),
                       ("tokens", "Tokens"), ("cost", "Cost")):
        current = sort.lstrip("-") == key
        descending = sort.startswith("-")
        columns[key] = {
            "label": label,
            "sort": (key if descending else f"-{key}") if current else f"-{key}",
            "arrow": ("↓" if descending else "↑") if current else "",
        }
    return columns


@csrf_exempt  # checked in _import_upload: reading the token would read the body first
@require_POST
def run_import(request: HttpRequest) -> HttpResponse:
    """A bundle upload -> a new run. The request is refused on its Content-Length before its
    body is read; the body is then read through a handler that stops at MAX_IMPORT_BYTES, so
    a request that declares less than it sends never gets more read."""
    if (refusal := _length_refusal(request)) is not None:
        messages.error(request, refusal)
        return redirect("runs")
    capped = CappedUploadHandler(request, MAX_IMPORT_BYTES)
    request.upload_handlers = [capped]
    return _import_upload(request, capped)


def _length_refusal(request: HttpRequest) -> str | None:
    declared = request.META.get("CONTENT_LENGTH") or ""
    limit = _mb(MAX_IMPORT_BYTES)
    if not declared.isdigit():
        return (f"Import: the upload was refused: it did not say its size (Content-Length); "
                f"bundles of up to {limit} can be imported here.")
    if int(declared) > MAX_IMPORT_BYTES + FORM_OVERHEAD_BYTES:
        return (f"Import: the upload was refused: it is {_mb(int(declared))}, over the "
                f"{limit} limit. Import larger bundles with `manage.py import_run`.")
    return None


@csrf_protect
def _import_upload(request: HttpRequest, capped: CappedUploadHandler) -> HttpResponse:
    upload = request.FILES.get("bundle")
    if capped.exceeded:
        messages.error(request, f"Import: the upload was refused: it is over the "
                                f"{_mb(MAX_IMPORT_BYTES)} limit (stopped reading there).")
        return redirect("runs")
    if upload is None:
        messages.error(request, "Import: choose a bundle or an OTLP trace file first.")
        return redirect("runs")
    try:
        runs = import_file(upload.read(), user=request.user)
    except (BundleError, OTLPError) as exc:
        messages.error(request, f"Import: {upload.name} was refused: {exc}")
        return redirect("runs")
    except DatabaseError as exc:  # valid, but the database refused it: nothing was kept
        log.exception("import of %s failed", upload.name)
        messages.error(request, f"Import: {upload.name} could not be stored ({exc}); nothing "
                                "of it was kept. Try again.")
        return redirect("runs")
    if len(runs) == 1:
        messages.success(request, f"Imported {upload.name} as run {runs[0].pk}.")
        return redirect("run", pk=runs[0].pk)
    numbers = ", ".join(str(r.pk) for r in runs)
    messages.success(request, f"Imported {upload.name}: {len(runs)} traces as runs {numbers}.")
    return redirect("runs")


class CappedUploadHandler(MemoryFileUploadHandler):
    """Keeps an upload in memory up to `limit` bytes; past that it stops the upload without
    reading the rest of the body (`StopUpload(connection_reset=True)`) and says so."""

    def __init__(self, request: HttpRequest, limit: int) -> None:
        super().__init__(request)
        self.limit, self.received, self.exceeded = limit, 0, False

    def handle_raw_input(self, input_data, META, content_length, boundary,  # noqa: N803
                         encoding=None) -> None:
        self.activated = True  # in memory whatever its declared size: the cap bounds it

    def receive_data_chunk(self, raw_data: bytes, start: int) -> bytes | None:
        self.received += len(raw_data)
        if self.received > self.limit:
            self.exceeded = True
            raise StopUpload(connection_reset=True)
        return super().receive_data_chunk(raw_data, start)


def _mb(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB".replace(".0 MB", " MB")
