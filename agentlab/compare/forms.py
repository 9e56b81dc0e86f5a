"""The compare form: one question, two to six agents."""

from __future__ import annotations

from django import forms
from django.conf import settings

from agentlab.compare.models import MAX_AGENTS, MIN_AGENTS
from agentlab.models import Agent
from traces.display.labels import paradigm_name


class AgentChoices(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj: Agent) -> str:
        return f"{obj.name} ({paradigm_name(obj.paradigm)})"


class CompareForm(forms.Form):
    question = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}))
    title = forms.CharField(max_length=200, required=False,
                            help_text="Optional; the question is shown when blank.")
    agents = AgentChoices(
        queryset=Agent.objects.order_by("paradigm", "name"),
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": f"Choose {MIN_AGENTS} to {MAX_AGENTS} agents to compare."},
    )

    def __init__(self, *args, **kwargs) -> None:  # noqa: ANN002, ANN003 (a Form's)
        super().__init__(*args, **kwargs)
        # Read here, not at import, so the setting is today's (and tests can change it).
        self.fields["question"].widget.attrs["maxlength"] = settings.AGENTLAB_MAX_MESSAGE_CHARS

    def clean_question(self) -> str:
        question = self.cleaned_data["question"].strip()
        limit = settings.AGENTLAB_MAX_MESSAGE_CHARS
        if not question:
            raise forms.ValidationError("Enter a question.")
        if len(question) > limit:
            raise forms.ValidationError(f"The question is {len(question):,} characters; a "
                                        f"question may have at most {limit:,}.")
        return question

    def clean_agents(self) -> list[Agent]:
        agents = list(self.cleaned_data["agents"])
        if not MIN_AGENTS <= len(agents) <= MAX_AGENTS:
            raise forms.ValidationError(
                f"Choose {MIN_AGENTS} to {MAX_AGENTS} agents to compare "
                f"({len(agents)} chosen)."
            )
        return agents
