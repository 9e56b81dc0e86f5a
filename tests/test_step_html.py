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
