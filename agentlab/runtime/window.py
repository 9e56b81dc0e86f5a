"""Fit a prompt to a model's context window before it is sent (pure, no tokenizer).

The estimate errs on the safe side of what BPE tokenizers do. Measured against the embedded
model's tokenizer (SmolLM2), it counts a lowercase ASCII letter or a space as 2/7 of a token
(3.5 a token; English prose runs 4.9), a capital as half a token, any other ASCII character
(digit, punctuation, newline, tab) as a whole token (SmolLM2 gives every digit its own token;
JSON runs 1.8 characters a token), each byte of a non-ASCII character as 3/4 of a token (Chinese
0.65, emoji 0.73 a byte), and 8 tokens a message for its role markers. That over-counts
English prose by 46 %, code by 42 %, JSON and SQL by 20 %, Chinese by 16 %, Russian by 72 %
and French by 2 %; only runs of random letters come out under (hex by 17 %, base64 by 37 %,
random lowercase by half). Where a server still says the prompt is too long, that is reported
as such (agentlab.llm.errors.ContextTooLong), and the runtime fits once more to the server's
own count (RunContext.llm).

What is kept, in this order of importance: the leading system messages and the question (the
first message after the conversation's history) are never touched — when they alone exceed the
budget the request is refused (`PromptTooLong`); then the latest messages of the run itself, then
the history, newest first. To fit, (1) a message longer than half the room is shortened in the
middle, (2) the oldest history turns are dropped, (3) the run's own long messages are shortened
to a common length, (4) the run's oldest exchanges (a reply with its tool results) are dropped,
never its latest one. A shortened message says so in its text: MARKER.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agentlab.llm.errors import ContextTooLong

MESSAGE_TOKENS = 8  # role markers and separators of one message (ChatML needs ~6)
REQUEST_TOKENS = 8  # the reply's own opening ("<|im_start|>assistant\n")
MIN_KEPT_TOKENS = 64  # a shortened message keeps at least this much of its text
RESERVE_SHARE = 8  # without max_tokens, an eighth of the window is kept for the reply
MARKER = "[… {chars:,} characters cut to fit the model's context window …]"

_SMALL = b"abcdefghijklmnopqrstuvwxyz "
_CAPITALS = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_NON_ASCII = bytes(range(128, 256))


def estimate_tokens(text: str) -> int:
    """A tokenizer-free count that errs on the safe side (the rule is in the module docstring)."""
    if not text:
        return 0
    data = text.encode("utf-8", "surrogatepass")
    small = len(data) - len(data.translate(None, _SMALL))
    capitals = len(data) - len(data.translate(None, _CAPITALS))
    non_ascii = len(data) - len(data.translate(None, _NON_ASCII))
    other = len(data) - small - capitals - non_ascii  # digits, punctuation, newlines, tabs
    # In 28ths of a token: 2/7 a small letter or space, 1/2 a capital, 1 any other ASCII
    # character, 3/4 a byte of a non-ASCII one; rounded up.
    return (8 * small + 14 * capitals + 28 * other + 21 * non_ascii + 27) // 28


def message_tokens(message: dict[str, Any]) -> int:
    return MESSAGE_TOKENS + estimate_tokens(_text_of(message)) + estimate_tokens(
        _json(message.get("tool_calls")))


def fixed_tokens(tools: Any = None, response_format: Any = None) -> int:
    """What a request costs besides its messages: the tool schemas, a response schema."""
    return REQUEST_TOKENS + estimate_tokens(_json(tools)) + estimate_tokens(
        _json(response_format))


@dataclass(frozen=True)
class Budget:
    """A context window and what is kept of it for the reply; `prompt` is what a prompt may use."""

    context_tokens: int
    reserve: int

    @property
    def prompt(self) -> int:
        return self.context_tokens - self.reserve

    @classmethod
    def of(cls, context_tokens: int, max_tokens: int | None) -> Budget:
        """The reply's max_tokens is kept free (an eighth of the window when none is set), but
        never more than half the window: a server truncates the reply sooner or says why."""
        reserve = max_tokens if max_tokens and max_tokens > 0 else context_tokens // RESERVE_SHARE
        return cls(context_tokens, min(reserve, context_tokens // 2))


class PromptTooLong(ContextTooLong):
    """What must be sent intact (system prompt and question) exceeds the budget: not sent."""

    def __init__(self, message: str, *, estimated: int, budget: Budget) -> None:
        super().__init__(message)
        self.estimated = estimated
        self.budget = budget


@dataclass
class Fitted:
    """The messages as they will be sent, and what was cut to get there."""

    messages: list[dict[str, Any]]
    budget: Budget
    estimated: int  # tokens of the fitted request (messages and fixed part)
    original: int  # tokens of the request as given
    dropped_turns: int = 0  # history turns left out, oldest first
    dropped_messages: int = 0  # messages left out (history turns and the run's own exchanges)
    cut_messages: int = 0  # messages shortened in the middle
    chars_cut: int = 0

    @property
    def trimmed(self) -> bool:
        return bool(self.dropped_messages or self.cut_messages)

    def meta(self) -> dict[str, Any]:
        """What an `llm` step's meta.trimmed says (the full values stay in the trace)."""
        return {"dropped_turns": self.dropped_turns, "dropped_messages": self.dropped_messages,
                "cut_messages": self.cut_messages, "chars_cut": self.chars_cut,
                "budget": self.budget.prompt, "context_tokens": self.budget.context_tokens,
                "reserve": self.budget.reserve, "estimated_tokens": self.estimated,
                "original_tokens": self.original}


