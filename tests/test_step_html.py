"""The step partial (traces/display/html.py) keeps what a model, a tool or a crash wrote as
text: a tool call's error and a traceback are escaped like every other value (no database:
a row as the recorder hands it over, rendered as every page and socket renders it)."""

from __future__ import annotations

from types import SimpleNamespace

from traces.display.html import step_html
from traces.display.view import step_view

EVIL = '<img src=x onerror=alert(1)>'
ESCAPED = "&lt;img src=x onerror=alert(1)&gt;"
RUN = SimpleNamespace(pk=7, is_active=False)


def render(row: dict) -> str:
    return str(step_html(step_view({"seq": 3, "status": "ok", **row}), RUN))


def test_a_tool_calls_error_is_shown_as_text():
    page = render({"kind": "llm", "name": "m", "output": {"text": "", "tool_calls": [
        {"id": "c1", "name": "calculator", "arguments": None, "raw_arguments": "{",
         "error": f"bad JSON {EVIL}"}]}})
    assert f'<span class="error">bad JSON {ESCAPED}</span>' in page
    assert "<img" not in page


def test_a_traceback_is_shown_as_text_inside_its_fold():
    trace = f'Traceback (most recent call last):\n  File "x.py"\nValueError: {EVIL}</pre><b>'
    page = render({"kind": "error", "status": "error", "text": "failed",
                   "meta": {"exception": "ValueError", "traceback": trace}})
    assert "<summary>Traceback</summary>" in page
    assert f"ValueError: {ESCAPED}&lt;/pre&gt;&lt;b&gt;</pre>" in page
    assert "<img" not in page and "</pre><b>" not in page


# What the run page, its scripts (live.js replaces a step by data-seq, folds by data-depth)
# and its htmx links rely on, one part of the partial at a time (found by mutation testing:
# scripts/mutate traces/display/html.py).

def url(name: str, *args) -> str:
    from django.urls import reverse

    return reverse(name, args=(RUN.pk, *args))


def test_the_header_carries_the_steps_place_kind_role_name_and_status():
    page = render({"seq": 5, "kind": "llm", "role": "planner", "name": "gpt-x",
                   "status": "error", "output": {"text": "", "tool_calls": []}})
    view = step_view({"seq": 5, "kind": "llm", "status": "error"}, depth=2)
    deep = str(step_html(view, RUN))
    assert ('<article class="step k-llm is-error" id="step-5" data-seq="5" data-kind="llm" '
            'data-depth="2" style="--depth: 2">') in deep
    assert '<a class="seq" href="?step=5" data-go="5">#5</a>' in page
    assert '<span class="kind-badge k-llm">llm</span>' in page
    assert '<span class="role" title="role">planner</span>' in page
    assert '<code class="name">gpt-x</code>' in page
    assert '<span class="status status-error">error</span>' in page
    assert 'class="tree-toggle" aria-expanded="true"' in page and "</article>" in page
    plain = render({"kind": "tool", "role": "agent", "name": "calculator"})
    assert 'class="role"' not in plain and 'class="status' not in plain  # agent, ok: unsaid
    assert '<article class="step k-tool" id="step-3"' in plain
    running = render({"kind": "tool", "name": "calculator", "status": "running"})
    assert 'class="step k-tool is-running"' in running
    assert '<span class="status status-running">running</span>' in running


def test_the_figures_say_when_how_long_how_many_tokens_and_what_it_cost():
    from traces.display.figures import format_cost, format_duration, format_tokens

    view = step_view({"seq": 3, "kind": "llm", "status": "ok", "started_at": 100.25,
                      "duration_ms": 1500.0, "tokens_in": 1200, "tokens_out": 34,
                      "cost_usd": 0.0123}, run_start=100.0)
    page = str(step_html(view, RUN))
    assert (f'<span title="started after the run\'s start">+{format_duration(250.0)}</span>'
            in page)
    assert f'<span class="dur" title="duration">{format_duration(1500.0)}</span>' in page
    assert (f'<span title="tokens in / out">{format_tokens(1200)}→{format_tokens(34)} tok'
            '</span>') in page
    assert f"<span>{format_cost(0.0123)}</span>" in page
    bare = render({"kind": "thought", "text": "hm"})
    assert '<span class="figures">\n    </span>' in bare  # nothing measured: nothing shown


