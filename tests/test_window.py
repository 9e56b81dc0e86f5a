"""Fitting a prompt to a context window (agentlab/runtime/window.py): the estimate, the budget,
what is kept and in which order things are cut, the marker, and the refusal (pure)."""

from __future__ import annotations

import copy
import random
import re

import pytest

from agentlab.llm.errors import ContextTooLong
from agentlab.runtime.window import (
    MARKER,
    MESSAGE_TOKENS,
    Budget,
    PromptTooLong,
    estimate_tokens,
    fit,
    message_tokens,
)
from tests.token_counts import MEASURED

SYSTEM = {"role": "system", "content": "You are a helpful assistant. Answer briefly."}
CUT = re.compile(r"\[… ([\d,]+) characters cut to fit the model's context window …\]")


def turn(i: int, words: int = 20) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"question {i} " + "word " * words},
            {"role": "assistant", "content": f"answer {i} " + "word " * words}]


def exchange(call_id: str, observation: str) -> list[dict]:
    return [{"role": "assistant", "content": None, "tool_calls": [
                {"id": call_id, "type": "function",
                 "function": {"name": "lookup", "arguments": '{"q": "x"}'}}]},
            {"role": "tool", "tool_call_id": call_id, "content": observation}]


def cost(messages: list[dict]) -> int:
    return sum(map(message_tokens, messages))


# ------------------------------------------------------------------ the estimate


@pytest.mark.parametrize(("text", "tokens"), [
    ("", 0),
    ("abcdefg", 2),  # 3.5 lowercase letters (or spaces) a token
    ("ABCD", 2),  # capitals: 2 a token
    ("2024-01-01", 10),  # digits and punctuation: one each
    ("\n\t", 2),
    ("é", 2),  # 2 bytes of a non-ASCII character: 3/4 each, rounded up
    ("天气", 5),  # 6 bytes
])
def test_the_estimate_follows_its_documented_rule(text, tokens):
    assert estimate_tokens(text) == tokens


@pytest.mark.parametrize(("text", "real"), MEASURED, ids=[
    "english", "json", "french", "chinese", "russian", "sql", "digits"])
def test_the_estimate_is_never_under_a_real_tokenizers_count(text, real):
    assert real <= estimate_tokens(text) <= 1.8 * real


def test_a_message_costs_its_role_markers_and_its_tool_calls():
    bare = {"role": "assistant", "content": None}
    (call, _result) = exchange("c1", "ok")
    assert message_tokens(bare) == MESSAGE_TOKENS
    assert message_tokens(call) > MESSAGE_TOKENS + 10  # the call's JSON counts
    parts = {"role": "user", "content": [{"type": "text", "text": "abcdefg"}]}
    assert message_tokens(parts) == MESSAGE_TOKENS + 2


# ------------------------------------------------------------------ the budget


def test_the_reply_keeps_its_max_tokens_or_an_eighth_but_never_more_than_half():
    assert Budget.of(4096, 512) == Budget(4096, 512) and Budget(4096, 512).prompt == 3584
    assert Budget.of(4096, None).reserve == 512
    assert Budget.of(8192, 0).reserve == 1024
    assert Budget.of(4096, 100_000).reserve == 2048


# ------------------------------------------------------------------ fitting


def test_what_fits_is_sent_as_it_is():
    messages = [SYSTEM, *turn(1), {"role": "user", "content": "And now?"}]
    fitted = fit(messages, Budget(4096, 512))
    assert fitted.messages == messages and fitted.messages is not messages
    assert not fitted.trimmed and fitted.estimated == fitted.original == cost(messages) + 0


def test_the_oldest_history_turns_go_first_and_the_question_stays():
    history = [m for i in range(40) for m in turn(i)]
    question = {"role": "user", "content": "What did I ask first?"}
    messages = [SYSTEM, *history, question]
    budget = Budget(1024, 256)
    fitted = fit(messages, budget, history=history)
    kept = fitted.messages
    assert kept[0] is SYSTEM and kept[-1] is question
    assert fitted.estimated <= budget.prompt < cost(messages)
    # Whole turns are dropped, oldest first: what is left is the newest turns, in order.
    assert kept[1:-1] == history[-len(kept[1:-1]):] and len(kept[1:-1]) % 2 == 0
    meta = fitted.meta()
    assert meta["dropped_turns"] == 40 - len(kept[1:-1]) // 2 > 0
    assert meta["dropped_messages"] == 2 * meta["dropped_turns"]
    assert meta["cut_messages"] == meta["chars_cut"] == 0 and meta["budget"] == 768
    assert messages == [SYSTEM, *history, question]  # the caller's list is left alone


