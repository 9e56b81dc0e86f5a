"""The diff in real Chromium: ids a server generates for each tool call are no difference (two
runs that asked and did the same are equal), and a change deep inside a long request is shown
where it is: the unchanged stretch before it folded to a few lines, nothing cut off."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.factories import make_run

pytestmark = [pytest.mark.browser]

PROMPT = "\n".join(f"Rule {i}: be careful and precise about the weather." for i in range(60))


def llm_step(call_id: str, question: str) -> dict:
    return {"kind": "llm", "name": "scripted-model",
            "input": {"messages": [{"role": "system", "content": PROMPT},
                                   {"role": "user", "content": question},
                                   {"role": "assistant", "content": "",
                                    "tool_calls": [{"id": call_id, "type": "function",
                                                    "function": {"name": "get_weather"}}]},
                                   {"role": "tool", "tool_call_id": call_id,
                                    "content": "Sunny"}]},
            "output": {"text": "", "tool_calls": [{"id": call_id, "name": "get_weather",
                                                   "arguments": {"city": "Paris"}}]}}


def test_call_ids_are_no_difference_and_a_change_is_shown_where_it_is(page, live_url, user):
    a = make_run(user, [llm_step("call_aaa111", "Weather in Paris?"),
                        llm_step("call_bbb222", "Weather in Paris?"),
                        {"kind": "final", "text": "Sunny.", "output": "Sunny."}])
    b = make_run(user, [llm_step("call_zzz999", "Weather in Paris?"),
                        llm_step("call_yyy888", "Weather in Lyon?"),
                        {"kind": "final", "text": "Sunny.", "output": "Sunny."}])
    page.goto(f"{live_url}/runs/diff/?a={a.pk}&b={b.pk}")
    expect(page.locator(".diff-summary")).to_contain_text("2 equal · 1 changed")
    expect(page.locator("tr.op-equal")).to_have_count(2)
    row = page.locator("#first-divergence")
    expect(row.locator(".divergence-mark").first).to_be_visible()
    inserted = row.locator("td.right ins")
    expect(inserted).to_have_text(["Lyon"])
    assert "call_" not in "".join(row.locator("ins, del").all_inner_texts())
    expect(row.locator("td.right details.same summary").first).to_contain_text("unchanged lines")
    cell = row.locator("td.right").bounding_box()
    mark = inserted.bounding_box()
    assert cell["y"] <= mark["y"] and mark["y"] + mark["height"] <= cell["y"] + cell["height"]
    assert mark["y"] - cell["y"] < 400  # near the top of its row: no long prefix to scroll past
    assert page.js_errors == []