def test_the_actions_fork_open_the_playground_and_say_where_a_step_came_from():
    page = render({"kind": "llm", "name": "m", "output": {"text": "x"},
                   "meta": {"diverged_from": 2, "divergence": "message 1 differs"}})
    assert (f'<a href="{url("run_fork", 3)}" title="A new run: steps 1–3 from the record, '
            'live after">Fork from here</a>') in page
    assert f'<a href="{url("step_playground", 3)}" title="Edit this call' in page
    assert ('<span class="pill diverged" title="message 1 differs">diverged from #2</span>'
            in page)
    assert (f'hx-get="{url("step_messages", 3)}" hx-trigger="toggle once" '
            'hx-target="find .payload-body">') in page
    replayed = render({"kind": "tool", "name": "t", "meta": {"replayed": True, "source_seq": 9}})
    assert ('<span class="pill replayed" title="served from the recorded step 9">replayed'
            '</span>') in replayed
    assert "Playground" not in replayed and "Messages" not in replayed  # llm steps only
    edited = render({"kind": "tool", "name": "t", "meta": {"replayed": True, "edited": True}})
    assert '<span class="pill replayed" title="served from the recorded step ">edited' in edited
    live = str(step_html(step_view({"seq": 3, "kind": "tool", "status": "ok"}),
                         SimpleNamespace(pk=7, is_active=lambda: True)))
    assert "Fork from here" not in live  # a run still going cannot be forked yet
    no_run = step_view({"seq": 1, "kind": "thought", "input": None, "output": None, "text": "x"})
    assert 'class="step-actions"' not in str(step_html(no_run, None))  # a page without actions


def test_facts_fields_and_payloads_are_laid_out_for_the_page():
    page = render({"kind": "tool", "name": "calculator", "input": {"expression": "6*7"},
                   "output": {"ok": True}, "text": "42",
                   "meta": {"attempts": 2, "traceback": "hidden", "nested": {"x": 1}}})
    assert ('<ul class="facts"><li class="fact-attempts"><span>attempts</span> 2</li></ul>'
            in page)  # the traceback and nested values are not facts
    assert ('<div class="field action"><div class="label">Action</div><code>calculator</code>'
            '</div>') in page
    assert '<div class="field"><div class="label">Arguments <span class="muted">' in page
    assert '<details class="payload"><summary>Raw output · ' in page  # small: folded, inline
    assert ('<div class="field text-field"><div class="label">Observation</div>'
            '<div class="text">42</div></div>') in page
    assert page.index("Arguments") < page.index("Observation") < page.index("Raw output")
    assert '<ul class="facts">' not in render({"kind": "tool", "name": "t"})


def test_what_is_too_big_for_the_page_is_fetched_when_opened():
    page = render({"kind": "tool", "name": "t", "input_size": 5000, "output_size": 9000,
                   "text_size": 3000})
    for field in ("input", "output", "text"):
        assert (f'<details class="payload lazy" hx-get="{url("step_payload", 3, field)}" '
                'hx-trigger="toggle once" hx-target="find .payload-body">') in page
    assert '(loaded when opened)' in page and "Observation · " in page
    assert '<div class="payload-body muted">Loading…</div></details>' in page
    assert 'class="text-field"' not in render({"kind": "tool", "name": "t", "text": ""})


def test_a_tool_call_shows_its_name_and_arguments():
    page = render({"kind": "llm", "name": "m", "output": {"text": "", "tool_calls": [
        {"id": "c", "name": "calculator", "arguments": {"expression": "6*7"}}]}})
    assert ('<div class="field action"><div class="label">Action</div><code>calculator</code>'
            '<div class="hl">') in page and "6*7" in page
    assert 'class="error"' not in page


