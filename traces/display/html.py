"""One step's HTML: the partial the run page, "load more", the replay and the live stream show.

Built in Python rather than the template language because it is the hot path of live runs:
every recorded version of every step is rendered once for its watchers, and the template
engine's ~80 variable lookups cost ~0.6 ms a render, the largest share of a live step's CPU
(`manage.py bench_live`). Every value a model, tool or user chose goes through `_e` (the same
escaping as Django's `escape`); only HTML this package made safe (highlighted payloads) is
put in as it is.
"""

from __future__ import annotations

import html
import re
from functools import lru_cache
from typing import Any

from django.urls import reverse
from django.utils.safestring import SafeString, mark_safe

from traces.display.figures import format_cost, format_duration, format_size, format_tokens
from traces.display.view import Payload, StepView, fact_label

LOADING = '<div class="payload-body muted">Loading…</div>'


_SPECIAL = re.compile(r"[&<>\"']")


def _e(value: Any) -> str:
    # Most values hold nothing to escape: one search is cheaper than escape's five replaces.
    text = str(value)
    return html.escape(text) if _SPECIAL.search(text) else text


# Links are reversed once per run and view, with this seq in place of every step's own
# (reverse() costs ~0.1 ms, three per new step); urls.py stays the one place they are written.
_SEQ = 987654321


@lru_cache(maxsize=512)
def _pattern(name: str, pk: Any, *rest: Any) -> str:
    return _e(reverse(name, args=(pk, _SEQ, *rest)))


def _url(name: str, pk: Any, seq: int, *rest: Any) -> str:
    return _pattern(name, pk, *rest).replace(str(_SEQ), str(int(seq)))


def step_html(step: StepView, run: Any, *, via: str = "") -> SafeString:
    """`run`: the Run (or anything with its pk); falsy for a page without step actions.
    `via`: a URL namespace ("review:") whose `step_payload` and `step_messages` open the
    folded parts instead of the run's own (a page that shows the run to someone who may not
    open its page); no step actions then."""
    pk = getattr(run, "pk", None)
    kind, seq, depth = _e(step.kind), _e(step.seq), _e(step.depth)
    state = " is-error" if step.status == "error" else (
        " is-running" if step.status == "running" else "")
    parts = [
        f'<article class="step k-{kind}{state}" id="step-{seq}" data-seq="{seq}" '
        f'data-kind="{kind}" data-depth="{depth}" style="--depth: {depth}">\n'
        '  <header class="step-head">\n'
        '    <button type="button" class="tree-toggle" aria-expanded="true" '
        'title="Fold the steps inside this one">▾</button>\n'
        f'    <a class="seq" href="?step={seq}" data-go="{seq}">#{seq}</a>\n'
        f'    <span class="kind-badge k-{kind}">{kind}</span>\n']
    if step.role and step.role != "agent":
        parts.append(f'    <span class="role" title="role">{_e(step.role)}</span>\n')
    if step.name:
        parts.append(f'    <code class="name">{_e(step.name)}</code>\n')
    if step.status != "ok":
        status = _e(step.status)
        parts.append(f'    <span class="status status-{status}">{status}</span>\n')
    parts.append(_figures(step))
    if run and not via:
        parts.append(_actions(step, run, pk))
    parts.append("  </header>\n")
    if step.facts:
        items = "".join(f"{_fact_head(key)}{_e(value)}</li>" for key, value in step.facts)
        parts.append(f'  <ul class="facts">{items}</ul>\n')
    if step.kind in ("tool", "approval"):
        parts.append('  <div class="field action"><div class="label">Action</div>'
                     f'<code>{_e(step.name)}</code></div>\n')
    for call in step.tool_calls:
        error = f' <span class="error">{_e(call.error)}</span>' if call.error else ""
        parts.append('  <div class="field action"><div class="label">Action</div>'
                     f'<code>{_e(call.name)}</code>{error}{call.arguments}</div>\n')
    for key, code in step.code:  # highlighted: safe
        parts.append(f'  <div class="field"><div class="label">{_e(key)}</div>{code}</div>\n')
    parts += [_payload(p, step, pk, via) for p in step.payloads if p.field == "input"]
    parts.append(_text(step, pk, via))
    parts += [_payload(p, step, pk, via) for p in step.payloads if p.field != "input"]
    if step.traceback:
        parts.append('  <details class="payload"><summary>Traceback</summary>'
                     f'<div class="hl"><pre>{_e(step.traceback)}</pre></div></details>\n')
    if step.is_llm:
        messages = _url(f"{via}step_messages", pk, step.seq)
        parts.append(
            f'  <details class="payload messages" hx-get="{messages}"'
            ' hx-trigger="toggle once" hx-target="find .payload-body">\n    <summary>Messages '
            '<span class="muted">— the conversation as the model saw it</span></summary>'
            f'{LOADING}</details>\n')
    if step.feedback:  # made safe by whoever answered the hook (agentlab/feedback/display.py)
        parts.append(f"  {step.feedback}\n")
    parts.append("</article>\n")
    return mark_safe("".join(parts))  # noqa: S308 (every value above is escaped)


