"""The runs list: search, filters, sort, pagination, select two to diff; bundle import."""

from __future__ import annotations

from django.contrib import messages
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from traces.bundle import BundleError, import_bundle
from traces.models import Run
from traces.views import filters

PAGE_SIZE = 50
# Only what the table shows: a run's snapshot, history and error stay in the database.
LIST_FIELDS = ("pk", "input", "final_answer", "agent_name", "paradigm", "status", "step_count",
               "llm_calls", "tool_calls", "tokens_in", "tokens_out", "cost_usd", "wall_ms",
               "created", "parent_run_id", "user__username")
MAX_IMPORT_BYTES = 200 * 1024 * 1024


def run_list(request: HttpRequest) -> HttpResponse:
    visible = Run.objects.visible_to(request.user)
    form = filters.RunFilterForm(request.GET, runs=visible, staff=request.user.is_staff)
    runs = filters.apply(visible, form).select_related("user").only(*LIST_FIELDS)
    page = Paginator(runs, PAGE_SIZE).get_page(request.GET.get("page"))
    context = {"page": page, "form": form, "sort": form.sort_key(), "ignored": form.ignored(),
               "columns": _columns(form.sort_key())}
    # The filter form, the sort links and the pager swap only the table (htmx).
    if request.htmx and request.htmx.target == "run-table":
        return render(request, "traces/run_list.html#table", context)
    return render(request, "traces/run_list.html", context)


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


@require_POST
def run_import(request: HttpRequest) -> HttpResponse:
    upload = request.FILES.get("bundle")
    if upload is None:
        messages.error(request, "Import: choose a bundle file (.json) first.")
        return redirect("runs")
    if upload.size > MAX_IMPORT_BYTES:
        messages.error(request, f"Import: {upload.name} is over {MAX_IMPORT_BYTES >> 20} MB.")
        return redirect("runs")
    try:
        run = import_bundle(upload.read(), user=request.user)
    except BundleError as exc:
        messages.error(request, f"Import: {upload.name} was refused: {exc}")
        return redirect("runs")
    messages.success(request, f"Imported {upload.name} as run {run.pk}.")
    return redirect("run", pk=run.pk)
