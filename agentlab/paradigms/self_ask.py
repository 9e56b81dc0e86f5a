"""Self-Ask (Press et al. 2022, "Measuring and Narrowing the Compositionality Gap in Language
Models"): the model decomposes a question into follow-up questions, one per call (it stops at
"Intermediate answer:"), each answered by a search tool or a sub-model, until it writes
"So the final answer is:".

A reply that breaks the format costs exactly one more call that asks for the final line; if that
also fails, the last line of the reply is the answer and an error step says so.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, ClassVar

from agentlab.llm.grammars import SELF_ASK
from agentlab.paradigms.parsing import (
    MARKERS_SCHEMA,
    SELF_ASK_LABELS,
    ParseError,
    SelfAskFinal,
    label_alternatives,
    parse_self_ask,
    stop_words,
)
from agentlab.paradigms.prompt_files import example_turns, few_shot_schema, fill, load_prompt
from agentlab.paradigms.registry import Paradigm, register_paradigm
from traces.schema import Step

if TYPE_CHECKING:
    from agentlab.runtime.context import RunContext

STOP = ["Intermediate answer:"]
MAX_TOKENS = 128  # one follow-up question, or the final answer
_STOP_RE = re.compile(r"\bintermediate[ \t]+answer[ \t]*:", re.IGNORECASE)
LLM_ANSWERER = "llm"


@register_paradigm
class SelfAsk(Paradigm):
    key: ClassVar[str] = "self_ask"
    label: ClassVar[str] = "Self-Ask"
    description: ClassVar[str] = (
        "Breaks a compositional question into follow-up questions, each answered by search, "
        "and chains the answers: one LLM call per hop.")
    demo_question: ClassVar[str] = (
        "Where was the founder of the company that makes the Zephyr X2 born?")
    params_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "max_follow_ups": {"type": "integer", "minimum": 1, "maximum": 20, "default": 4,
                               "description": "Then the model is asked for its final answer."},
            "answerer": {"type": "string", "minLength": 1, "default": "search",
                         "description": "Who answers follow-ups: a tool with a text parameter "
                                        "(e.g. search), or 'llm' (the 'answerer' model)."},
            "tool_arg": {"type": "string", "minLength": 1, "default": "query",
                         "description": "The answerer tool's parameter that gets the question."},
            # Other names for "Follow up", "Intermediate answer", "So the final answer is".
            "markers": MARKERS_SCHEMA,
            "few_shot": few_shot_schema(
                "Example turns shown before the question: a question, its follow-ups, their "
                "intermediate answers and the final answer, one turn each."),
            "min_follow_ups": {
                "type": "integer", "minimum": 0, "maximum": 10, "default": 0,
                "description": "Follow-ups asked before a final answer is accepted (a small "
                               "model otherwise answers from memory, or with the first hop's "
                               "answer). On the embedded model the grammar of those turns has "
                               "no final answer; elsewhere a final answer is taken as it is."},
        },
        "additionalProperties": False,
    }

    async def run(self, ctx: RunContext, task: str) -> str:
        """Ask follow-ups until the model writes the final answer or max_follow_ups is used."""
        params = self.params_of(ctx)
        self.ctx = ctx
        self.markers = params.get("markers") or {}
        self.answers: list[tuple[str, str]] = []  # (follow-up, intermediate answer), in order
        self.answerer, self.tool_arg = self._check_answerer(params)
        messages = self._start(task, params["few_shot"])
        at_least = min(params["min_follow_ups"], params["max_follow_ups"])
        while True:
            stop = stop_words(self.markers, "intermediate_answer", STOP[0].rstrip(":"))
            text = (await ctx.llm("agent", messages, stop=stop, max_tokens=MAX_TOKENS,
                                  response_format=self._turn_format(
                                      first=not self.answers,
                                      final=len(self.answers) >= at_least))).text or ""
            try:
                parsed = parse_self_ask(text, markers=self.markers)
            except ParseError as exc:
                await self._format_error(str(exc), raw=text)
                return await self._final(messages, text, str(exc))
            if isinstance(parsed, SelfAskFinal):
                return parsed.answer
            if len(self.answers) >= params["max_follow_ups"]:
                return await self._final(messages, text, (
                    f"You have asked {len(self.answers)} follow-up questions, the most allowed; "
                    "no more will be answered."))
            answer = await self._follow_up(parsed.question)
            messages += [{"role": "assistant", "content": _before_stop(text)},
                         {"role": "user", "content": f"Intermediate answer: {answer}"}]

    def _check_answerer(self, params: dict[str, Any]) -> tuple[str, str]:
        """(answerer, argument name); a tool this agent cannot use is a configuration error."""
        name = params["answerer"]
        if name == LLM_ANSWERER:
            return name, ""
        spec = self.ctx.executor.spec(name)
        if spec is None or name not in self.ctx.executor.names:
            raise ValueError(f"Self-Ask's answerer {name!r} is not a tool this agent may use "
                             f"(its tools: {', '.join(self.ctx.executor.names) or 'none'}); "
                             f"set answerer to one of them or to {LLM_ANSWERER!r}")
        props = spec.parameters.get("properties", {})
        strings = [k for k in spec.parameters.get("required", [])
                   if props.get(k, {}).get("type") == "string"]
        # tool_arg when the tool has it, else the tool's one required text parameter
        arg = params["tool_arg"] if params["tool_arg"] in props or len(strings) != 1 else strings[0]
        return name, arg

    def _turn_format(self, *, first: bool, final: bool, follow: bool = True
                     ) -> dict[str, Any]:
        """The turn's shape as our own response format, a grammar for the embedded model (the
        agent's markers as alternatives to the English labels); other servers get the turn
        without it and the parser reads what they write."""
        labels = label_alternatives(self.markers, SELF_ASK_LABELS,
                                    leave_out="intermediate_answer")
        return {"type": SELF_ASK, "labels": labels, "first": first, "final": final,
                "follow": follow}

    def _start(self, task: str, few_shot: list[dict[str, Any]]) -> list[dict[str, Any]]:
        who = ("by a language model" if self.answerer == LLM_ANSWERER
               else f"by the tool {self.answerer}")
        prompt = fill(load_prompt("self_ask_system.txt"), answerer=who)
        if self.ctx.system_prompt:
            prompt = f"{self.ctx.system_prompt}\n\n{prompt}"
        return [{"role": "system", "content": prompt}, *example_turns(few_shot),
                *self.ctx.history,
                {"role": "user", "content": f"Question: {task}"}]

    async def _follow_up(self, question: str) -> str:
        """Answer one follow-up under its own `message` step; a repeated one is not re-asked."""
        step = await self.ctx.emit(Step(kind="message", role="agent", name="follow-up",
                                        text=question, status="running"))
        earlier = next((a for q, a in self.answers if _same(q, question)), None)
        if earlier is not None:
            answer = (f"{earlier} (You asked this before; ask something else or give the final "
                      "answer.)")
            step.meta["repeated"] = True
        elif self.answerer == LLM_ANSWERER:
            messages = [{"role": "system", "content": load_prompt("self_ask_answerer.txt")},
                        {"role": "user", "content": question}]
            reply = await self.ctx.llm("answerer", messages, parent=step.seq)
            answer = (reply.text or "").strip() or "(no answer)"
        else:
            result = await self.ctx.tool(self.answerer, {self.tool_arg: question},
                                         parent=step.seq)
            answer = result.observation
        self.answers.append((question, answer))
        await self.ctx.finish(step, output=answer)
        return answer

    async def _final(self, messages: list[dict[str, Any]], text: str, reason: str) -> str:
        """One more call that asks for the final line; else the reply's last line, flagged."""
        messages = [*messages, {"role": "assistant", "content": text.strip() or "(empty)"},
                    {"role": "user", "content": fill(load_prompt("self_ask_final.txt"),
                                                     reason=reason)}]
        again = (await self.ctx.llm("agent", messages, max_tokens=MAX_TOKENS,
                                    response_format=self._turn_format(
                                        first=False, final=True, follow=False))).text or ""
        try:
            parsed = parse_self_ask(again, markers=self.markers)
        except ParseError:
            parsed = None
        if isinstance(parsed, SelfAskFinal):
            return parsed.answer
        answer = _last_line(again) or _last_line(text) or (self.answers[-1][1] if self.answers
                                                            else "")
        await self._format_error(
            "the model broke the Self-Ask format: no 'So the final answer is:' line even when "
            f"asked for it, so the answer is the last line of its reply: {answer!r}", raw=again)
        return answer

    async def _format_error(self, message: str, *, raw: str) -> None:
        self.ctx.totals.format_errors += 1
        await self.ctx.emit(Step(kind="error", text=message, input=raw, status="error",
                                 meta={"format_error": True}))

    def partial_answer(self, ctx: RunContext, reason: str) -> str:
        """The follow-ups answered so far."""
        answers = getattr(self, "answers", [])
        if not answers:
            return super().partial_answer(ctx, reason)
        lines = "\n".join(f"- {q} → {_clip(a)}" for q, a in answers)
        return f"I stopped before the final answer ({reason}). What I found so far:\n{lines}"


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()).casefold() == " ".join(b.split()).casefold()


def _before_stop(text: str) -> str:
    """The reply without an echoed stop marker: the next message brings the real answer."""
    return _STOP_RE.split(text, maxsplit=1)[0].strip()


def _last_line(text: str) -> str:
    lines = [line.strip().strip("*_").strip() for line in text.splitlines()]
    return next((line for line in reversed(lines) if line), "")


def _clip(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"
