"""Feedback beside each step and on the run as a whole: the "strip" of one target (thumbs with
their counts, the values and notes given, each with who and when, and "Feedback…" that opens
the form), answering the run page's hooks `run_feedback` and `step_feedback`
(traces/views/run.py asks them; the record opens without them).

Built in Python like the step partial it sits in (traces/display/html.py): a page shows up to
2,000 steps, and a template render per step would cost more than the steps themselves. Every
value a person typed goes through `escape`.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from django.http import HttpRequest
from django.middleware.csrf import get_token
from django.urls import reverse
from django.utils import timezone
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from agentlab.feedback.models import RUN, Feedback
from agentlab.feedback.values import THUMBS
from traces.models import Run

# A drawn thumb (Lucide's "thumbs-up", ISC licence), turned over for "down": an emoji shows as
# an empty box where the browser has no emoji font.
THUMB = ('<svg viewBox="0 0 24 24" width="16" height="16" aria-hidden="true" fill="none" '
         'stroke="currentColor" stroke-width="2" stroke-linecap="round" '
         'stroke-linejoin="round"><path d="M7 10v12"/><path d="M15 5.88 14 10h5.83a2 2 0 0 1 '
         '1.92 2.56l-2.33 8A2 2 0 0 1 17.5 22H4a2 2 0 0 1-2-2v-8a2 2 0 0 1 2-2h2.76a2 2 0 0 0 '
         '1.79-1.11L12 2a3.13 3.13 0 0 1 3 3.88Z"/></svg>')
THUMB_BUTTONS = (("up", THUMB, "Thumbs up"), ("down", THUMB, "Thumbs down"))


def rows_for(run: Run, seqs: Iterable[int]) -> dict[int, list[Feedback]]:
    """The feedback on `run`'s targets `seqs` (0: the run), by target, oldest first."""
    wanted = set(seqs)
    found: dict[int, list[Feedback]] = defaultdict(list)
    if not wanted:
        return found
    rows = Feedback.objects.filter(run=run, seq__gte=min(wanted), seq__lte=max(wanted)
                                   ).select_related("key")
    for row in rows.order_by("seq", "created", "pk"):
        if row.seq in wanted:
            found[row.seq].append(row)
    return found


def run_feedback(request: HttpRequest, run: Run) -> SafeString:
    """The run page's panel: feedback on the run as a whole (hook `run_feedback`)."""
    return strip(request, run, RUN, rows_for(run, [RUN])[RUN])


def step_feedback(request: HttpRequest, run: Run, seqs: list[int]) -> dict[int, SafeString]:
    """Each step's strip (hook `step_feedback`): one query for the page of steps."""
    found = rows_for(run, seqs)
    return {seq: strip(request, run, seq, found.get(seq, [])) for seq in seqs}


def target_words(seq: int) -> str:
    return "the run" if seq == RUN else f"step {seq}"


def strip(request: HttpRequest, run: Run, seq: int, rows: list[Feedback]) -> SafeString:
    user, token = request.user, escape(get_token(request))
    target = target_words(seq)
    thumbs_url = escape(reverse("feedback:thumbs", args=[run.pk, seq]))
    form_url = escape(reverse("feedback:form", args=[run.pk, seq]))
    mine = next((r.label for r in rows if r.name == THUMBS and r.author_id == user.pk), "")
    buttons = []
    for value, icon, words in THUMB_BUTTONS:
        givers = [r for r in rows if r.name == THUMBS and r.label == value]
        names = ", ".join(r.who for r in givers[:10]) + (" …" if len(givers) > 10 else "")
        title = f"{words} on {target}" + (f" — {names}" if names else "")
        buttons.append(
            f'<button type="submit" name="value" value="{value}" class="thumb thumb-{value}" '
            f'aria-pressed="{"true" if mine == value else "false"}" '
            f'aria-label="{words} on {target}" title="{escape(title)}">{icon}'
            f'<span class="count">{len(givers) or ""}</span></button>')
    items = [item(request, row) for row in rows if row.name != THUMBS or row.note]
    listed = f'<ul class="fb-items">{"".join(items)}</ul>' if items else ""
    return mark_safe(  # noqa: S308 (every value is escaped above)
        f'<div class="feedback" id="feedback-{seq}" data-feedback="{seq}">'
        f'<form class="fb-thumbs" method="post" action="{thumbs_url}" hx-post="{thumbs_url}" '
        'hx-target="closest .feedback" hx-swap="outerHTML">'
        f'<input type="hidden" name="csrfmiddlewaretoken" value="{token}">{"".join(buttons)}'
        f'</form>{listed}'
        f'<details class="fb-more" hx-get="{form_url}" hx-trigger="toggle once" '
        'hx-target="find .fb-form-body"><summary>Feedback…</summary>'
        f'<div class="fb-form-body"><a href="{form_url}">Give feedback on {target}</a></div>'
        '</details></div>')


def item(request: HttpRequest, row: Feedback) -> str:
    """One value or note given: what, the note, who and when; Edit and Delete for its author."""
    when = timezone.localtime(row.created)
    edited = " (edited)" if row.updated > row.created else ""
    parts = [f'<li class="fb-item fb-{escape(row.source)}" id="fb-{row.pk}">']
    if row.name != "note":
        described = escape(row.key.description) if row.key and row.key.description else ""
        parts.append(f'<span class="fb-value" title="{described}">{escape(row.shown)}</span>')
    if row.note:
        parts.append(f'<span class="fb-note">{escape(row.note)}</span>')
    parts.append(f'<span class="fb-who muted" title="{escape(when.isoformat())}">'
                 f'{escape(row.who)} · {when:%Y-%m-%d %H:%M}{edited}</span>')
    if row.editable_by(request.user):
        edit_url = escape(reverse("feedback:edit", args=[row.pk]))
        delete_url = escape(reverse("feedback:delete", args=[row.pk]))
        parts.append(
            f'<span class="fb-actions"><a href="{edit_url}" hx-get="{edit_url}" '
            f'hx-target="#fb-{row.pk}" hx-swap="outerHTML">Edit</a>'
            f'<form method="post" action="{delete_url}" hx-post="{delete_url}" '
            'hx-target="closest .feedback" hx-swap="outerHTML" '
            'hx-confirm="Delete this feedback?">'
            f'<input type="hidden" name="csrfmiddlewaretoken" value="{escape(get_token(request))}">'
            '<button type="submit" class="link">Delete</button></form></span>')
    parts.append("</li>")
    return "".join(parts)


def strip_for(request: HttpRequest, run: Run, seq: int) -> SafeString:
    """One target's strip as it is now (after a write, for htmx to swap in)."""
    return strip(request, run, seq, rows_for(run, [seq])[seq])
