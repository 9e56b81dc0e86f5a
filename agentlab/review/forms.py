"""The forms of review queues: a queue (staff), a rule, filling from the runs list, and a
reviewer's answer (the rubric's keys, thumbs and a note; or, pairwise, which run is better and
why). Fields come from the queue's rubric only (a whitelist): any other parameter is ignored."""

from __future__ import annotations

import math
from typing import Any

from django import forms
from django.contrib.auth import get_user_model
from django.http import QueryDict

from agentlab.feedback.forms import (
    check_note_of,
    check_values,
    initial_value,
    note_field,
    value_field,
)
from agentlab.feedback.models import Feedback, FeedbackKey
from agentlab.feedback.values import NOTE, THUMBS
from agentlab.review import filters
from agentlab.review.models import CHOICES, MAX_REVIEWS_NEEDED, Queue

RADIO_MAX = 10  # a numeric key with at most this many whole values gets a button each


class QueueForm(forms.ModelForm):
    class Meta:
        model = Queue
        fields = ["name", "mode", "instructions", "keys", "thumbs", "reviewers",
                  "reviews_needed"]
        widgets = {"keys": forms.CheckboxSelectMultiple, "reviewers": forms.CheckboxSelectMultiple,
                   "instructions": forms.Textarea(attrs={"rows": 4}),
                   "mode": forms.RadioSelect}

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["reviewers"].queryset = (get_user_model().objects.filter(is_active=True)
                                             .order_by("username"))
        self.fields["reviewers"].label_from_instance = lambda u: u.get_username()
        self.fields["reviews_needed"].widget.attrs.update(min=1, max=MAX_REVIEWS_NEEDED)
        if self.instance.pk and self.instance.items.exists():
            self.fields["mode"].disabled = True
            self.fields["mode"].help_text = "It has items: its mode stays."

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        needed, reviewers = data.get("reviews_needed"), data.get("reviewers")
        if needed is not None and not 1 <= needed <= MAX_REVIEWS_NEEDED:
            self.add_error("reviews_needed", f"From 1 to {MAX_REVIEWS_NEEDED}.")
        elif needed and reviewers is not None and needed > max(len(reviewers), 1):
            self.add_error("reviews_needed", f"It has {len(reviewers)} reviewer(s): an item "
                                             f"cannot get {needed} reviews.")
        if data.get("mode") == "single" and not data.get("keys") and not data.get("thumbs"):
            self.add_error("keys", "Choose at least one key, or thumbs.")
        return data


WHICH = {"finished": ("every finished run", {}), "failed": ("failed runs", {"status": "failed"}),
         "guardrail": ("runs a guardrail acted on (flagged, redacted, blocked)",
                       {"guardrail_action": "any"}),
         "down": ("runs with thumbs down", {"feedback": "down"})}


class RuleForm(forms.Form):
    which = forms.ChoiceField(label="Which runs", choices=[(k, v[0]) for k, v in WHICH.items()])
    agent = forms.CharField(required=False, max_length=200, label="Of agent",
                            widget=forms.TextInput(attrs={"list": "agent-names",
                                                          "placeholder": "any agent"}))
    query = forms.CharField(required=False, max_length=filters.MAX_QUERY_CHARS,
                            label="And the runs list's filter",
                            widget=forms.TextInput(attrs={"placeholder": "model=gpt-4o&q=refund"}))
    percent = forms.FloatField(label="Sample (%)", initial=100, min_value=0.01, max_value=100,
                               widget=forms.NumberInput(attrs={"step": "any", "size": 5}))

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        query = QueryDict(filters.clean_query(data.get("query") or ""), mutable=True) \
            if len(data.get("query") or "") <= filters.MAX_QUERY_CHARS else QueryDict()
        for name, value in WHICH.get(data.get("which", ""), ("", {}))[1].items():
            query[name] = value
        if agent := (data.get("agent") or "").strip():
            query["agent"] = agent
        try:
            data["filter"] = filters.check(query.urlencode())
        except filters.FilterError as e:
            self.add_error("query", str(e))
        percent = data.get("percent")
        if percent is not None and not math.isfinite(percent):
            self.add_error("percent", "A number from 0.01 to 100.")
        return data


class FillForm(forms.Form):
    queue = forms.ModelChoiceField(queryset=Queue.objects.none(), label="Queue",
                                   empty_label=None)
    query = forms.CharField(required=False, max_length=filters.MAX_QUERY_CHARS,
                            widget=forms.HiddenInput)
    keep = forms.BooleanField(required=False, label="Also add new runs that match, as they "
                                                    "finish (a rule)")
    percent = forms.FloatField(required=False, initial=100, min_value=0.01, max_value=100,
                               label="Sample of the new runs (%)",
                               widget=forms.NumberInput(attrs={"step": "any", "size": 5}))

    def __init__(self, *args: Any, queues: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.fields["queue"].queryset = queues

    def clean_query(self) -> str:
        try:
            return filters.check(self.cleaned_data.get("query") or "")
        except filters.FilterError as e:
            raise forms.ValidationError(str(e)) from None


def rubric_field(key: FeedbackKey, initial: str) -> forms.Field:
    """A button per value where there are few (1–5, yes/no, a few labels: the keys 1–9 pick
    them), else the feedback form's input."""
    spec = key.spec
    choices: list[tuple[str, str]] = []
    if spec.kind == "boolean":
        choices = [("true", "yes"), ("false", "no")]
    elif spec.kind == "categories" and len(spec.labels) <= 9:
        choices = [(x, x) for x in spec.labels]
    elif (spec.kind == "numeric" and spec.minimum is not None and spec.maximum is not None
          and float(spec.minimum).is_integer() and float(spec.maximum).is_integer()
          and spec.maximum - spec.minimum < RADIO_MAX):
        choices = [(f"{n}", f"{n}") for n in range(int(spec.minimum), int(spec.maximum) + 1)]
    if not choices:
        return value_field(key, initial)
    return forms.ChoiceField(required=False, label=key.name, help_text=key.description,
                             choices=choices, initial=initial, widget=forms.RadioSelect)


class AnswerForm(forms.Form):
    """One run: a value per rubric key, thumbs (when the queue asks), a note; filled with what
    the reviewer gave the run before."""

    def __init__(self, data: Any = None, *, queue: Queue, keys: list[FeedbackKey],
                 mine: dict[str, Feedback]) -> None:
        super().__init__(data)
        self.keys = {f"key-{key.pk}": key for key in keys}
        if queue.thumbs:
            self.fields[THUMBS] = forms.ChoiceField(
                required=False, label="thumbs", choices=[("up", "up"), ("down", "down")],
                initial=initial_value(mine.get(THUMBS)), widget=forms.RadioSelect)
        for name, key in self.keys.items():
            self.fields[name] = rubric_field(key, initial_value(mine.get(key.name)))
        note = mine.get(NOTE)
        self.fields["note"] = note_field(note.note if note else "")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        check_values(self, self.keys, data)
        check_note_of(self, data)
        if not self.errors and not any(data.get(n) for n in self.fields):
            self.add_error(None, "Give at least one value or a note, or skip the item (s).")
        return data


class PairForm(forms.Form):
    choice = forms.ChoiceField(label="Your choice", choices=CHOICES, widget=forms.RadioSelect,
                               error_messages={"required": "Say which is better: A, B or a tie."})

    def __init__(self, data: Any = None, *, initial_choice: str = "", note: str = "") -> None:
        super().__init__(data, initial={"choice": initial_choice})
        self.fields["note"] = note_field(note)
        self.fields["note"].label = "Why"

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        check_note_of(self, data)
        return data
