"""Template filters of the trace viewer: highlighting (Pygments) and figures people read."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString

from traces import highlight as hl
from traces import render
from traces.step_html import step_html as _step_html

register = template.Library()


@register.filter
def linked(value: Any, url: str | None) -> SafeString:
    """`value` as a link to `url`, or as plain text where there is no url (a figure that
    links to the runs behind it when there are any)."""
    if url:
        return format_html('<a href="{}">{}</a>', url, value)
    return conditional_escape(value)


@register.simple_tag
def step_html(step: render.StepView, run: Any = None) -> SafeString:
    """One step's article (traces/step_html.py)."""
    return _step_html(step, run)


@register.filter
def highlight(code: Any, lexer: str = "") -> SafeString:
    """`{{ value|highlight:"sql" }}`; without a lexer, guessed (JSON, diff, SQL, plain)."""
    if not isinstance(code, str):
        return hl.highlight_value(code)
    return hl.highlight(code, lexer or hl.guess_lexer(code))


@register.filter
def highlight_json(value: Any) -> SafeString:
    return hl.highlight(value if isinstance(value, str) else hl.to_json(value), "json")


@register.filter
def duration(ms: float | None) -> str:
    return render.format_duration(ms)


@register.filter
def tokens(count: int | None) -> str:
    return render.format_tokens(count)


@register.filter
def cost(usd: float | None) -> str:
    return render.format_cost(usd)


@register.filter
def size(chars: int | None) -> str:
    return render.format_size(chars or 0)


@register.filter
def signed(value: float | None, kind: str = "") -> str:
    """A delta with its sign, formatted like its figure ("+3", "-120 ms", "+$0.002")."""
    if value is None:
        return "—"
    sign = "+" if value > 0 else "-" if value < 0 else "±"
    magnitude = abs(value)
    if kind == "ms":
        text = render.format_duration(magnitude)
    elif kind == "cost":
        text = render.format_cost(magnitude)
    else:
        text = f"{magnitude:,.0f}"
    return f"{sign}{text}"


@register.filter
def diff_side(chunks: list[tuple[str, str]], side: str) -> SafeString:
    return render.chunks_html(chunks, side)
