"""ReAct (Yao et al. 2022): think, act, observe, repeat — as native tool calls, text or JSON."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, ClassVar

from agentlab.llm.chatml import ANSWER_CHARS, REACT_TEXT, THOUGHT_CHARS, closed
from agentlab.paradigms.parsing import (
    MARKERS_SCHEMA,
    REACT_LABELS,
    ParseError,
    ReactFinal,
    coerce_input,
    label_alternatives,
    parse_react,
    stop_words,
    unwrap_fence,
)
from agentlab.paradigms.prompt_files import example_turns, few_shot_schema, fill, load_prompt
from agentlab.paradigms.reflector import Reflection, make_reflector, record_reflection
from agentlab.paradigms.registry import Paradigm, register_paradigm
from agentlab.runtime.limits import IterationLimit
from traces.schema import Step

if TYPE_CHECKING:
    from agentlab.llm.types import ChatResult, ToolCall
    from agentlab.runtime.context import RunContext

MAX_TOKENS = 192  # one think-act turn: a thought and a call, or a short answer
JSON_FORMAT_HINT = ('Reply with one JSON object: {"thought": "...", "action": "<tool name or '
                    'final_answer>", "action_input": {...}}')
REACT_STEP_FORMAT = {
    "type": "json_schema",
    "json_schema": {
        "name": "react_step",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {
                "thought": {"type": "string"},
                "action": {"type": "string"},
                "action_input": {"anyOf": [{"type": "object"}, {"type": "string"}]},
            },
            "required": ["thought", "action", "action_input"],
            "additionalProperties": False,
        },
    },
}


@register_paradigm
class ReAct(Paradigm):
    key: ClassVar[str] = "react"
    label: ClassVar[str] = "ReAct"
    params_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "mode": {"enum": ["function_calling", "text", "json"], "default": "function_calling",
                     "description": "How the model chooses actions."},
            "max_iterations": {"type": "integer", "minimum": 1, "maximum": 100, "default": 8},
            "reflector": {"enum": ["none", "rule", "llm"], "default": "none",
                          "description": "Review each observation and feed a suggestion back."},
            "markers": MARKERS_SCHEMA,  # text mode: other names for Thought, Action, …
            "few_shot": few_shot_schema(
                "Example turns shown before the question, in the mode's own format (a small "
                "model copies a shown exchange far better than one described in the prompt)."),
            "first_tool_choice": {
                "enum": ["auto", "required"], "default": "auto",
                "description": "'required': the first reply must call a tool (small models "
                               "otherwise answer from memory at once). Function calling: the "
                               "first turn's tool_choice; JSON: its schema leaves out "
                               "final_answer; text: a Final Answer first is sent back as a "
                               "format error."},
        },
        "additionalProperties": False,
    }

    async def run(self, ctx: RunContext, task: str) -> str:
        """Loop thought → action → observation until an answer or max_iterations."""
        params = self.params_of(ctx)
        # Per-run state on the instance: the runner builds one instance per run.
        self.ctx, self.task = ctx, task
        self.reflector = make_reflector(params["reflector"])
        self.history: list[dict[str, Any]] = []
        if self.reflector is not None:
            ctx.on_loop = self._on_loop
        mode = params["mode"]
        self.markers = params.get("markers") or {}
        messages = self._start(mode, params["few_shot"])
        turn = {"function_calling": self._turn_tools, "text": self._turn_text,
                "json": self._turn_json}[mode]
        self.first_choice = params.get("first_tool_choice", "auto")
        self.turns = 0
        for _ in range(params["max_iterations"]):
            self.turns += 1
            answer = await turn(messages)
            if answer is not None:
                return answer
        raise IterationLimit(f"reached max_iterations ({params['max_iterations']}) "
                             "without a final answer")

    def _start(self, mode: str, few_shot: list[dict[str, Any]]) -> list[dict[str, Any]]:
        ex = self.ctx.executor
        prompt = fill(load_prompt(f"react_{mode}.txt"), tools=ex.describe(),
                      tool_names=", ".join(ex.names))
        if self.ctx.system_prompt:
            prompt = f"{self.ctx.system_prompt}\n\n{prompt}"
        question = self.task if mode == "function_calling" else f"Question: {self.task}"
        return [{"role": "system", "content": prompt}, *example_turns(few_shot),
                *self.ctx.history,
                {"role": "user", "content": question}]

    # ------------------------------------------------------------ function calling

    def _must_act(self) -> bool:
        """The first turn must call a tool (first_tool_choice 'required', and tools to call)."""
        return self.turns == 1 and self.first_choice == "required" and bool(
            self.ctx.executor.names)

    async def _turn_tools(self, messages: list[dict[str, Any]]) -> str | None:
        choice = self.first_choice if self.turns == 1 and self.first_choice != "auto" else None
        result = await self.ctx.llm("agent", messages, tools=self.ctx.executor.openai_tools(),
                                    tool_choice=choice, max_tokens=MAX_TOKENS)
        if not result.tool_calls:
            if answer := (result.text or "").strip():
                return answer
            # Small models sometimes send nothing at all; say so instead of answering "".
            error = await self._format_error("the reply was empty; call a tool or write the "
                                             "answer as plain text", raw=result.text)
            messages.append({"role": "user", "content": error})
            return None
        if (result.text or "").strip():
            await self.ctx.emit(Step(kind="thought", text=result.text.strip()))
        messages.append({"role": "assistant", "content": result.text or None, "tool_calls": [
            {"id": c.id, "type": "function",
             "function": {"name": c.name, "arguments": c.raw_arguments}}
            for c in result.tool_calls]})
        # Independent calls of one reply run at the same time, each answered by its id.
        observations = await asyncio.gather(*(self._call(c) for c in result.tool_calls))
        for call, observation in zip(result.tool_calls, observations, strict=True):
            messages.append({"role": "tool", "tool_call_id": call.id, "content": observation})
        return None

    async def _call(self, call: ToolCall) -> str:
        if call.error is not None or call.arguments is None:
            return await self._format_error(
                f"the arguments of {call.name} are not valid JSON ({call.error or 'missing'}); "
                "send a JSON object", raw=call.raw_arguments)
        return await self._act(call.name, call.arguments)

    # ------------------------------------------------------------ text and JSON

    async def _turn_text(self, messages: list[dict[str, Any]]) -> str | None:
        stop = stop_words(self.markers, "observation", "Observation")
        result = await self.ctx.llm("agent", messages, stop=stop, max_tokens=MAX_TOKENS,
                                    response_format=text_format(self.ctx.executor, self.markers,
                                                                final=not self._must_act()))
        messages.append({"role": "assistant", "content": result.text or ""})
        try:
            decision = parse_react(result.text or "", markers=self.markers)
        except ParseError as exc:
            observation = await self._format_error(str(exc), raw=result.text)
        else:
            if decision.thought:
                await self.ctx.emit(Step(kind="thought", text=decision.thought))
            if isinstance(decision, ReactFinal) and self._must_act():
                observation = await self._format_error(
                    "call a tool before the final answer: Action: one of "
                    f"{', '.join(self.ctx.executor.names)}, then Action Input: its arguments "
                    "as JSON", raw=result.text)
            elif isinstance(decision, ReactFinal):
                return decision.answer
            else:
                observation = await self._act(decision.tool, decision.tool_input)
        messages.append({"role": "user", "content": f"Observation: {observation}"})
        return None

    async def _turn_json(self, messages: list[dict[str, Any]]) -> str | None:
        result = await self.ctx.llm("agent", messages, max_tokens=MAX_TOKENS,
                                    response_format=step_format(self.ctx.executor,
                                                                final=not self._must_act()))
        messages.append({"role": "assistant", "content": result.text or ""})
        try:
            thought, action, action_input = _read_json_step(result)
        except ParseError as exc:
            observation = await self._format_error(str(exc), raw=result.text)
        else:
            if thought:
                await self.ctx.emit(Step(kind="thought", text=thought))
            if action == "final_answer":
                if isinstance(action_input, str):
                    return action_input
                return json.dumps(action_input, ensure_ascii=False)
            observation = await self._act(action, action_input)
        messages.append({"role": "user", "content": f"Observation: {observation}"})
        return None

    # ------------------------------------------------------------ shared

    async def _act(self, name: str, arguments: Any) -> str:
        result = await self.ctx.tool(name, arguments)
        observation = result.observation
        if self.reflector is not None and result.error_type != "loop":
            reflection = await self.reflector.reflect(
                self.ctx, task=self.task, action=name, arguments=arguments,
                observation=observation, ok=result.ok, history=self.history)
            await record_reflection(self.ctx, reflection)
            observation = _with_suggestion(observation, reflection)
        self.history.append({"action": name, "arguments": arguments})
        return observation

    async def _format_error(self, message: str, *, raw: str | None) -> str:
        """The model broke the format: record it, count it, and tell the model what was wrong."""
        self.ctx.totals.format_errors += 1
        await self.ctx.emit(Step(kind="error", text=message, input=raw, status="error",
                                 meta={"format_error": True}))
        return f"Error: {message}"

    async def _on_loop(self, name: str, arguments: Any, parent: int | None) -> str:
        nudge = (f"You called {name} with the same arguments "
                 f"{self.ctx.limits.max_repeats} times in a row; the result will not change. "
                 "Try a different tool or different arguments, or give the final answer.")
        reflection = Reflection(goal_achieved=False, plan_valid=False, suggestion=nudge,
                                rule="loop")
        await record_reflection(self.ctx, reflection, parent=parent)
        return f"Error: repeated call not run. {nudge}"


def step_format(executor: Any, *, final: bool = True) -> dict[str, Any]:
    """REACT_STEP_FORMAT narrowed to this agent: the action is one of its tools or (unless
    `final` is False: a turn that must act) final_answer, the input one of its tools'
    arguments (or the answer's text)."""
    tools = executor.openai_tools()
    if not tools:
        return REACT_STEP_FORMAT
    inputs = [closed(t["function"]["parameters"]) for t in tools
              if t["function"].get("parameters")]
    unique = list({json.dumps(i, sort_keys=True): i for i in inputs}.values())
    schema = {
        "type": "object",
        "properties": {
            # Bounded: a small model that reasons in the thought ("125 + 375 = 725, then …")
            # runs out of max_tokens before it writes the action.
            "thought": {"type": "string", "maxLength": THOUGHT_CHARS},
            "action": {"enum": [t["function"]["name"] for t in tools]
                       + (["final_answer"] if final else [])},
            # An answer is never empty (a small model closes the quotes at once otherwise).
            "action_input": {"anyOf": [*unique, {"type": "string", "minLength": 1,
                                                 "maxLength": ANSWER_CHARS}]},
        },
        "required": ["thought", "action", "action_input"],
        "additionalProperties": False,
    }
    # Not strict: a tool's own schema need not meet OpenAI's strict-mode rules.
    return {"type": "json_schema", "json_schema": {"name": "react_step", "strict": False,
                                                   "schema": schema}}


def text_format(executor: Any, markers: dict[str, Any], *, final: bool = True
                ) -> dict[str, Any] | None:
    """Text ReAct's shape as our own response format (chatml.REACT_TEXT), for the embedded
    model's server, which turns it into a grammar: "Thought: …" then "Action: <one of the
    agent's tools>" and "Action Input: <its arguments as JSON>", or (unless `final` is False:
    a turn that must act) "Final Answer: …". Other servers are sent the turn without it (the
    client drops it) and the parser reads what they write."""
    tools = executor.openai_tools()
    if not tools:
        return None
    labels = label_alternatives(markers, REACT_LABELS, leave_out="observation")
    return {"type": REACT_TEXT, "labels": labels, "final": final,
            "tools": [{"name": t["function"]["name"],
                       "parameters": closed(t["function"].get("parameters"))}
                      for t in tools]}


def _with_suggestion(observation: str, reflection: Reflection) -> str:
    if reflection.plan_valid or not reflection.suggestion:
        return observation
    return f"{observation}\n\nReflection: {reflection.suggestion}"


def _read_json_step(result: ChatResult) -> tuple[str, str, Any]:
    text = unwrap_fence((result.text or "").strip())
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ParseError(f"the reply is not valid JSON ({exc.msg}). {JSON_FORMAT_HINT}") from None
    if not isinstance(data, dict) or not isinstance(data.get("action"), str):
        raise ParseError(f"the reply has no \"action\" string. {JSON_FORMAT_HINT}")
    action_input = data.get("action_input", "")
    if isinstance(action_input, str) and data["action"].strip() != "final_answer":
        action_input = coerce_input(action_input)  # '{"city": …}' or 'get_weather({…})'
    if not isinstance(action_input, dict | str):
        action_input = json.dumps(action_input)
    thought = data.get("thought")
    return (thought if isinstance(thought, str) else ""), data["action"].strip(), action_input
