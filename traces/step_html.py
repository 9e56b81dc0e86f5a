"""One step's HTML: the partial the run page, "load more", the replay and the live stream show.

Built in Python rather than the template language because it is the hot path of live runs:
every recorded version of every step is rendered once for its watchers, and the template
engine's ~80 variable lookups cost ~0.6 ms a render, the largest share of a live step's CPU
(`manage.py bench_live`). format_html escapes every value, as the template did.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from django.urls import reverse
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from traces.render import Payload, StepView, format_cost, format_duration, format_size

LOADING = '<div class="payload-body muted">Loading…</div>'


@lru_cache(maxsize=1024)  # a step's versions share their links
def _url(name: str, *args: Any) -> str:
    return reverse(name, args=args)


def step_html(step: StepView, run: Any) -> SafeString:
    """`run`: the Run (or anything with its pk); falsy for a page without step actions."""
    pk = getattr(run, "pk", None)
    state = " is-error" if step.status == "error" else (
        " is-running" if step.status == "running" else "")
    parts = [format_html(
        '<article class="step k-{kind}{state}" id="step-{seq}" data-seq="{seq}" '
        'data-kind="{kind}" data-depth="{depth}" style="--depth: {depth}">\n'
        '  <header class="step-head">\n'
        '    <button type="button" class="tree-toggle" aria-expanded="true" '
        'title="Fold the steps inside this one">▾</button>\n'
        '    <a class="seq" href="?step={seq}" data-go="{seq}">#{seq}</a>\n'
        '    <span class="kind-badge k-{kind}">{kind}</span>\n',
        kind=step.kind, state=state, seq=step.seq, depth=step.depth)]
    if step.role and step.role != "agent":
        parts.append(format_html('    <span class="role" title="role">{}</span>\n', step.role))
    if step.name:
        parts.append(format_html('    <code class="name">{}</code>\n', step.name))
    if step.status != "ok":
        parts.append(format_html('    <span class="status status-{0}">{0}</span>\n',
                                 step.status))
    parts.append(_figures(step))
    if run:
        parts.append(_actions(step, run, pk))
    parts.append("  </header>\n")
    if step.facts:
        items = "".join(format_html('<li class="fact-{0}"><span>{0}</span> {1}</li>', key, value)
                        for key, value in step.facts)
        parts.append(f'  <ul class="facts">{items}</ul>\n')
    if step.kind in ("tool", "approval"):
        parts.append(format_html('  <div class="field action"><div class="label">Action</div>'
                                 '<code>{}</code></div>\n', step.name))
    for call in step.tool_calls:
        error = format_html(' <span class="error">{}</span>', call.error) if call.error else ""
        parts.append(format_html('  <div class="field action"><div class="label">Action</div>'
                                 '<code>{}</code>{}{}</div>\n', call.name, error, call.arguments))
    for key, html in step.code:
        parts.append(format_html('  <div class="field"><div class="label">{}</div>{}</div>\n',
                                 key, html))
    parts += [_payload(p, step, pk) for p in step.payloads if p.field == "input"]
    parts.append(_text(step, pk))
    parts += [_payload(p, step, pk) for p in step.payloads if p.field != "input"]
    if step.traceback:
        parts.append(format_html('  <details class="payload"><summary>Traceback</summary>'
                                 '<div class="hl"><pre>{}</pre></div></details>\n',
                                 step.traceback))
    if step.is_llm:
        parts.append(format_html(
            '  <details class="payload messages" hx-get="{}" hx-trigger="toggle once" '
            'hx-target="find .payload-body">\n    <summary>Messages <span class="muted">— the '
            'conversation as the model saw it</span></summary>{}</details>\n',
            _url("step_messages", pk, step.seq), mark_safe(LOADING)))
    parts.append("</article>\n")
    return mark_safe("".join(parts))  # every part above is escaped or built from escaped parts


def _figures(step: StepView) -> str:
    figures = []
    if step.offset_ms is not None:
        figures.append(format_html('<span title="started after the run\'s start">+{}</span>',
                                   format_duration(step.offset_ms)))
    if step.duration_ms is not None:
        figures.append(format_html('<span class="dur" title="duration">{}</span>',
                                   format_duration(step.duration_ms)))
    if step.tokens_in or step.tokens_out:
        figures.append(format_html('<span title="tokens in / out">{}→{} tok</span>',
                                   f"{step.tokens_in or 0:,}", f"{step.tokens_out or 0:,}"))
    if step.cost_usd:
        figures.append(format_html("<span>{}</span>", format_cost(step.cost_usd)))
    inner = "".join(f"\n      {f}" for f in figures)
    return f'    <span class="figures">{inner}\n    </span>\n'


def _actions(step: StepView, run: Any, pk: Any) -> str:
    """Fork from this step, open an LLM call in the playground, where a replayed step came
    from."""
    meta, links = step.meta, []
    if meta.get("diverged_from") or meta.get("divergence"):
        since = format_html(" from #{}", meta["diverged_from"]) if meta.get("diverged_from") else ""
        links.append(format_html('<span class="pill diverged" title="{}">diverged{}</span>',
                                 meta.get("divergence") or "", since))
    if meta.get("replayed"):
        links.append(format_html(
            '<span class="pill replayed" title="served from the recorded step {}">{}</span>',
            meta.get("source_seq", ""), "edited" if meta.get("edited") else "replayed"))
    active = getattr(run, "is_active", False)
    if not (active() if callable(active) else active):
        links.append(format_html(
            '<a href="{}" title="A new run: steps 1–{} from the record, live after">Fork from '
            'here</a>', _url("run_fork", pk, step.seq), step.seq))
    if step.kind == "llm":
        links.append(format_html(
            '<a href="{}" title="Edit this call and run it again against any model profile">'
            'Playground</a>', _url("step_playground", pk, step.seq)))
    inner = "".join(f"\n      {link}" for link in links)
    return f'    <span class="step-actions">{inner}\n    </span>\n'


def _text(step: StepView, pk: Any) -> str:
    if step.text is None:  # too long: fetched when opened
        return format_html(
            '  <details class="payload lazy" hx-get="{}" hx-trigger="toggle once" '
            'hx-target="find .payload-body">\n    <summary>{} · {}</summary>{}</details>\n',
            _url("step_payload", pk, step.seq, "text"), step.text_label,
            format_size(step.text_size or 0), mark_safe(LOADING))
    if not step.text:
        return ""
    body = step.text_html or format_html('<div class="text">{}</div>', step.text)
    return format_html('  <div class="field text-field"><div class="label">{}</div>{}</div>\n',
                       step.text_label, body)


def _payload(p: Payload, step: StepView, pk: Any) -> str:
    size = format_size(p.size or 0)
    if p.html and p.open:
        return format_html('  <div class="field"><div class="label">{} <span class="muted">{}'
                           '</span></div>{}</div>\n', p.label, size, p.html)
    if p.html:
        return format_html('  <details class="payload"><summary>{} · {}</summary>{}</details>\n',
                           p.label, size, p.html)
    return format_html(
        '  <details class="payload lazy" hx-get="{}" hx-trigger="toggle once" '
        'hx-target="find .payload-body">\n    <summary>{} · {} <span class="muted">(loaded when '
        'opened)</span></summary>{}</details>\n',
        _url("step_payload", pk, step.seq, p.field), p.label, size, mark_safe(LOADING))

