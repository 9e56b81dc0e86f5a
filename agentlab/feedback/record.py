"""Writing feedback: the only place rows are made, changed or removed, so every write is
checked the same way (the value against its key, the sizes) and reaches Phoenix the same way
(agentlab/feedback/phoenix.py, once the transaction commits).

Who may write is the caller's question (views.py asks traces.access for the run, and
`Feedback.editable_by` for a row); these functions take an author they trust.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from agentlab.feedback import phoenix
from agentlab.feedback.models import RUN, Feedback, FeedbackKey
from agentlab.feedback.values import (
    NOTE,
    THUMBS,
    FeedbackError,
    Value,
    check_label,
    check_note,
    read_value,
    thumb,
)
from traces.models import Run


def check_target(run: Run, seq: int) -> int:
    """`seq` if it names the run (0) or one of its steps, else FeedbackError."""
    if seq != RUN and not run.steps.filter(seq=seq).exists():
        raise FeedbackError(f"Run {run.pk} has no step {seq}.")
    return seq


def _note(text: str) -> str:
    return check_note(text, limit=settings.AGENTLAB_FEEDBACK_NOTE_CHARS)


def give(run: Run, seq: int, *, author: Any = None, scorer: str = "", name: str,
         value: Value, note: str = "", key: FeedbackKey | None = None) -> Feedback:
    """Set `author`'s (or the named `scorer`'s) `name` feedback on the run or step `seq`: a new
    row, or their earlier one changed (one value per key, target and author)."""
    if (author is None) == (not scorer):
        raise ValueError("feedback comes from a person or from a named scorer")
    check_target(run, seq)
    label = check_label(value.label, limit=settings.AGENTLAB_FEEDBACK_LABEL_CHARS)
    now = timezone.now()
    fields = {"score": value.score, "label": label, "note": _note(note), "key": key,
              "updated": now}
    with transaction.atomic():
        if author is not None:
            row, created = Feedback.objects.select_for_update().get_or_create(
                run=run, seq=seq, name=name, author=author,
                defaults={**fields, "created": now, "author_name": author.get_username()})
        else:
            row, created = Feedback.objects.select_for_update().get_or_create(
                run=run, seq=seq, name=name, author=None, source="scorer", author_name=scorer,
                defaults={**fields, "created": now})
        if not created:
            for field, v in fields.items():
                setattr(row, field, v)
            row.save(update_fields=[*fields])
        phoenix.on_commit_send(row)
    return row


def give_key(run: Run, seq: int, author: Any, key: FeedbackKey, raw: str,
             note: str = "") -> Feedback:
    """A person's value for `key`, as typed or chosen (`raw`)."""
    return give(run, seq, author=author, name=key.name, key=key,
                value=read_value(key.spec, raw), note=note)


def give_note(run: Run, seq: int, author: Any, text: str) -> Feedback | None:
    """A note on its own; a blank note removes the author's note."""
    if not (text := _note(text)):
        old = Feedback.objects.filter(run=run, seq=seq, name=NOTE, author=author).first()
        if old is not None:
            remove(old)
        return None
    return give(run, seq, author=author, name=NOTE, value=Value(None, ""), note=text)


def toggle_thumb(run: Run, seq: int, author: Any, direction: str) -> Feedback | None:
    """One click: thumbs up (or down); the same thumb again takes it back."""
    value = thumb(direction)
    mine = Feedback.objects.filter(run=run, seq=seq, name=THUMBS, author=author).first()
    if mine is not None and mine.label == value.label:
        remove(mine)
        return None
    return give(run, seq, author=author, name=THUMBS, value=value,
                note=mine.note if mine else "")


def edit(row: Feedback, raw: str, note: str) -> Feedback:
    """Change a row's value (as typed: `raw`) and note; its key's rules apply as when given."""
    if row.name == THUMBS:
        value = thumb(raw)
    elif row.name == NOTE:
        value = Value(None, "")
        if not _note(note):
            raise FeedbackError("A note cannot be blank: delete it instead.")
    elif row.key is not None:
        value = read_value(row.key.spec, raw)
    else:  # its key is gone (or it was never defined here): only the note can change
        value = Value(row.score, row.label)
    row.score, row.label, row.note = value.score, value.label, _note(note)
    row.updated = timezone.now()
    with transaction.atomic():
        row.save(update_fields=["score", "label", "note", "updated"])
        phoenix.on_commit_send(row)
    return row


def remove(row: Feedback) -> None:
    with transaction.atomic():
        phoenix.on_commit_delete(row)
        row.delete()
