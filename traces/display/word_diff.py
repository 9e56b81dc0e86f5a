"""One side of a word diff as HTML (the diff page's changed text fields)."""

from __future__ import annotations

from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe


def chunks_html(chunks: list[tuple[str, str]], side: str) -> SafeString:
    """One side of a word diff: the left keeps deletions (<del>), the right insertions (<ins>);
    every chunk is escaped."""
    drop, mark, tag = ("insert", "delete", "del") if side == "left" else ("delete", "insert",
                                                                            "ins")
    parts = []
    for kind, text in chunks:
        if kind == drop:
            continue
        parts.append(f"<{tag}>{escape(text)}</{tag}>" if kind == mark else str(escape(text)))
    return mark_safe("".join(parts))  # noqa: S308 (escaped above)
