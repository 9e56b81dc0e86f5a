"""The browser's "step" frame is as small as what reads it (docs/LIVE_PROTOCOL.md "The step
frame, field by field"): its partial, and of the step only the fields live.js and the bench
read, not an llm step's messages with every version."""

from __future__ import annotations

import json
import re
from pathlib import Path

from traces.display.renderer import FRAME_STEP_FIELDS, StepRenderer
from traces.schema import Step

LIVE_JS = Path(__file__).resolve().parents[1] / "static" / "agentlab" / "live.js"


def test_a_step_frame_carries_its_partial_and_only_the_fields_read_of_the_step():
    prompt = "a long prompt " * 5000
    step = Step(seq=2, kind="llm", name="scripted-model", role="planner", parent=1,
                status="running", started_at=1_700_000_000.5,
                input={"messages": [{"role": "user", "content": prompt}]}).to_dict()
    frame = StepRenderer(7, run_start=None, parents={1: None}).frame(step)
    assert set(frame) == {"type", "seq", "parent", "kind", "status", "html", "step"}
    assert (frame["type"], frame["seq"], frame["parent"], frame["kind"], frame["status"]) == (
        "step", 2, 1, "llm", "running")
    assert frame["step"] == {"name": "scripted-model", "role": "planner",
                             "started_at": 1_700_000_000.5, "duration_ms": None,
                             "waiting_for_model": None}
    assert prompt not in json.dumps(frame["step"])


def test_a_call_waiting_for_a_busy_model_says_so_in_its_frame():
    """Issue 38: the page's "now" line shows "waiting for the model" from the frame."""
    waiting = {"ahead": 2, "since": 1_700_000_001.0}
    step = Step(seq=3, kind="llm", name="Local SmolLM2", status="running",
                started_at=1_700_000_000.5, meta={"waiting_for_model": waiting}).to_dict()
    frame = StepRenderer(7, run_start=None, parents={}).frame(step)
    assert frame["step"]["waiting_for_model"] == waiting
    source = LIVE_JS.read_text()
    assert "waiting for the model" in source[source.index("activity() {"):]


def test_live_js_reads_no_field_of_the_step_that_the_frame_leaves_out():
    """If the page starts reading another field of `frame.step`, FRAME_STEP_FIELDS (and the
    protocol's table) must name it."""
    source = LIVE_JS.read_text()
    track = source[source.index("track(frame) {"):]
    track = track[:track.index("\n    }\n")]
    assert "const step = frame.step" in track
    read = set(re.findall(r"\bstep\.(\w+)", track))
    assert read and read <= set(FRAME_STEP_FIELDS)
    # Nowhere else does the page read the frame's step.
    assert source.count("frame.step") == 1