@lru_cache(maxsize=1024)
def _fact_head(key: str) -> str:
    # The same few keys on every step of a run (a received span's otel.* meta): made once.
    return f'<li class="fact-{_e(key)}"><span>{_e(fact_label(key))}</span> '


def _figures(step: StepView) -> str:
    figures = []
    if step.offset_ms is not None:
        figures.append('<span title="started after the run\'s start">'
                       f'+{_e(format_duration(step.offset_ms))}</span>')
    if step.duration_ms is not None:
        figures.append(f'<span class="dur" title="duration">'
                       f'{_e(format_duration(step.duration_ms))}</span>')
    if step.tokens_in or step.tokens_out:
        figures.append(f'<span title="tokens in / out">{format_tokens(step.tokens_in)}→'
                       f'{format_tokens(step.tokens_out)} tok</span>')
    if step.cost_usd:
        figures.append(f"<span>{_e(format_cost(step.cost_usd))}</span>")
    inner = "".join(f"\n      {f}" for f in figures)
    return f'    <span class="figures">{inner}\n    </span>\n'


def _actions(step: StepView, run: Any, pk: Any) -> str:
    """Fork from this step, open an LLM call in the playground, where a replayed step came
    from."""
    meta, links = step.meta, []
    if meta.get("diverged_from") or meta.get("divergence"):
        since = f" from #{_e(meta['diverged_from'])}" if meta.get("diverged_from") else ""
        links.append(f'<span class="pill diverged" title="{_e(meta.get("divergence") or "")}">'
                     f"diverged{since}</span>")
    if meta.get("replayed"):
        links.append('<span class="pill replayed" title="served from the recorded step '
                     f'{_e(meta.get("source_seq", ""))}">'
                     f'{"edited" if meta.get("edited") else "replayed"}</span>')
    if isinstance(taken := meta.get("taken_over"), dict):
        links.append('<span class="pill taken-over" title="the worker running this run '
                     f'({_e(taken.get("from", "?"))}) stopped; {_e(taken.get("by", "?"))} '
                     f'continued it from its trace after step {_e(taken.get("after_seq", "?"))}'
                     f'">taken over after #{_e(taken.get("after_seq", "?"))}</span>')
    active = getattr(run, "is_active", False)
    if not (active() if callable(active) else active) and step.status != "running":
        links.append(f'<a href="{_url("run_fork", pk, step.seq)}" title="A new run: steps '
                     f'1–{_e(step.seq)} from the record, live after">Fork from here</a>')
    if step.kind == "llm":
        playground = _url("step_playground", pk, step.seq)
        links.append(f'<a href="{playground}" title="Edit this call '
                     'and run it again against any model profile">Playground</a>')
        links.append(f'<a href="{playground}?save=1#save-case" title="Save this request and '
                     'its reply, to send it again later from Playground cases">'
                     'Add to playground cases</a>')
    inner = "".join(f"\n      {link}" for link in links)
    return f'    <span class="step-actions">{inner}\n    </span>\n'


def _text(step: StepView, pk: Any, via: str = "") -> str:
    label = _e(step.text_label)
    if step.text is None:  # too long: fetched when opened
        return _lazy(_url(f"{via}step_payload", pk, step.seq, "text"),
                     f"{label} · {_e(format_size(step.text_size or 0))}")
    if not step.text:
        return ""
    body = step.text_html or f'<div class="text">{_e(step.text)}</div>'
    return f'  <div class="field text-field"><div class="label">{label}</div>{body}</div>\n'


def _payload(p: Payload, step: StepView, pk: Any, via: str = "") -> str:
    label, size = _e(p.label), _e(format_size(p.size or 0))
    if p.html and p.open:
        return (f'  <div class="field"><div class="label">{label} <span class="muted">{size}'
                f"</span></div>{p.html}</div>\n")
    if p.html:
        return f'  <details class="payload"><summary>{label} · {size}</summary>{p.html}</details>\n'
    return _lazy(_url(f"{via}step_payload", pk, step.seq, p.field),
                 f'{label} · {size} <span class="muted">(loaded when opened)</span>')


def _lazy(url: str, summary: str) -> str:
    """A folded payload fetched by htmx when it is first opened."""
    return (f'  <details class="payload lazy" hx-get="{url}" hx-trigger="toggle once" '
            f'hx-target="find .payload-body">\n    <summary>{summary}</summary>{LOADING}'
            "</details>\n")
