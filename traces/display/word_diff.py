"""One side of a word diff as HTML (the diff page's changed text fields).

Long unchanged stretches are folded to a few lines of context around each change (a
`<details>` that opens to the whole stretch), so the change itself is on screen and never
cut off below a long shared prefix such as an llm request's system prompt. A "note" chunk
(a field too long to diff, traces.diff) is shown on both sides, first.
"""

from __future__ import annotations

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

CONTEXT_LINES = 3  # unchanged lines kept next to a change
CONTEXT_CHARS = 160  # on one long line: characters kept next to a change
FOLD_LINES = 4  # a middle of unchanged lines longer than this is folded
FOLD_CHARS = 300  # … or of more characters than this


def chunks_html(chunks: list[tuple[str, str]], side: str) -> SafeString:
    """One side of a word diff: the left keeps deletions (<del>), the right insertions (<ins>);
    every chunk is escaped."""
    drop, mark, tag = ("insert", "delete", "del") if side == "left" else ("delete", "insert",
                                                                            "ins")
    notes = [text for kind, text in chunks if kind == "note"]
    kept = [(kind, text) for kind, text in chunks if kind not in (drop, "note")]
    parts = [f'<span class="diff-note muted">{escape(text)}</span>\n' for text in notes]
    for i, (kind, text) in enumerate(kept):
        if kind == mark:
            parts.append(f"<{tag}>{escape(text)}</{tag}>")
        else:
            parts.append(_equal(text, first=i == 0, last=i == len(kept) - 1))
    return mark_safe("".join(parts))  # noqa: S308 (escaped above)


def _equal(text: str, *, first: bool, last: bool) -> str:
    """An unchanged stretch: whole when short; else its ends next to the changes (at most
    CONTEXT_LINES lines and CONTEXT_CHARS characters each), the middle folded. The first
    stretch keeps only its end, the last only its start."""
    head = "" if first else _lines(text[:CONTEXT_CHARS], from_end=False)
    tail = "" if last else _lines(text[-CONTEXT_CHARS:], from_end=True)
    middle = text[len(head):len(text) - len(tail)]
    lines = middle.count("\n")
    if len(middle) < FOLD_CHARS and lines < FOLD_LINES:
        return str(escape(text))
    what = f"{lines:,} unchanged lines" if lines > 1 else f"{len(middle):,} unchanged characters"
    return _fold(head, middle, tail, what)


def _lines(text: str, *, from_end: bool) -> str:
    """At most CONTEXT_LINES lines of `text`, from its start or its end."""
    parts = text.splitlines(keepends=True)
    return "".join(parts[-CONTEXT_LINES:] if from_end else parts[:CONTEXT_LINES])


def _fold(head: str, middle: str, tail: str, what: str) -> str:
    return (f'{escape(head)}<details class="same"><summary>… {what}</summary>'
            f"{escape(middle)}</details>{escape(tail)}")
