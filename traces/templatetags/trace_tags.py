"""Template filters of the trace viewer: highlighting (Pygments) and figures people read."""

from __future__ import annotations

from typing import Any

from django import template
from django.utils.html import conditional_escape, format_html, json_script
from django.utils.safestring import SafeString, mark_safe

from traces.display import figures, labels
from traces.display import highlight as hl
from traces.display.html import step_html as _step_html
from traces.display.view import StepView
from traces.display.word_diff import chunks_html
from traces.schema import ACTIVE_STATUSES, FINISHED_STATUSES

register = template.Library()


@register.filter
def linked(value: Any, url: str | None) -> SafeString:
    """`value` as a link to `url`, or as plain text where there is no url (a figure that
    links to the runs behind it when there are any)."""
    if url:
        return format_html('<a href="{}">{}</a>', url, value)
    return conditional_escape(value)


@register.simple_tag
def step_html(step: StepView, run: Any = None) -> SafeString:
    """One step's article (traces/display/html.py)."""
    return _step_html(step, run)


@register.simple_tag
def run_statuses() -> SafeString:
    """The run statuses, for the page's scripts: `<script id="run-statuses">` holding
    {"active": [...], "finished": [...]} (traces/schema.py defines them once)."""
    return json_script({"active": ACTIVE_STATUSES, "finished": FINISHED_STATUSES,
                        "words": labels.STATUS_WORDS}, "run-statuses")


@register.filter
def status_word(status: str | None) -> str:
    """A run's status in words: "finished with an answer", "stopped by a limit", "failed"."""
    return labels.status_word(status)


@register.simple_tag
def status_badge(status: str | None, live: bool = False) -> SafeString:
    """The status pill: its words, what it means on hover; `live`: live.js keeps it current."""
    value = str(status or "")
    return format_html('<span class="status status-{}"{} title="{}">{}</span>', value,
                       mark_safe(' data-live="status"') if live else "",  # noqa: S308
                       labels.status_help(value), labels.status_word(value))


@register.filter
def derived(run: Any) -> str:
    """What a run made from another is: a "replay" (no fork step), a "resume" (a fork at the
    last step, to continue) or a "fork"; "" for a run of its own."""
    if not getattr(run, "parent_run_id", None):
        return ""
    if getattr(run, "fork_seq", None) is None:
        return "replay"
    snapshot = getattr(run, "agent_snapshot", None)
    fork = snapshot.get("fork") if isinstance(snapshot, dict) else None
    return "resume" if isinstance(fork, dict) and fork.get("resume") else "fork"


@register.filter
def status_help(status: str | None) -> str:
    return labels.status_help(status)


@register.filter
def paradigm(key: str | None) -> str:
    """A paradigm's display name ("multi_agent" -> "Multi-Agent")."""
    return labels.paradigm_name(key)


@register.filter
def highlight(code: Any, lexer: str = "") -> SafeString:
    """`{{ value|highlight:"sql" }}`; without a lexer, guessed (JSON, diff, SQL, plain)."""
    if not isinstance(code, str):
        return hl.highlight_value(code)
    return hl.highlight(code, lexer or hl.guess_lexer(code))


@register.filter
def duration(ms: float | None) -> str:
    return figures.format_duration(ms)


@register.filter
def tokens(count: int | None) -> str:
    return figures.format_tokens(count)


@register.filter
def cost(usd: float | None) -> str:
    return figures.format_cost(usd)


@register.filter
def percent(share: float | None) -> str:
    return figures.format_percent(share)


@register.filter
def size(chars: int | None) -> str:
    return figures.format_size(chars or 0)


@register.filter
def signed(value: float | None, kind: str = "") -> str:
    """A delta with its sign, formatted like its figure ("+3", "-120 ms", "+$0.002")."""
    if value is None:
        return "—"
    sign = "+" if value > 0 else "-" if value < 0 else "±"
    magnitude = abs(value)
    if kind == "ms":
        text = figures.format_duration(magnitude)
    elif kind == "cost":
        text = figures.format_cost(magnitude)
    else:
        text = f"{magnitude:,.0f}"
    return f"{sign}{text}"


@register.filter
def diff_side(chunks: list[tuple[str, str]], side: str) -> SafeString:
    return chunks_html(chunks, side)
