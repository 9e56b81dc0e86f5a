"""The compare form: one question, two to six agents."""

from __future__ import annotations

from django import forms

from agentlab.compare.models import MAX_AGENTS, MIN_AGENTS
from agentlab.models import Agent


class AgentChoices(forms.ModelMultipleChoiceField):
    def label_from_instance(self, obj: Agent) -> str:
        return f"{obj.name} ({obj.paradigm})"


class CompareForm(forms.Form):
    question = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), max_length=20_000)
    title = forms.CharField(max_length=200, required=False,
                            help_text="Optional; the question is shown when blank.")
    agents = AgentChoices(
        queryset=Agent.objects.order_by("paradigm", "name"),
        widget=forms.CheckboxSelectMultiple,
        error_messages={"required": f"Choose {MIN_AGENTS} to {MAX_AGENTS} agents to compare."},
    )

    def clean_question(self) -> str:
        question = self.cleaned_data["question"].strip()
        if not question:
            raise forms.ValidationError("Enter a question.")
        return question

    def clean_agents(self) -> list[Agent]:
        agents = list(self.cleaned_data["agents"])
        if not MIN_AGENTS <= len(agents) <= MAX_AGENTS:
            raise forms.ValidationError(
                f"Choose {MIN_AGENTS} to {MAX_AGENTS} agents to compare "
                f"({len(agents)} chosen)."
            )
        return agents