def test_a_long_observation_is_cut_in_the_middle_before_any_history_goes():
    history = [m for i in range(3) for m in turn(i)]
    observation = "HEAD " + "data " * 20_000 + " TAIL"
    messages = [SYSTEM, *history, {"role": "user", "content": "Look it up."},
                *exchange("c1", observation)]
    before = copy.deepcopy(messages)
    fitted = fit(messages, Budget(4096, 512), history=history)
    assert fitted.messages[:8] == messages[:8]  # system, the three turns, question, the call
    sent = fitted.messages[-1]
    assert sent["role"] == "tool" and sent["tool_call_id"] == "c1"
    assert sent["content"].startswith("HEAD ") and sent["content"].endswith(" TAIL")
    (cut,) = CUT.findall(sent["content"])
    chars = int(cut.replace(",", ""))
    kept = len(sent["content"]) - len(MARKER.format(chars=chars)) - 2  # and two newlines
    assert kept + chars == len(observation)
    assert fitted.meta()["cut_messages"] == 1 and fitted.meta()["chars_cut"] == chars
    assert fitted.meta()["dropped_turns"] == 0
    # At most half of what the system prompt and the question leave.
    assert message_tokens(sent) <= (3584 - cost(messages[:1]) - cost(messages[7:8])) // 2 + 1
    assert messages == before  # the full value stays with the caller (and the tool step)


def test_the_runs_own_long_messages_are_shortened_to_a_common_length():
    question = {"role": "user", "content": "Compare them."}
    work = [*exchange("a", "alpha " * 3000), *exchange("b", "beta " * 1500),
            *exchange("c", "short one"),
            {"role": "assistant", "content": "gamma " * 2500}]
    messages = [SYSTEM, question, *work]
    fitted = fit(messages, Budget(2048, 256))
    assert fitted.estimated <= 1792
    assert len(fitted.messages) == len(messages)  # nothing dropped: shortening was enough
    sizes = {m.get("tool_call_id") or m["role"]: message_tokens(m)
             for m in fitted.messages[2:] if m.get("content")}
    assert fitted.messages[7]["content"] == "short one"  # short ones are left whole
    long_ones = [sizes["a"], sizes["b"], sizes["assistant"]]
    assert max(long_ones) - min(long_ones) <= 40  # one common length
    assert fitted.meta()["cut_messages"] == 3


def test_the_runs_oldest_exchanges_go_last_and_never_the_latest():
    question = {"role": "user", "content": "Keep looking."}
    work = [m for i in range(60) for m in exchange(f"c{i}", f"result {i} " + "x " * 40)]
    messages = [SYSTEM, question, *work]
    fitted = fit(messages, Budget(1024, 128))
    kept = fitted.messages
    assert kept[:2] == [SYSTEM, question] and kept[-2:] == work[-2:]
    ids = [m["tool_call_id"] for m in kept if m["role"] == "tool"]
    calls = [m["tool_calls"][0]["id"] for m in kept if m["role"] == "assistant"]
    assert ids == calls  # every tool result still has its call, in order
    assert ids == [f"c{i}" for i in range(60 - len(ids), 60)]  # the newest ones
    assert fitted.meta()["dropped_turns"] == 0 and fitted.meta()["dropped_messages"] > 0


def test_a_message_that_cannot_fit_alone_is_refused_with_the_sizes():
    question = {"role": "user", "content": "Please summarise: " + "lorem ipsum dolor " * 1200}
    with pytest.raises(PromptTooLong) as info:
        fit([SYSTEM, question], Budget.of(4096, 512), model="Local SmolLM2")
    error = info.value
    assert isinstance(error, ContextTooLong) and error.kind == "context_too_long"
    asked = message_tokens(question)
    assert str(error) == (
        f"the message is ~{asked:,} tokens; Local SmolLM2 reads at most 4,096 tokens (with 512 "
        "kept for the reply) — shorten the message or use a model with a larger context window")
    assert error.estimated > error.budget.prompt == 3584


