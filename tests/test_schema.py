"""traces.schema.Step: JSON round-trip and clear rejections."""

from __future__ import annotations

import json

import pytest

from traces.schema import RUN_STATUSES, STEP_KINDS, Step


def test_round_trip_through_json_keeps_every_field() -> None:
    step = Step(seq=3, kind="tool", role="executor", name="sql_query", parent=1,
                input={"query": "select 1"}, output={"ok": True, "rows": [[1]]}, text="1",
                status="error", started_at=1700000000.5, duration_ms=12.5, tokens_in=4,
                tokens_out=2, cost_usd=0.001, meta={"truncated": True})
    again = Step.from_dict(json.loads(json.dumps(step.to_dict())))
    assert again == step


def test_defaults() -> None:
    step = Step(kind="thought", text="hmm")
    assert (step.seq, step.role, step.status, step.parent) == (0, "agent", "ok", None)
    assert step.meta == {}
    assert step.started_at > 0
    assert Step.from_dict({"kind": "final"}).kind == "final"


def test_every_kind_round_trips() -> None:
    assert len(STEP_KINDS) == 13
    for kind in STEP_KINDS:
        assert Step.from_dict(Step(kind=kind).to_dict()).kind == kind  # type: ignore[arg-type]


def test_run_statuses() -> None:
    assert RUN_STATUSES[0] == "queued" and "interrupted" in RUN_STATUSES


@pytest.mark.parametrize(("data", "message"), [
    ({"kind": "tool", "colour": "red"}, "unknown step field(s): colour"),
    ({"kind": "banana"}, "step kind 'banana' is not one of llm"),
    ({"role": "agent"}, "step kind None"),
    ({"kind": "tool", "status": "done"}, "step status 'done' is not one of running, ok, error"),
    ({"kind": "tool", "seq": "3"}, "step seq must be an integer"),
    ({"kind": "tool", "meta": []}, "step meta must be an object"),
])
def test_from_dict_rejects_bad_data(data: dict, message: str) -> None:
    with pytest.raises(ValueError) as info:
        Step.from_dict(data)
    assert message in str(info.value)


def test_from_dict_rejects_non_objects() -> None:
    with pytest.raises(ValueError, match="a step must be an object"):
        Step.from_dict(["kind", "tool"])  # type: ignore[arg-type]