def test_the_partial_is_whole_markup_in_order():
    from traces.display.figures import format_size

    page = render({"kind": "approval", "name": "run_sql", "input": {"sql": "SELECT 1"},
                   "output_size": 5000, "text_size": 3000, "tokens_in": 5,
                   "meta": {"attempts": 2, "cached": True, "traceback": "Trace <x>"}})
    assert page.startswith('<article class="step k-approval" id="step-3"')
    assert ('  <header class="step-head">\n    <button type="button" class="tree-toggle" '
            'aria-expanded="true" title="Fold the steps inside this one">▾</button>\n') in page
    assert "\n  </header>\n" in page and page.endswith("</article>\n")
    assert '2</li><li class="fact-cached"><span>cached</span> yes</li></ul>' in page
    assert '<code>run_sql</code></div>' in page  # an approval names its tool like a tool step
    assert '<div class="field"><div class="label">sql</div><div class="hl">' in page
    assert page.count("Arguments") == 1  # the input once, before the text and the output
    assert f"Decision · {format_size(3000)}" in page and f"· {format_size(5000)} " in page
    assert '<span title="tokens in / out">5→0 tok</span>' in page  # tokens in alone count
    assert ('  <details class="payload"><summary>Traceback</summary><div class="hl"><pre>'
            'Trace &lt;x&gt;</pre></div></details>\n') in page
    llm = render({"kind": "llm", "name": "m", "output": {"text": ""}})
    assert ('<summary>Messages <span class="muted">— the conversation as the model saw it'
            '</span></summary><div class="payload-body muted">Loading…</div></details>\n'
            '</article>\n') in llm
    assert ('title="Edit this call and run it again against any model profile">Playground</a>'
            in llm)
    assert "XX" not in page + llm  # no stray text between the parts


def test_divergence_marks_and_the_fork_link_for_a_finished_run():
    only_seq = render({"kind": "llm", "name": "m", "output": {"text": ""},
                       "meta": {"diverged_from": 2}})
    assert '<span class="pill diverged" title="">diverged from #2</span>' in only_seq
    only_detail = render({"kind": "llm", "name": "m", "output": {"text": ""},
                          "meta": {"divergence": "tools differ"}})
    assert '<span class="pill diverged" title="tools differ">diverged</span>' in only_detail
    finished = str(step_html(step_view({"seq": 3, "kind": "tool", "input": None,
                                        "output": None}), SimpleNamespace(pk=7)))
    assert "Fork from here" in finished  # a row that says nothing of being active is done


def test_empty_and_unsized_parts_and_a_run_that_says_it_is_done():
    from traces.display.figures import format_size

    view = step_view({"seq": 3, "kind": "tool", "name": "t", "text_size": 0}, run_start=0.0)
    page = str(step_html(view, SimpleNamespace(pk=7, is_active=lambda: False)))
    assert "Fork from here" in page  # is_active() said no
    assert f"Arguments · {format_size(0)} " in page and f"Observation · {format_size(0)}" in page
    assert format_size(1) not in page
    empty = render({"kind": "tool", "name": "t", "text": "", "duration_ms": 5.0,
                    "tokens_in": 1, "tokens_out": 1, "cost_usd": 0.5})
    assert "XX" not in empty and "text-field" not in empty


def test_a_step_taken_over_by_another_worker_says_so_and_by_whom():
    note = {"by": "host:2/<b>", "from": "engine:host:1/7", "after_seq": 4, "at": "now"}
    page = render({"kind": "llm", "name": "m", "output": {"text": "x"},
                   "meta": {"taken_over": note}})
    assert ('<span class="pill taken-over" title="the worker running this run '
            '(engine:host:1/7) stopped; host:2/&lt;b&gt; continued it from its trace after '
            'step 4">taken over after #4</span>') in page
    assert "pill taken-over" not in render({"kind": "llm", "name": "m",
                                            "meta": {"taken_over": "x"}})
    # A note missing its parts (an older worker's) still reads as a sentence.
    bare = render({"kind": "llm", "name": "m", "meta": {"taken_over": {}}})
    assert ('title="the worker running this run (?) stopped; ? continued it from its trace '
            'after step ?">taken over after #?</span>') in bare


def test_a_step_still_running_cannot_be_forked_even_in_a_run_that_ended():
    # An interrupted run keeps the call it was making as "running": nothing to fork from yet.
    assert "Fork from here" not in render({"kind": "llm", "name": "m", "status": "running"})
    assert "Fork from here" in render({"kind": "llm", "name": "m", "status": "error"})
    no_flag = step_html(step_view({"seq": 3, "kind": "tool", "status": "ok"}),
                        SimpleNamespace(pk=7))  # a run that says nothing of being active
    assert "Fork from here" in str(no_flag)