def test_long_instructions_are_named_when_they_are_what_does_not_fit():
    system = {"role": "system", "content": "Rule. " * 4000}
    with pytest.raises(PromptTooLong, match=r"^the agent's instructions and tools are ~[\d,]+ "
                                            r"tokens and the message ~11;"):
        fit([system, {"role": "user", "content": "Hi there"}], Budget(2048, 256), model="m")
    with pytest.raises(PromptTooLong, match=r"^the message is ~[\d,]+ tokens \(~[\d,]+ with the "
                                            r"agent's instructions and tools\); m reads"):
        fit([SYSTEM, {"role": "user", "content": "word " * 2000}], Budget(1024, 128),
            fixed=300, model="m")


def test_tools_and_schemas_count_against_the_budget():
    messages = [SYSTEM, {"role": "user", "content": "hi"}, *exchange("c1", "y " * 400)]
    assert not fit(messages, Budget(1024, 128)).trimmed
    fitted = fit(messages, Budget(1024, 128), fixed=600)
    assert fitted.trimmed and fitted.estimated <= 896


def test_a_history_fitted_once_is_still_recognised_after_an_edit():
    history = [m for i in range(30) for m in turn(i)]
    question = {"role": "user", "content": "The real question"}
    budget = Budget(1024, 256)
    first = fit([SYSTEM, *history, question], budget, history=history).messages
    edited = [*first[:-1], {"role": "user", "content": "The real question " + "x " * 600}]
    again = fit(edited, budget, history=history)
    assert again.messages[-1] == edited[-1]  # the edited question is still the one kept whole
    assert again.messages[0] is SYSTEM and again.meta()["dropped_turns"] > 0


def test_a_call_without_the_history_keeps_its_first_message_whole():
    history = [m for i in range(3) for m in turn(i)]
    task = {"role": "user", "content": "Judge this answer: " + "ok " * 100}
    long_reply = {"role": "assistant", "content": "z " * 5000}
    fitted = fit([SYSTEM, task, long_reply], Budget(1024, 128), history=history)
    assert fitted.messages[1] is task and CUT.search(fitted.messages[2]["content"])


def test_a_servers_own_count_scales_the_estimate():
    messages = [SYSTEM, {"role": "user", "content": "hi"}, *exchange("c1", "data " * 2000)]
    plain = fit(messages, Budget(4096, 512))
    scaled = fit(messages, Budget(4096, 512), ratio=2.5)
    assert not plain.trimmed and scaled.trimmed
    assert estimate_tokens(scaled.messages[-1]["content"]) * 2.5 <= 3584


def test_structured_content_is_counted_but_never_cut():
    image = {"role": "user", "content": [{"type": "image_url",
                                          "image_url": {"url": "data:," + "A" * 3000}}]}
    messages = [SYSTEM, {"role": "user", "content": "Describe."}, image]
    fitted = fit(messages, Budget(8192, 1024))
    assert fitted.messages[2] is image
    with pytest.raises(PromptTooLong, match="no longer fits"):
        fit(messages, Budget(2048, 1024))


def test_random_conversations_always_fit_or_are_refused():
    rng = random.Random(16)
    for _ in range(200):
        history = [m for i in range(rng.randint(0, 30)) for m in turn(i, rng.randint(1, 300))]
        question = {"role": "user", "content": "q " * rng.randint(1, 3000)}
        work = [m for i in range(rng.randint(0, 8))
                for m in exchange(f"c{i}", "o " * rng.randint(1, 8000))]
        messages = [SYSTEM, *history, question, *work]
        budget = Budget.of(rng.choice([1024, 2048, 4096, 8192]), rng.choice([None, 128, 512]))
        try:
            fitted = fit(messages, budget, history=history)
        except PromptTooLong:
            assert cost([SYSTEM, question]) > budget.prompt or work
            continue
        assert cost(fitted.messages) <= budget.prompt
        assert fitted.messages[0] is SYSTEM and question in fitted.messages
        shortened = [m for m in fitted.messages if m not in messages]
        assert len(shortened) == fitted.cut_messages
        assert all(CUT.search(m["content"]) for m in shortened)
