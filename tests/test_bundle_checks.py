"""Bundle checks that need no database: the text a file must be, the fast check of a step
against the schema (it may send a valid step on to the full check, never let an invalid one
through), and where a step refused after the schema is named.

Written from the mutants of traces/bundle.py that the broader tests let through (docs/TESTING.md,
"Mutation testing").
"""

from __future__ import annotations

import pytest

from traces.bundle import (
    _INT_MAX,
    _STEP_VALIDATOR,
    BundleError,
    _quick_step_ok,
    _steps,
    parse_json,
)

STEP = {"seq": 1, "kind": "llm", "started_at": 1735787045.25}


@pytest.mark.parametrize(("text", "says"), [
    ('{"steps": [NaN]}', "NaN is not a JSON number"),
    ('{"cost": -Infinity}', "-Infinity is not a JSON number"),
    (b'{"text": "caf\xe9"}', "byte 13: not UTF-8 text: invalid continuation byte"),
], ids=["nan", "infinity", "latin-1"])  # ASCII ids: mutmut selects tests by id
def test_text_that_is_not_strict_json_is_refused_by_name(text, says):
    with pytest.raises(BundleError) as info:
        parse_json(text)
    assert str(info.value) == says


@pytest.mark.parametrize("step", [
    STEP,
    {**STEP, "seq": _INT_MAX, "parent": None, "meta": None, "status": "error"},
    {**STEP, "name": "n" * 200, "role": "agent", "text": "", "duration_ms": 0,
     "tokens_in": 0, "tokens_out": _INT_MAX, "cost_usd": 0.0, "parent": 3},
    {**STEP, "input": {"any": ["thing"]}, "output": None, "meta": {"profile": "p"}},
])
def test_an_ordinary_valid_step_takes_the_fast_check(step):
    assert not list(_STEP_VALIDATOR.iter_errors(step))
    assert _quick_step_ok(step) is True


@pytest.mark.parametrize("step", [
    {**STEP, "kind": "dance"}, {**STEP, "kind": 3}, {**STEP, "status": "fine"},
    {**STEP, "seq": 0}, {**STEP, "seq": _INT_MAX + 1}, {**STEP, "seq": True},
    {**STEP, "seq": "1"}, {**STEP, "seq": 1.5}, {**STEP, "started_at": -1.0},
    {**STEP, "name": "n" * 201}, {**STEP, "role": 7}, {**STEP, "tokens_in": -1},
    {**STEP, "cost_usd": -0.5}, {**STEP, "parent": "1"}, {**STEP, "meta": []},
    {**STEP, "colour": "red"}, {"seq": 1, "kind": "llm"}, [STEP], "step",
])
def test_the_fast_check_never_passes_a_step_the_schema_refuses(step):
    assert list(_STEP_VALIDATOR.iter_errors(step))
    assert _quick_step_ok(step) is False


def test_a_step_refused_after_the_schema_is_named_with_its_place():
    with pytest.raises(BundleError) as info:
        _steps([STEP, {**STEP, "seq": 2, "flavour": "mint"}])
    assert (info.value.where, info.value.message) == ("steps[1]",
                                                       "unknown step field(s): flavour")
