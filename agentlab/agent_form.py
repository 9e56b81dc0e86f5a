"""The admin's agent form: the paradigm is a choice of the registered paradigms, and its
parameters are fields generated from each paradigm's parameter schema (type, bounds, choices,
default, help), never a raw JSON box. The fields of every paradigm are on the page, one
fieldset each; static/agentlab/agent_admin.js shows the chosen paradigm's. On save the chosen
paradigm's values are checked against its schema (Agent.clean)."""

from __future__ import annotations

import json
import re
from typing import Any

from django import forms
from django.core.exceptions import NON_FIELD_ERRORS, ValidationError

from agentlab.models import Agent
from agentlab.paradigms.registry import get_paradigm, paradigm_keys, validate_params

WHERE = re.compile(r" — (\w+)[.:]")  # validate_params names the parameter it refuses


def field_name(paradigm: str, prop: str) -> str:
    return f"param__{paradigm}__{prop}"


def schema_properties(paradigm: str) -> dict[str, dict[str, Any]]:
    return dict(get_paradigm(paradigm).params_schema.get("properties", {}))


def _field(prop: dict[str, Any]) -> forms.Field:
    """A form field for one schema property; never required (a blank is the default)."""
    default = prop.get("default")
    help_parts = [prop.get("description", "")]
    if default not in (None, "", [], {}):
        help_parts.append(f"Default: {json.dumps(default)}.")
    common = {"required": False, "help_text": " ".join(p for p in help_parts if p)}
    kind = prop.get("type")
    if "enum" in prop:
        return forms.ChoiceField(choices=[(v, v) for v in prop["enum"]], **common)
    if kind == "boolean":
        return forms.BooleanField(**common)
    if kind == "integer":
        return forms.IntegerField(min_value=prop.get("minimum"), max_value=prop.get("maximum"),
                                  **common)
    if kind == "number":
        return forms.FloatField(min_value=prop.get("minimum"), max_value=prop.get("maximum"),
                                **common)
    if kind == "string":
        return forms.CharField(**common, widget=forms.TextInput(attrs={"size": 60}))
    return forms.JSONField(**common, widget=forms.Textarea(attrs={"rows": 6, "cols": 70}))


class AgentForm(forms.ModelForm):
    class Meta:
        model = Agent
        # Every field but params, which is built from the generated fields in clean().
        fields = ["name", "paradigm", "description", "demo_question", "system_prompt",
                  "model_profile", "tools", "guardrails", "max_steps", "max_llm_calls",
                  "total_timeout_s", "tool_timeout_s", "token_budget"]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        keys = paradigm_keys()
        current = self.instance.paradigm if self.instance.pk else ""
        choices = [(k, f"{get_paradigm(k).label or k} ({k})") for k in keys]
        if current and current not in keys:  # a paradigm that failed to load: say so on save
            choices.append((current, f"{current} (not available)"))
        self.fields["paradigm"] = forms.ChoiceField(
            choices=[("", "— choose a paradigm —"), *choices],
            help_text="The reasoning paradigm; its parameters are below.")
        saved = self.instance.params if isinstance(self.instance.params, dict) else {}
        for key in keys:
            for name, prop in schema_properties(key).items():
                field = _field(prop)
                value = saved.get(name, prop.get("default")) if key == current else prop.get(
                    "default")
                field.initial = value
                field.label = name.replace("_", " ")
                self.fields[field_name(key, name)] = field

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        paradigm = data.get("paradigm")
        if paradigm in paradigm_keys():
            params = {}
            for name, prop in schema_properties(paradigm).items():
                value = data.get(field_name(paradigm, name))
                if value in (None, "") and prop.get("type") != "boolean":
                    continue  # blank: the default (validate_params fills it in)
                params[name] = value
            self.instance.params = params
            try:  # said next to the field it is about (Agent.clean checks again)
                validate_params(paradigm, params)
            except ValueError as exc:
                where = WHERE.search(str(exc))
                name = field_name(paradigm, where.group(1)) if where else None
                self.add_error(name if name in self.fields else None, str(exc))
        return data

    def _update_errors(self, errors: ValidationError) -> None:
        # The model's "params" is not a field of this form: its errors go on top of the form.
        if hasattr(errors, "error_dict") and "params" in errors.error_dict:
            errors.error_dict.setdefault(NON_FIELD_ERRORS, []).extend(
                errors.error_dict.pop("params"))
        super()._update_errors(errors)


def parameter_fieldsets() -> list[tuple[str, dict[str, Any]]]:
    """One admin fieldset per paradigm with its generated fields (agent_admin.js shows the
    chosen paradigm's)."""
    sets = []
    for key in paradigm_keys():
        names = [field_name(key, n) for n in schema_properties(key)]
        label = get_paradigm(key).label or key
        sets.append((f"{label} parameters", {
            "fields": names or [], "classes": ["paradigm-params", f"paradigm-{key}"],
            "description": "" if names else f"{label} has no parameters."}))
    return sets
