"""The small forms of feedback: a value per key and a note for one target, and the edit of one
row. Fields come only from the keys defined in the admin (a whitelist): any other parameter
of a POST is ignored."""

from __future__ import annotations

from typing import Any

from django import forms
from django.conf import settings

from agentlab.feedback.models import Feedback, FeedbackKey
from agentlab.feedback.values import NOTE, THUMBS, FeedbackError, check_note, read_value

BOOLEAN_CHOICES = [("", "—"), ("true", "yes"), ("false", "no")]


def value_field(key: FeedbackKey | None, initial: str = "") -> forms.Field:
    """The input of one key: a number in its range, one of its labels, or yes/no."""
    label = key.name if key else "Value"
    help_text = key.description if key else ""
    if key is None or key.kind == "numeric":
        attrs: dict[str, Any] = {"step": "any", "inputmode": "decimal"}
        if key is not None:
            attrs |= {"min": f"{key.minimum:g}", "max": f"{key.maximum:g}",
                      "placeholder": f"{key.minimum:g}–{key.maximum:g}"}
        return forms.CharField(required=False, label=label, help_text=help_text,
                               initial=initial, widget=forms.NumberInput(attrs=attrs))
    if key.kind == "categories":
        choices = [("", "—")] + [(x, x) for x in key.spec.labels]
        return forms.ChoiceField(required=False, label=label, help_text=help_text,
                                 choices=choices, initial=initial)
    return forms.ChoiceField(required=False, label=label, help_text=help_text,
                             choices=BOOLEAN_CHOICES, initial=initial)


def initial_value(row: Feedback | None) -> str:
    """What a form shows of a row given before: its label, else its score."""
    if row is None:
        return ""
    if row.label:
        return row.label
    return "" if row.score is None else f"{row.score:g}"


def note_field(initial: str = "") -> forms.CharField:
    limit = settings.AGENTLAB_FEEDBACK_NOTE_CHARS
    # No max_length: the browser would cut a pasted text short without a word; the form says
    # how long it was and what the limit is (values.check_note).
    return forms.CharField(required=False, label="Note", initial=initial,
                           help_text=f"At most {limit:,} characters.",
                           widget=forms.Textarea(attrs={"rows": 2, "data-limit": limit}))


class GiveForm(forms.Form):
    """Every key's value and a note, on one target, filled with what the user gave before."""

    def __init__(self, data: Any = None, *, keys: list[FeedbackKey],
                 mine: dict[str, Feedback]) -> None:
        super().__init__(data)
        self.keys = {f"key-{key.pk}": key for key in keys}
        for name, key in self.keys.items():
            self.fields[name] = value_field(key, initial_value(mine.get(key.name)))
        note = mine.get(NOTE)
        self.fields["note"] = note_field(note.note if note else "")

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        check_values(self, self.keys, data)
        check_note_of(self, data)
        return data


def check_values(form: forms.Form, keys: dict[str, FeedbackKey], data: dict[str, Any]) -> None:
    """Each given value read by its key's spec (field name -> key); an error on its field."""
    for name, key in keys.items():
        if data.get(name):
            try:
                read_value(key.spec, data[name])
            except FeedbackError as e:
                form.add_error(name, str(e))


def check_note_of(form: forms.Form, data: dict[str, Any]) -> None:
    """The form's note within AGENTLAB_FEEDBACK_NOTE_CHARS; an error on its field."""
    try:
        data["note"] = check_note(data.get("note", ""),
                                  limit=settings.AGENTLAB_FEEDBACK_NOTE_CHARS)
    except FeedbackError as e:
        form.add_error("note", str(e))


class EditForm(forms.Form):
    """One row's value (by its key's rules) and its note."""

    def __init__(self, data: Any = None, *, row: Feedback) -> None:
        super().__init__(data)
        self.row = row
        if row.name == THUMBS:
            self.fields["value"] = forms.ChoiceField(
                label="Thumbs", choices=[("up", "up"), ("down", "down")],
                initial=row.label)
        elif row.name != NOTE and row.key is not None:
            self.fields["value"] = value_field(row.key, initial_value(row))
            self.fields["value"].required = True
        self.fields["note"] = note_field(row.note)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        if self.row.key is not None:
            check_values(self, {"value": self.row.key}, data)
        check_note_of(self, data)
        if self.row.name == NOTE and "note" not in self.errors and not data["note"]:
            self.add_error("note", "A note cannot be blank: delete it instead.")
        return data
