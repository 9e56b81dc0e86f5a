"""The form that starts an experiment: a suite, one or more agents and how to run them."""

from __future__ import annotations

from typing import Any

from django import forms

from agentlab.evals.models import Suite, clean_tags
from agentlab.models import Agent, ModelProfile
from traces.display.labels import paradigm_name

MAX_CONCURRENCY = 8


class AgentChoices(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj: Agent) -> str:
        return f"{obj.name} ({paradigm_name(obj.paradigm)})"


class StartForm(forms.Form):
    suite = forms.ModelChoiceField(
        queryset=Suite.objects.order_by("name"), empty_label=None,
        error_messages={"required": "Choose a suite.",
                        "invalid_choice": "That suite no longer exists."},
    )
    agents = AgentChoices(
        queryset=Agent.objects.order_by("paradigm", "name"),
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": "Choose at least one agent."},
    )
    concurrency = forms.IntegerField(
        min_value=1, max_value=MAX_CONCURRENCY, initial=2,
        help_text=f"Runs at the same time (1–{MAX_CONCURRENCY}).",
        error_messages={"min_value": f"Concurrency is 1 to {MAX_CONCURRENCY}.",
                        "max_value": f"Concurrency is 1 to {MAX_CONCURRENCY}."},
    )
    judge_profile = forms.ModelChoiceField(
        queryset=ModelProfile.objects.order_by("name"), required=False,
        empty_label="(none)",  # the line under the row says what the judge is for
        help_text="Scores the cases whose scorer is the LLM judge.",
    )
    case_tags = forms.CharField(
        label="Only cases tagged", max_length=400, required=False,
        help_text="Tags, comma-separated: the cases with any of them. Blank: every case.",
        widget=forms.TextInput(attrs={"placeholder": "e.g. weather, calculator"}),
    )
    case_limit = forms.IntegerField(
        label="First N cases", min_value=1, required=False,
        help_text="Blank: the whole suite.",
        error_messages={"min_value": "Run at least one case (or leave it blank)."},
    )
    run_timeout_s = forms.IntegerField(
        label="Seconds per run", min_value=1, required=False,
        help_text="Caps each run's total timeout; blank: each agent's own limit.",
        error_messages={"min_value": "Give each run at least 1 s (or leave it blank)."},
    )
    title = forms.CharField(max_length=200, required=False)

    def __init__(self, *args: Any, user: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # shared suites and the user's own (staff: all); another's is "no longer exists"
        self.fields["suite"].queryset = Suite.objects.visible_to(user).order_by("name")

    def clean_case_tags(self) -> list[str]:
        return clean_tags(self.cleaned_data["case_tags"].split(","))

    def clean_agents(self) -> list[Agent]:
        return list(self.cleaned_data["agents"])

    def clean(self) -> dict:
        data = super().clean()
        suite = data.get("suite")
        if suite is not None and not suite.cases.exists():
            self.add_error("suite", f"The suite “{suite.name}” has no cases yet.")
        elif suite is not None and (tags := data.get("case_tags")):
            known = {str(t) for case_tags in suite.cases.values_list("tags", flat=True)
                     for t in case_tags or []}
            if not known & set(tags):
                self.add_error("case_tags", f"No case of “{suite.name}” is tagged "
                               f"{' or '.join(tags)}; its tags: "
                               f"{', '.join(sorted(known)) or 'none'}.")
        return data