def fit(messages: Sequence[dict[str, Any]], budget: Budget, *,
        history: Sequence[dict[str, Any]] = (), fixed: int = 0, ratio: float = 1.0,
        model: str = "the model") -> Fitted:
    """`messages` cut to `budget` (the caller's list and dicts are left as they are).

    `history` is the conversation's earlier turns, found right after the leading system
    messages (as every paradigm places them; the question is the message after them). `fixed`
    is what tools and schemas cost; `ratio` scales every estimate (a server that counted more
    than we did says by how much)."""
    plan = _Plan(messages, ratio, fixed)
    total = plan.spent
    if total <= budget.prompt:  # the common case: nothing to do
        return Fitted(list(messages), budget, total, total)
    head = 0
    while head < len(messages) and messages[head].get("role") in ("system", "developer"):
        head += 1
    question = head + _history_length(messages, head, history)
    pinned = {*range(head), *([question] if question < len(messages) else [])}
    pinned_cost = sum(plan.costs[i] for i in pinned) + plan.fixed
    if pinned_cost > budget.prompt:
        asked = plan.costs[question] if question < len(messages) else 0
        raise PromptTooLong(_refusal(asked, pinned_cost, budget, model), estimated=pinned_cost,
                            budget=budget)
    room = budget.prompt - pinned_cost
    cuttable = [i for i in range(len(messages)) if i not in pinned]
    # 1. Nothing else may take more than half of the room.
    plan.level(cuttable, max(MIN_KEPT_TOKENS, room // 2))
    # 2. The oldest history turns go first.
    for turn in _groups(messages, range(head, question), start_role="user"):
        if plan.spent <= budget.prompt:
            break
        plan.drop(turn, turn=True)
    # 3. The run's own long messages are shortened to a common length.
    if plan.spent > budget.prompt:
        plan.fill([i for i in cuttable if i not in plan.dropped], room)
    # 4. Its oldest exchanges go, never the latest.
    for exchange in _groups(messages, range(question + 1, len(messages)),
                            start_role="assistant")[:-1]:
        if plan.spent <= budget.prompt:
            break
        plan.drop(exchange, turn=False)
    if plan.spent > budget.prompt:
        raise PromptTooLong(
            f"the conversation no longer fits: ~{plan.spent:,} tokens after shortening it; "
            f"{_reads(model, budget)}", estimated=plan.spent, budget=budget)
    return plan.result(budget, total)


class _Plan:
    """Which messages are dropped and which are shortened to what, before any is copied;
    `spent` is what the request costs so far."""

    def __init__(self, messages: Sequence[dict[str, Any]], ratio: float, fixed: int) -> None:
        self.messages = messages
        self.ratio = ratio
        self.fixed = self.scaled(fixed)
        self.costs = [self.scaled(message_tokens(m)) for m in messages]
        self.spent = sum(self.costs) + self.fixed
        self.texts: dict[int, str] = {}  # index -> shortened content
        self.chars_cut: dict[int, int] = {}
        self.dropped: set[int] = set()
        self.dropped_turns = 0

    def scaled(self, tokens: int) -> int:
        return tokens if self.ratio == 1.0 else math.ceil(tokens * self.ratio)

    def drop(self, group: list[int], *, turn: bool) -> None:
        self.dropped.update(group)
        self.spent -= sum(self.costs[i] for i in group)
        self.dropped_turns += turn

    def level(self, indexes: list[int], cap: int) -> None:
        """Shorten each of `indexes` that costs more than `cap` tokens to about `cap`."""
        for i in indexes:
            if self.costs[i] > cap:
                self._shorten(i, cap)

    def fill(self, indexes: list[int], room: int) -> None:
        """Shorten the longest of `indexes` to one common cost so that they fit in `room`
        (never below MIN_KEPT_TOKENS each): water-filling from the top."""
        ordered = sorted((self.costs[i] for i in indexes), reverse=True)
        rest = sum(ordered)
        for k, cost in enumerate(ordered):
            rest -= cost  # capping the k+1 largest at `level` leaves `rest` as it is
            level = (room - rest) // (k + 1)
            if k + 1 == len(ordered) or level >= ordered[k + 1]:
                self.level(indexes, max(MIN_KEPT_TOKENS, min(level, cost)))
                return

    def _shorten(self, i: int, cap: int) -> None:
        content = self.messages[i].get("content")
        if not isinstance(content, str):
            return  # structured content (images, parts) and bare tool calls stay whole
        others = self.costs[i] - self.scaled(estimate_tokens(self.texts.get(i, content)))
        target = max(cap - others, MIN_KEPT_TOKENS)
        keep = min(len(content), len(self.texts.get(i, content)))
        text = content
        for _ in range(8):  # the estimate is not uniform along a text: converge on the target
            text = _cut(content, keep)
            tokens = self.scaled(estimate_tokens(text))
            if tokens <= target or keep == 0:
                break
            keep = int(keep * target / tokens * 0.97)
        else:
            text = _cut(content, keep)
        if len(text) >= len(content):
            return
        cost = others + self.scaled(estimate_tokens(text))
        self.spent += cost - self.costs[i]
        self.costs[i] = cost
        self.texts[i] = text
        self.chars_cut[i] = len(content) - keep

    def result(self, budget: Budget, original: int) -> Fitted:
        out = [{**m, "content": self.texts[i]} if i in self.texts else m
               for i, m in enumerate(self.messages) if i not in self.dropped]
        cut = sorted(i for i in self.texts if i not in self.dropped)
        return Fitted(out, budget, self.spent, original, dropped_turns=self.dropped_turns,
                      dropped_messages=len(self.dropped), cut_messages=len(cut),
                      chars_cut=sum(self.chars_cut[i] for i in cut))


def _cut(text: str, keep: int) -> str:
    """`text` with all but `keep` characters cut from its middle, and a marker where they were."""
    if keep >= len(text):
        return text
    keep = max(keep, 0)
    head = keep - keep // 2
    tail = keep // 2
    marker = MARKER.format(chars=len(text) - keep)
    return f"{text[:head]}\n{marker}\n{text[len(text) - tail:] if tail else ''}"


def _history_length(messages: Sequence[dict[str, Any]], head: int,
                    history: Sequence[dict[str, Any]]) -> int:
    """How many messages after the system messages are the conversation's history: all of it,
    or its newest part (a request fitted once already, then edited), or none (a call built
    without it)."""
    if not history:
        return 0
    if list(messages[head:head + len(history)]) == list(history):
        return len(history)
    last = history[-1]
    for end in range(head, min(len(messages), head + len(history))):
        if messages[end] == last:
            n = end - head + 1
            if list(messages[head:end + 1]) == list(history[len(history) - n:]):
                return n
    return 0


def _groups(messages: Sequence[dict[str, Any]], indexes: range, *,
            start_role: str) -> list[list[int]]:
    """`indexes` in runs that each start at a `start_role` message (history turns start at a
    question, the run's exchanges at a reply, so a reply's tool results go with it)."""
    groups: list[list[int]] = []
    for i in indexes:
        if not groups or messages[i].get("role") == start_role:
            groups.append([i])
        else:
            groups[-1].append(i)
    return groups


def _refusal(asked: int, pinned: int, budget: Budget, model: str) -> str:
    """Why a request is not sent, with the sizes: the message's, the instructions', the model's."""
    instructions = pinned - asked
    if asked >= instructions:
        what = f"the message is ~{asked:,} tokens"
        if instructions > 4 * MESSAGE_TOKENS:
            what += f" (~{pinned:,} with the agent's instructions and tools)"
    else:
        what = (f"the agent's instructions and tools are ~{instructions:,} tokens and the "
                f"message ~{asked:,}")
    return (f"{what}; {_reads(model, budget)} — shorten the message or use a model with a "
            "larger context window")


def _reads(model: str, budget: Budget) -> str:
    return (f"{model} reads at most {budget.context_tokens:,} tokens (with "
            f"{budget.reserve:,} kept for the reply)")


def _text_of(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: count their text; an image is its JSON
        return "".join(p.get("text", "") if isinstance(p, dict) and "text" in p else _json(p)
                       for p in content)
    return "" if content is None else _json(content)


def _json(value: Any) -> str:
    if not value:
        return ""
    return json.dumps(value, ensure_ascii=False, default=str)
