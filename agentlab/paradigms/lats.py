"""LATS (Zhou et al. 2023, Language Agent Tree Search): Monte-Carlo tree search over ReAct steps.

Each iteration selects a leaf by UCT, samples `n_candidates` next ReAct steps (JSON format),
runs their actions, scores every new node with an LLM value prompt (0–10), back-propagates the
scores and writes a one-sentence reflection on a failed trajectory for later prompts. The search
stops on a final answer judged solved, or at the iteration/depth limit, and answers from the best
trajectory. Every node is a `node` step whose llm/tool steps are nested under it.
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, ClassVar

from agentlab.llm.grammars import SCORED
from agentlab.paradigms._lats_tree import (
    Node,
    backpropagate,
    best_node,
    best_terminal,
    select,
    trajectory_text,
)
from agentlab.paradigms.parsing import ParseError, parse_score
from agentlab.paradigms.prompt_files import fill, load_prompt
from agentlab.paradigms.react import _read_json_step, step_format
from agentlab.paradigms.registry import Paradigm, register_paradigm
from traces.schema import Step, normalise_args

if TYPE_CHECKING:
    from agentlab.runtime.context import RunContext

VALUE_MAX_TOKENS = 96  # one or two sentences of reasoning, then the score


@register_paradigm
class LATS(Paradigm):
    key: ClassVar[str] = "lats"
    label: ClassVar[str] = "LATS"
    description: ClassVar[str] = (
        "Tree search over ReAct steps: samples several next actions, scores each with an "
        "evaluator, explores the most promising branch and learns from failed ones.")
    demo_question: ClassVar[str] = (
        "In the demo business database, which product category brought in the most revenue "
        "from delivered orders, and how much was it?")
    params_schema: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "max_iterations": {"type": "integer", "minimum": 1, "maximum": 30, "default": 4,
                               "description": "Select-expand-evaluate rounds."},
            "n_candidates": {"type": "integer", "minimum": 1, "maximum": 8, "default": 3,
                             "description": "Next steps sampled per expansion."},
            "max_depth": {"type": "integer", "minimum": 1, "maximum": 20, "default": 5,
                          "description": "Longest trajectory (actions from the root)."},
            "exploration": {"type": "number", "minimum": 0, "maximum": 10, "default": 1.0,
                            "description": "UCT exploration weight."},
            "temperature": {"type": "number", "minimum": 0, "maximum": 2, "default": 0.8,
                            "description": "Sampling temperature of the candidates."},
            "solved_threshold": {"type": "number", "minimum": 0, "maximum": 10, "default": 9,
                                 "description": "Score (0–10) at which a final answer counts "
                                                "as solved."},
        },
        "additionalProperties": False,
    }

    async def run(self, ctx: RunContext, task: str) -> str:
        """Search until a solved answer or the limits; answer from the best trajectory."""
        self.p = self.params_of(ctx)
        self.ctx, self.task = ctx, task
        self.reflections: list[str] = []
        # Identical calls in different branches reuse one result: no repeated side effects, and
        # the runtime's loop detection never mistakes sibling candidates for a loop.
        self.tool_cache: dict[str, tuple[bool, str]] = {}
        self.root = Node()
        self.root.step = await ctx.emit(Step(kind="node", name="root", text=task,
                                             meta=_meta(self.root)))
        for _ in range(self.p["max_iterations"]):
            leaf = select(self.root, self.p["exploration"], self.p["max_depth"])
            if leaf is None or await self._iterate(leaf):
                break
        return await self._answer()

    async def _iterate(self, leaf: Node) -> bool:
        """Expand `leaf` with n candidates; True when one of them solved the task."""
        new: list[Node] = []
        for index in range(self.p["n_candidates"]):
            child = await self._candidate(leaf, index)
            new.append(child)
            if child.solved:
                return True
        failed = [c for c in new if self._failed(c)]
        if failed:  # one lesson per iteration, from the failure the search rated highest
            await self._reflect(max(failed, key=lambda c: c.score or 0.0))
        return False

    def _failed(self, node: Node) -> bool:
        if not node.action:  # an unreadable candidate: a format problem, nothing to learn
            return False
        if node.answer is not None:
            return not node.solved
        return node.depth >= self.p["max_depth"]

    # ------------------------------------------------------------ one candidate

    async def _candidate(self, leaf: Node, index: int) -> Node:
        ctx, started = self.ctx, time.perf_counter()
        # The node step comes first, so the candidate's llm/tool steps can be nested under it.
        step = await ctx.emit(Step(kind="node", name=f"candidate {index + 1}",
                                   parent=leaf.step.seq, status="running",
                                   meta={"depth": leaf.depth + 1}))
        # The schema narrowed to this agent: its tools, their arguments, a bounded thought
        # and answer (the generic one let SmolLM2 call the tool "Observation: ...").
        result = await ctx.llm("agent", self._messages(leaf),
                               response_format=step_format(ctx.executor),
                               temperature=self.p["temperature"], parent=step.seq)
        try:
            thought, action, action_input = _read_json_step(result)
        except ParseError as exc:
            ctx.totals.format_errors += 1
            await ctx.emit(Step(kind="error", text=str(exc), input=result.text, status="error",
                                parent=step.seq, meta={"format_error": True}))
            child = leaf.add(terminal=True, observation=f"Error: {exc}", step=step)
            step.status = "error"
            return await self._settle(child, [child], started)
        child = leaf.add(thought=thought, action=action, action_input=action_input, step=step)
        if action == "final_answer":
            child.terminal = True
            child.answer = (action_input if isinstance(action_input, str)
                            else json.dumps(action_input, ensure_ascii=False))
        else:
            child.observation = await self._act(action, action_input, step.seq)
        await self._evaluate(child)
        step.status = "ok"
        return await self._settle(child, backpropagate(child, child.score or 0.0), started)

    async def _settle(self, child: Node, changed: list[Node], started: float) -> Node:
        step = child.step
        step.text = child.thought
        step.input = {"action": child.action, "action_input": child.action_input}
        step.output = child.answer if child.answer is not None else child.observation
        step.duration_ms = (time.perf_counter() - started) * 1000
        for node in changed:  # re-emitting a step updates it: new value and visits
            node.step.meta.update(_meta(node))
            await self.ctx.emit(node.step)
        return child

    def _messages(self, leaf: Node) -> list[dict[str, Any]]:
        ex = self.ctx.executor
        system = fill(load_prompt("react_json.txt"), tools=ex.describe(),
                      tool_names=", ".join(ex.names))
        if self.ctx.system_prompt:
            system = f"{self.ctx.system_prompt}\n\n{system}"
        if self.reflections:
            lessons = "\n".join(f"- {r}" for r in self.reflections)
            system += "\n\n" + fill(load_prompt("lats_reflections.txt"), reflections=lessons)
        messages = [{"role": "system", "content": system}, *self.ctx.history,
                    {"role": "user", "content": f"Question: {self.task}"}]
        for node in leaf.path()[1:]:
            messages.append({"role": "assistant", "content": json.dumps(
                {"thought": node.thought, "action": node.action,
                 "action_input": node.action_input}, ensure_ascii=False)})
            messages.append({"role": "user", "content": f"Observation: {node.observation}"})
        return messages

    async def _act(self, name: str, arguments: Any, parent: int) -> str:
        key = f"{name} {normalise_args(arguments)}"
        if key in self.tool_cache:
            ok, observation = self.tool_cache[key]
            await self.ctx.emit(Step(kind="tool", name=name, parent=parent, input=arguments,
                                     text=observation, output={"observation": observation},
                                     status="ok" if ok else "error", duration_ms=0.0,
                                     meta={"cached": True}))
            return observation
        result = await self.ctx.tool(name, arguments, parent=parent)
        self.tool_cache[key] = (result.ok, result.observation)
        return result.observation

    async def _evaluate(self, node: Node) -> None:
        final = node.answer is not None
        prompt = load_prompt("lats_value_final.txt" if final else "lats_value.txt")
        result = await self.ctx.llm("evaluator", [
            {"role": "system", "content": prompt},
            {"role": "user", "content": trajectory_text(node, self.task)}],
            temperature=0.0, max_tokens=VALUE_MAX_TOKENS, parent=node.step.seq,
            response_format={"type": SCORED, "low": 0, "high": 10})
        try:
            node.score = parse_score(result.text or "", low=0, high=10)
        except ParseError as exc:
            # Searched as 0, but marked: an unreadable score is not a judgement of the node.
            self.ctx.totals.format_errors += 1
            node.step.meta["value_error"] = True
            await self.ctx.emit(Step(kind="error", role="evaluator", status="error",
                                     parent=node.step.seq, input=result.text,
                                     text=f"The evaluator's reply has no usable score: {exc}",
                                     meta={"value_error": True}))
            return
        node.solved = final and node.score >= self.p["solved_threshold"]

    async def _reflect(self, node: Node) -> None:
        why = (f"Its final answer was scored {node.score or 0:g}/10, below the "
               f"{self.p['solved_threshold']:g} needed." if node.answer is not None else
               f"It reached the depth limit of {self.p['max_depth']} actions without an answer.")
        result = await self.ctx.llm("reflector", [
            {"role": "system", "content": load_prompt("lats_reflect.txt")},
            {"role": "user", "content": f"{trajectory_text(node, self.task)}\n\n{why}"}],
            parent=node.step.seq)
        text = next((line.strip() for line in (result.text or "").splitlines() if line.strip()),
                    "")
        if not text:
            await self.ctx.emit(Step(kind="error", role="reflector", status="error",
                                     parent=node.step.seq, input=result.text,
                                     text="The reflector's reply was empty; no lesson recorded."))
            return
        self.reflections.append(text)
        self.ctx.totals.reflections += 1
        await self.ctx.emit(Step(kind="reflection", role="reflector", name="lats",
                                 parent=node.step.seq, text=text, meta={"reason": why}))

    # ------------------------------------------------------------ the answer

    async def _answer(self) -> str:
        best = best_terminal(self.root)
        chosen = best or best_node(self.root) or self.root
        seqs = [n.step.seq for n in chosen.path()]
        score = f"scored {chosen.score:g}/10" if chosen.score is not None else "not scored"
        what = "its final answer" if best else "no final answer; a solver answers from it"
        await self.ctx.emit(Step(kind="thought", name="best trajectory", meta={
            "trajectory": seqs, "solved": chosen.solved},
            text=f"Chose the trajectory of nodes {' → '.join(map(str, seqs))} ({score}, {what})."))
        if best is not None:
            return best.answer or ""
        result = await self.ctx.llm("solver", [
            {"role": "system", "content": load_prompt("lats_solver.txt")},
            {"role": "user", "content": trajectory_text(chosen, self.task)}])
        return (result.text or "").strip()

    def partial_answer(self, ctx: RunContext, reason: str) -> str:
        """A budget ended the search: the best answer found so far, if there is one."""
        root = getattr(self, "root", None)
        best = best_terminal(root) if root is not None else None
        if best is None:
            return super().partial_answer(ctx, reason)
        score = f"scored {best.score:g}/10" if best.score is not None else "not scored"
        return (f"I stopped before the search finished ({reason}). The best answer found so "
                f"far ({score}): {best.answer}")


def _meta(node: Node) -> dict[str, Any]:
    return {"value": round(node.value, 3), "visits": node.visits, "depth": node.depth,
            "score": node.score, "action": node.action or None,
            "action_input": node.action_input, "terminal": node.terminal,
            "solved": node.solved}
