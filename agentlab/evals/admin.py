"""Admin: suites with their cases inline and an import page (JSONL/CSV, row errors shown);
experiments read-only with their results and per-agent summary (they are run, not edited)."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin, messages
from django.db.models import Count, QuerySet
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import get_object_or_404
from django.template.response import TemplateResponse
from django.urls import path, reverse
from django.utils.html import format_html, format_html_join

from agentlab.evals import importer, suites
from agentlab.evals.models import Case, Experiment, Result, Suite
from agentlab.evals.summary import agent_summary
from traces.display.figures import format_percent

MAX_UPLOAD = 5 * 1024 * 1024


class CaseInline(admin.TabularInline):
    model = Case
    fields = ["position", "question", "expected", "scorer", "tolerance", "rubric", "tags",
              "source_run"]
    readonly_fields = ["source_run"]  # set by "Add to suite" on a run
    extra = 0

    def get_formset(self, request: HttpRequest, obj: Any = None, **kwargs: Any) -> Any:
        kwargs["widgets"] = {name: forms.Textarea(attrs={"rows": 2, "cols": 40})
                             for name in ("question", "expected", "rubric")}
        return super().get_formset(request, obj, **kwargs)


class ImportForm(forms.Form):
    suite = forms.CharField(max_length=200, help_text="An existing suite gets the cases added "
                                                      "after its own; a new name creates one.")
    file = forms.FileField(help_text="JSONL (one case per line) or CSV with a header row: "
                                     "question, expected, scorer, tolerance, rubric, tags.")


@admin.register(Suite)
class SuiteAdmin(admin.ModelAdmin):
    list_display = ["name", "owner", "case_count", "updated"]
    list_filter = [("owner", admin.EmptyFieldListFilter)]
    raw_id_fields = ["owner"]
    search_fields = ["name", "description"]
    inlines = [CaseInline]
    actions = ["import_into"]
    change_list_template = "admin/evals/suite/change_list.html"

    def get_queryset(self, request: HttpRequest) -> QuerySet[Suite]:
        return super().get_queryset(request).annotate(n_cases=Count("cases"))

    @admin.display(description="cases", ordering="n_cases")
    def case_count(self, obj: Suite) -> int:
        return obj.n_cases

    @admin.action(description="Import cases into the selected suite")
    def import_into(self, request: HttpRequest, queryset: QuerySet[Suite]) -> Any:
        if queryset.count() != 1:
            self.message_user(request, "Choose exactly one suite to import into.",
                              messages.WARNING)
            return None
        return HttpResponseRedirect(reverse("admin:evals_suite_import")
                                    + f"?suite={queryset.get().pk}")

    def get_urls(self) -> list:
        view = self.admin_site.admin_view(self.import_view)
        return [path("import/", view, name="evals_suite_import"), *super().get_urls()]

    def import_view(self, request: HttpRequest) -> HttpResponse:
        if not self.has_add_permission(request):
            return HttpResponse("You may not import suites.", status=403)
        initial = {}
        if pk := request.GET.get("suite", ""):
            initial["suite"] = get_object_or_404(Suite, pk=pk).name if pk.isdigit() else ""
        form = ImportForm(request.POST or None, request.FILES or None, initial=initial)
        errors: list[importer.RowError] = []
        if request.method == "POST" and form.is_valid():
            errors, suite, count = self._import(form)
            if suite is not None:
                self.message_user(request, f"Imported {count} case(s) into “{suite}”.")
                return HttpResponseRedirect(reverse("admin:evals_suite_change",
                                                    args=[suite.pk]))
        context = {**self.admin_site.each_context(request), "opts": self.model._meta,
                   "title": "Import cases", "form": form, "row_errors": errors}
        return TemplateResponse(request, "admin/evals/suite/import.html", context)

    def _import(self, form: ImportForm) -> tuple[list[importer.RowError], Suite | None, int]:
        upload = form.cleaned_data["file"]
        if upload.size > MAX_UPLOAD:
            return [importer.RowError(0, "", f"the file is larger than {MAX_UPLOAD // 2**20} "
                                             "MB")], None, 0
        try:
            fmt = importer.guess_format(upload.name)
            text = importer.decode(upload.read())
            suite, cases = suites.import_text(form.cleaned_data["suite"].strip(), text, fmt)
        except importer.ImportFailed as exc:
            return exc.errors, None, 0
        except ValueError as exc:  # the format could not be told from the name
            return [importer.RowError(0, "file", str(exc))], None, 0
        return [], suite, len(cases)


class ResultInline(admin.TabularInline):
    model = Result
    fields = ["case", "agent_name", "status", "score", "passed", "run_link", "error"]
    readonly_fields = fields
    extra = 0
    can_delete = False
    show_change_link = False

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="run")
    def run_link(self, obj: Result) -> str:
        if obj.run_id is None:
            return "—"
        return format_html('<a href="/runs/{}/">run {}</a>', obj.run_id, obj.run_id)


@admin.register(Experiment)
class ExperimentAdmin(admin.ModelAdmin):
    list_display = ["__str__", "suite", "status", "progress_text", "user", "created"]
    list_filter = ["status", "suite", "created"]
    search_fields = ["title", "suite__name", "user__username"]
    fields = ["title", "suite", "user", "status", "agents", "concurrency", "case_tags",
              "case_limit", "run_timeout_s", "judge_profile", "previous", "error", "created",
              "started_at", "finished_at", "summary_table"]
    readonly_fields = fields
    inlines = [ResultInline]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False  # experiments are started from the experiments page or run_experiment

    def has_change_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False

    @admin.display(description="progress")
    def progress_text(self, obj: Experiment) -> str:
        done, total = obj.progress()
        return f"{done}/{total}"

    @admin.display(description="summary")
    def summary_table(self, obj: Experiment) -> str:
        rows = agent_summary(obj)
        if not rows:
            return "—"
        body = format_html_join("", "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}/{}</td>"
                                "<td>{}</td><td>{}</td><td>{}</td></tr>",
                                ((r["agent"], _pct(r["mean_score"]), _pct(r["pass_rate"]),
                                  r["succeeded"], r["runs"], r["tokens"],
                                  f"${r['cost_usd']:.4f}", f"{r['wall_s']:.1f}") for r in rows))
        return format_html("<table><tr><th>agent</th><th>mean score</th><th>pass rate</th>"
                           "<th>runs ok</th><th>tokens</th><th>cost</th><th>wall s</th></tr>"
                           "{}</table>", body)


def _pct(value: float | None) -> str:
    return format_percent(value)
