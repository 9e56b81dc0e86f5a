"""A JSON payload's highlighting made straight from the value (traces/display/json_html.py) is
the very HTML Pygments makes of the indented text, whatever the value; anything that path does
not write as json would goes to Pygments, so a page never shows it otherwise."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from pygments import highlight
from pygments.formatters import HtmlFormatter
from pygments.lexers import get_lexer_by_name

from traces.display.highlight import highlight_value, to_json
from traces.display.json_html import value_html

_LEXER = get_lexer_by_name("json", stripnl=False, ensurenl=False)


def pygments_html(value: object) -> str:
    return highlight(to_json(value), _LEXER, HtmlFormatter(cssclass="hl"))


scalars = (st.none() | st.booleans() | st.integers() | st.text()
           | st.floats(allow_nan=False, allow_infinity=False))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=20)


@settings(max_examples=400, deadline=None)
@given(values)
def test_any_json_value_reads_as_pygments_would_show_it(value):
    assert value_html(value) == pygments_html(value)


def test_what_json_writes_its_own_way_goes_to_pygments():
    for value in ({1: "a key json turns into text"}, [float("nan")], {"at": float("inf")},
                  {"when": object()}):
        assert value_html(value) is None
    tricky = {"": [[], {}, [{}]], "<b>&amp;</b>": 'a "quoted" \\ line\nbreak\r\u2028',
              "n": [0, -1, 1.5, 1e300, 2e-07, 10**30, True, None]}
    assert value_html(tricky) == pygments_html(tricky)
    assert "&lt;b&gt;&amp;amp;&lt;/b&gt;" in value_html(tricky)
    assert str(highlight_value({1: 2})) == pygments_html({"1": 2})  # Pygments took it
