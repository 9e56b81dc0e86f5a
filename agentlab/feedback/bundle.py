"""Feedback in the run bundle: the optional section "feedback" (docs/BUNDLE.md "Sections"),
with a version of its own (hook `bundle_sections`, traces.bundle.BundleSection).

On import each item is kept as a record of what its author said: the author's name as text,
marked imported, editable by nobody (the importing user is not its author); a value names its
key by name, linked to this installation's key of that name when there is one.
"""

from __future__ import annotations

import math
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from agentlab.feedback.models import RUN, SOURCES, Feedback, FeedbackKey
from agentlab.feedback.values import NAME_CHARS, NAME_RE, RESERVED
from traces.bundle import BundleError, BundleSection
from traces.models import Run

VERSION = 1
MAX_ITEMS = 10_000
AUTHOR_CHARS = 150
FIELDS = {"seq", "name", "score", "label", "note", "source", "author", "created", "updated"}


def sections() -> dict[str, BundleSection]:
    return {"feedback": FeedbackSection()}


class FeedbackSection:
    def export(self, run: Run) -> dict[str, Any] | None:
        rows = list(Feedback.objects.filter(run=run).order_by("seq", "created", "pk"))
        if not rows:
            return None
        return {"version": VERSION, "items": [{
            "seq": r.seq, "name": r.name, "score": r.score, "label": r.label, "note": r.note,
            "source": r.source, "author": r.author_name, "created": r.created.isoformat(),
            "updated": r.updated.isoformat()} for r in rows]}

    def check(self, data: Any, seqs: set[int]) -> list[dict[str, Any]]:
        if not isinstance(data, dict):
            raise BundleError("expected an object with version and items", "feedback")
        if data.get("version") != VERSION or isinstance(data.get("version"), bool):
            raise BundleError(f"unknown feedback version {data.get('version')!r} (this "
                              f"installation reads version {VERSION})", "feedback.version")
        items = data.get("items")
        if not isinstance(items, list):
            raise BundleError("expected an array", "feedback.items")
        if len(items) > MAX_ITEMS:
            raise BundleError(f"{len(items):,} items; at most {MAX_ITEMS:,} are allowed",
                              "feedback.items")
        seen: dict[tuple[Any, ...], int] = {}
        checked = []
        for i, item in enumerate(items):
            where = f"feedback.items[{i}]"
            checked.append(_item(item, seqs, where))
            one = tuple(checked[-1][k] for k in ("seq", "name", "source", "author"))
            if one in seen:
                raise BundleError(f"the same author's {one[1]} on the same target twice "
                                  f"(first at feedback.items[{seen[one]}])", where)
            seen[one] = i
        return checked

    def restore(self, run: Run, checked: list[dict[str, Any]], user: Any) -> None:
        keys = {k.name: k for k in FeedbackKey.objects.filter(
            name__in={item["name"] for item in checked})}
        with transaction.atomic():
            Feedback.objects.bulk_create([
                Feedback(run=run, seq=item["seq"], name=item["name"], key=keys.get(item["name"]),
                         score=item["score"], label=item["label"], note=item["note"],
                         source=item["source"], author=None, author_name=item["author"],
                         imported=True, created=item["created"], updated=item["updated"])
                for item in checked], batch_size=500)


def _item(item: Any, seqs: set[int], where: str) -> dict[str, Any]:
    if not isinstance(item, dict):
        raise BundleError("expected an object", where)
    if extra := sorted(set(item) - FIELDS):
        raise BundleError(f"unknown field(s): {', '.join(extra)}", where)
    seq = item.get("seq")
    if type(seq) is not int or (seq != RUN and seq not in seqs):
        raise BundleError(f"{seq!r} is neither 0 (the run) nor the seq of a step", f"{where}.seq")
    name = item.get("name")
    if not isinstance(name, str) or not (name in RESERVED or (
            NAME_RE.fullmatch(name) and len(name) <= NAME_CHARS)):
        raise BundleError(f"{name!r} is not a feedback key's name", f"{where}.name")
    score = item.get("score")
    if score is not None and (type(score) not in (int, float) or not math.isfinite(score)):
        raise BundleError(f"expected a number or null, got {score!r}", f"{where}.score")
    out = {"seq": seq, "name": name, "score": None if score is None else float(score)}
    for field, limit in (("label", settings.AGENTLAB_FEEDBACK_LABEL_CHARS),
                         ("note", settings.AGENTLAB_FEEDBACK_NOTE_CHARS),
                         ("author", AUTHOR_CHARS)):
        text = item.get(field, "")
        if not isinstance(text, str):
            raise BundleError("expected a string", f"{where}.{field}")
        if len(text) > limit:
            raise BundleError(f"a text of {len(text):,} characters; at most {limit:,} are "
                              "allowed", f"{where}.{field}")
        out[field] = text
    out["author"] = out["author"] or "unknown"
    source = item.get("source", "human")
    if source not in dict(SOURCES):
        raise BundleError(f"{source!r} is not one of {', '.join(dict(SOURCES))}",
                          f"{where}.source")
    out["source"] = source
    for field in ("created", "updated"):
        text = item.get(field)
        try:
            moment = parse_datetime(text) if isinstance(text, str) else None
        except ValueError:
            moment = None
        if text is not None and (moment is None or moment.tzinfo is None):
            raise BundleError(f"{text!r} is not an ISO 8601 date and time with its offset",
                              f"{where}.{field}")
        out[field] = moment
    out["created"] = out["created"] or timezone.now()
    out["updated"] = out["updated"] or out["created"]
    return out
