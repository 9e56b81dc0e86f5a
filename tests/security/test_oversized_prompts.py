"""Hostile sizes against the context window: a 5 MB question, a 2 MB tool observation, 10,000
history turns, a server that always says "too long". Each ends in bounded time with a clear
outcome, over real HTTP to the scripted OpenAI-compatible server (tests/fake_openai.py) and the
real ReAct paradigm."""

from __future__ import annotations

import time

import pytest

from agentlab.llm.client import OpenAIChatModel
from agentlab.llm.errors import ContextTooLong
from agentlab.llm.types import ProfileConfig
from agentlab.paradigms.react import MAX_TOKENS as REACT_TURN_TOKENS
from agentlab.paradigms.registry import get_paradigm
from agentlab.runtime.loop import execute
from agentlab.runtime.window import Budget, fixed_tokens, message_tokens
from agentlab.tools.decorator import tool
from agentlab.tools.executor import ToolPolicy
from tests.fake_openai import Fail, Reply
from tests.scripted_model import make_context

SECONDS = 10  # generous for a shared 2-core machine; each case takes well under 2 s here
# A ReAct turn asks for fewer reply tokens than the profile allows (256), so the window keeps
# only that many for the reply and the rest for the prompt.
BUDGET = Budget.of(4096, min(256, REACT_TURN_TOKENS))
CUT = "characters cut to fit the model's context window"


@tool
def dump_table() -> str:
    """Return the whole table."""
    return "id,name,amount\n" + "".join(f"{i},customer {i},{i * 7 % 1000}.00\n"
                                         for i in range(80_000))  # ~2.1 MB


def model(fake_llm) -> OpenAIChatModel:
    return OpenAIChatModel(ProfileConfig(
        name="Local SmolLM2", base_url=fake_llm.base_url, model="scripted-model", retries=0,
        context_tokens=4096, max_tokens=256))


def react(fake_llm, tools=(), **kwargs):
    return make_context(model(fake_llm), tools, params={"mode": "function_calling"}, **kwargs)


def request_tokens(body: dict) -> int:
    return sum(map(message_tokens, body["messages"])) + fixed_tokens(body.get("tools"))


async def run(ctx, question: str):
    started = time.perf_counter()
    outcome = await execute(get_paradigm("react")(), ctx, question)
    return outcome, time.perf_counter() - started


class TestOversizedQuestion:
    async def test_a_5_mb_question_is_refused_with_its_size_and_nothing_is_sent(self, fake_llm):
        ctx, sink = react(fake_llm)
        outcome, seconds = await run(ctx, "Summarise: " + "lorem ipsum dolor sit amet " * 200_000)
        assert seconds < SECONDS and fake_llm.requests == []
        assert outcome.status == "failed"
        assert outcome.error.startswith("the message is ~1,5")  # ~1.5 million tokens
        assert (f"Local SmolLM2 reads at most 4,096 tokens (with {BUDGET.reserve} kept for the "
                f"reply)") in outcome.error
        assert sink.of_kind("llm")[0].meta["refused"]["budget"] == BUDGET.prompt

    async def test_instructions_over_the_window_are_named_as_the_cause(self, fake_llm):
        ctx, _sink = react(fake_llm, system_prompt="Always obey this rule. " * 3000)
        outcome, seconds = await run(ctx, "Hello?")
        assert seconds < SECONDS and fake_llm.requests == []
        assert outcome.error.startswith("the agent's instructions and tools are ~")


class TestOversizedObservation:
    @pytest.mark.parametrize("limit", [4000, 3_000_000], ids=["default-cut", "no-tool-cut"])
    async def test_a_2_mb_observation_reaches_the_model_cut_and_stays_whole_in_the_trace(
            self, fake_llm, limit):
        fake_llm.script(Reply(tool_calls=[("dump_table", "{}")]), Reply(text="80,000 rows."))
        ctx, sink = react(fake_llm, [dump_table],
                          policies={"dump_table": ToolPolicy(max_observation_chars=limit)})
        outcome, seconds = await run(ctx, "How many rows has the table?")
        assert seconds < SECONDS and outcome.status == "succeeded"
        assert outcome.answer == "80,000 rows."
        (step,) = sink.of_kind("tool")
        assert len(step.output["output"]) > 2_000_000  # the full value is kept
        second = fake_llm.requests[1]
        assert request_tokens(second) <= BUDGET.prompt
        observation = second["messages"][-1]["content"]
        assert observation.endswith("79999,customer 79999,993.00\n") or "truncated" in (
            observation)
        llm = sink.of_kind("llm")[1]
        assert llm.input["messages"][-1]["content"] == observation
        if limit > 2_000_000:
            assert CUT in observation and llm.meta["trimmed"]["chars_cut"] > 2_000_000


class TestOversizedHistory:
    async def test_10000_history_turns_keep_the_newest_and_the_question(self, fake_llm):
        history = [m for i in range(10_000) for m in (
            {"role": "user", "content": f"Question {i}: what is {i} + {i}?"},
            {"role": "assistant", "content": f"{i} + {i} is {2 * i}."})]
        fake_llm.script(Reply(text="You asked me about sums."))
        ctx, sink = react(fake_llm, history=history)
        outcome, seconds = await run(ctx, "What did I ask you about?")
        assert seconds < SECONDS and outcome.status == "succeeded"
        sent = fake_llm.requests[0]["messages"]
        assert request_tokens(fake_llm.requests[0]) <= BUDGET.prompt
        assert sent[0]["role"] == "system" and sent[-1]["content"] == "What did I ask you about?"
        assert sent[-2] == history[-1] and len(sent) < 400  # the newest turns, in order
        trimmed = sink.of_kind("llm")[0].meta["trimmed"]
        assert trimmed["dropped_turns"] == 10_000 - (len(sent) - 2) // 2


class TestServerThatAlwaysSaysTooLong:
    async def test_it_is_asked_twice_at_most_and_the_error_is_what_it_said(self, fake_llm):
        fake_llm.responder = lambda body: Fail(
            400, "This model's maximum context length is 4096 tokens. However, you requested "
                 "9000000 tokens (9000000 in the messages, 0 in the completion).",
            "context_length_exceeded")
        ctx, sink = react(fake_llm, history=[{"role": "user", "content": "earlier " * 500},
                                             {"role": "assistant", "content": "noted " * 500}])
        outcome, seconds = await run(ctx, "Hello?")
        assert seconds < SECONDS and len(fake_llm.requests) <= 2
        assert outcome.status == "failed" and sink.of_kind("error")[0].meta[
            "kind"] == "context_too_long"
        # The server's own words, not an estimate scaled by its absurd count.
        assert outcome.error.startswith("the prompt is too long for 'scripted-model': the "
                                        "server counted 9,000,000 tokens for a window of 4,096")
        # Its claim is believed only so far (4 tokens per estimated one): a short message is
        # still sent, and refused in the server's words, not in absurd estimates.
        with pytest.raises(ContextTooLong, match="^the prompt is too long for"):
            await ctx.llm("agent", [{"role": "user", "content": "Hello?"}])
