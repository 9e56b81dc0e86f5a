"""The embedded model server's own process: llama-cpp-python's OpenAI-compatible server with
our chat handler "agentlab-chatml" registered (prompt and tool calls: `agentlab.llm.chatml`).

Run by `LocalModelServer` as `python -c <bootstrap> <server arguments>`; never imported by the
app itself (it imports llama_cpp). The process ends with its parent (PR_SET_PDEATHSIG), so a
`run_agent` killed with SIGKILL leaves no model server behind."""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from agentlab.llm import chatml

HANDLER = "agentlab-chatml"
PARENT_ENV = "AGENTLAB_LLM_PARENT_PID"  # the pid whose death ends this server
PROMPT_LOG_ENV = "AGENTLAB_LLM_PROMPT_LOG"  # a file: every prompt as tokenized, a JSON line each
PROMPT_CACHE_ENV = "AGENTLAB_LLM_PROMPT_CACHE_BYTES"  # the prompt cache's capacity; 0: none
PROMPT_CACHE_BYTES = 1 << 30
KEY_BYTES_PER_TOKEN = 40  # a cache key's tuple slot (8) and its int object (28, rounded up)
_PR_SET_PDEATHSIG = 1
_GRAMMARS: OrderedDict[str, Any] = OrderedDict()  # schema JSON -> LlamaGrammar, most recent last
_GRAMMAR_CACHE = 64
_lock = threading.Lock()


def tie_to_parent() -> None:
    """Get SIGTERM when the parent dies (Linux); if it is gone already, leave now."""
    parent = int(os.environ.get(PARENT_ENV, "0") or 0)
    if not parent:
        return
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the parent's atexit still stops us
        return
    if os.getppid() != parent:  # died before prctl took effect
        sys.exit(0)


class PromptCache:
    """The prompt cache (issue 38): llama-cpp-python's `LlamaRAMCache` (the states of earlier
    prompts, the one sharing the longest prefix with a new prompt loaded before it is read; the
    least recently used dropped beyond the capacity), with its memory counted as it is.

    `LlamaRAMCache` counts only a state's `llama_state` (the KV cells, ~23 KB a token here) while
    each `LlamaState` also holds a copy of the model's logits rows, `scores`: 196 KB a token
    (49,152 floats), up to the n_ctx rows with `logits_all` (the server's default) and still up
    to n_batch (512) rows, 96 MB, without it, where they are never written nor read. A 1 GiB
    cache so held 5 to 10 GB. Here those rows are dropped (one is kept, which `load_state`
    broadcasts) unless the model keeps all logits, and whatever stays is counted: the state,
    the scores, the token ids and the key. After an eviction, glibc is asked to give the freed
    memory back (`malloc_trim`): states of a few to 90 MB, freed out of order, otherwise stay
    in its heap."""

    def __init__(self, capacity_bytes: int, *, keep_scores: bool = False) -> None:
        self.capacity_bytes = capacity_bytes
        self.keep_scores = keep_scores
        self.cache_state: OrderedDict[tuple[int, ...], Any] = OrderedDict()
        self._sizes: dict[tuple[int, ...], int] = {}
        self.cache_size = 0  # bytes held, as counted by state_bytes
        self.evictions = 0
        self.trims = 0

    @staticmethod
    def state_bytes(key: tuple[int, ...], state: Any) -> int:
        """What one entry holds: its llama.cpp state, its arrays and its key."""
        return (int(state.llama_state_size) + int(state.scores.nbytes)
                + int(state.input_ids.nbytes) + KEY_BYTES_PER_TOKEN * len(key))

    def _longest_prefix_key(self, key: tuple[int, ...]) -> tuple[int, ...] | None:
        best, best_len = None, 0
        for k in self.cache_state:
            n = 0
            for a, b in zip(k, key, strict=False):
                if a != b:
                    break
                n += 1
            if n > best_len:
                best, best_len = k, n
        return best

    def __getitem__(self, key: Any) -> Any:
        found = self._longest_prefix_key(tuple(key))
        if found is None:
            raise KeyError("Key not found")
        self.cache_state.move_to_end(found)
        return self.cache_state[found]

    def __contains__(self, key: Any) -> bool:
        return self._longest_prefix_key(tuple(key)) is not None

    def __setitem__(self, key: Any, state: Any) -> None:
        key = tuple(key)
        if not self.keep_scores and len(state.scores) > 1:
            state.scores = state.scores[:1].copy()  # rows never written without logits_all
        self._drop(key)
        self.cache_state[key] = state
        self._sizes[key] = size = self.state_bytes(key, state)
        self.cache_size += size
        evicted = False
        while self.cache_size > self.capacity_bytes and self.cache_state:
            self._drop(next(iter(self.cache_state)))
            self.evictions += 1
            evicted = True
        if evicted:
            self.trims += release_memory()

    def _drop(self, key: tuple[int, ...]) -> None:
        if self.cache_state.pop(key, None) is not None:
            self.cache_size -= self._sizes.pop(key)


def release_memory() -> int:
    """glibc's malloc_trim(0): give the heap's free pages back to the system; 1 if it ran."""
    global _malloc_trim
    if _malloc_trim is None:
        try:
            _malloc_trim = ctypes.CDLL(None).malloc_trim
        except (OSError, AttributeError):  # not glibc
            _malloc_trim = False
    if not _malloc_trim:
        return 0
    _malloc_trim(0)
    return 1


_malloc_trim: Any = None


def install_cache(llama: Any) -> None:
    """Our prompt cache on the server's model, once (the server is started without its own
    `--cache`); its capacity from AGENTLAB_LLM_PROMPT_CACHE_BYTES, 0 for none."""
    if isinstance(getattr(llama, "cache", None), PromptCache):
        return
    capacity = int(os.environ.get(PROMPT_CACHE_ENV) or PROMPT_CACHE_BYTES)
    if capacity > 0:
        llama.set_cache(PromptCache(capacity,
                                    keep_scores=bool(getattr(llama, "_logits_all", True))))


def _cached(key: str, build: Any) -> Any:
    with _lock:
        if key in _GRAMMARS:
            _GRAMMARS.move_to_end(key)
            return _GRAMMARS[key]
    grammar = build()
    with _lock:
        _GRAMMARS[key] = grammar
        while len(_GRAMMARS) > _GRAMMAR_CACHE:
            _GRAMMARS.popitem(last=False)
    return grammar


def grammar_for(schema: dict[str, Any]) -> Any:
    """A LlamaGrammar for a JSON schema, converted once per schema (the conversion is Python and
    the same schemas come back every turn); a schema it cannot convert gets plain JSON."""
    from llama_cpp import llama_grammar

    def build() -> Any:
        try:  # in the schema's own key order: "thought" before "action", as ReAct thinks
            return llama_grammar.LlamaGrammar.from_json_schema(json.dumps(schema),
                                                               verbose=False)
        except Exception:  # noqa: BLE001 (any converter failure: still JSON)
            return llama_grammar.LlamaGrammar.from_string(llama_grammar.JSON_GBNF,
                                                          verbose=False)

    key = json.dumps(schema, sort_keys=True)
    return _cached(key, build)


def tool_grammar(tools: list[dict[str, Any]], forced: str | None, *,
                 calls_only: bool = False) -> Any:
    """The grammar of a tool turn (chatml.call_grammar), built once per tool list; `forced`
    names the one tool to call, `calls_only` (tool_choice "required") leaves out the text."""
    from llama_cpp import llama_grammar

    schema = chatml.call_schema(tools, forced)
    calls_only = calls_only or forced is not None

    def build() -> Any:
        try:
            call = llama_grammar.json_schema_to_gbnf(json.dumps(schema))
        except Exception:  # noqa: BLE001 (arguments the converter cannot read: any JSON)
            call = llama_grammar.json_schema_to_gbnf(json.dumps(chatml.call_schema(
                [{"function": {"name": (t.get("function") or {}).get("name")}}
                 for t in tools], forced)))
        return llama_grammar.LlamaGrammar.from_string(
            chatml.call_grammar(call, forced=calls_only), verbose=False)

    return _cached(json.dumps(["tools", schema, calls_only], sort_keys=True), build)


def _tokens(llama: Any, pieces: list[chatml.Piece]) -> list[int]:
    out: list[int] = []
    for i, (text, special) in enumerate(pieces):
        if text:
            out += llama.tokenize(text.encode("utf-8"), add_bos=i == 0, special=special)
    return out


def _log_prompt(pieces: list[chatml.Piece], n_tokens: int, kind: str) -> None:
    if path := os.environ.get(PROMPT_LOG_ENV):
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps({"prompt": chatml.prompt_text(pieces), "tokens": n_tokens,
                                "kind": kind, "at": time.time()}, ensure_ascii=False) + "\n")


def _response_schema(response_format: Any) -> dict[str, Any] | None:
    if not isinstance(response_format, dict):
        return None
    if response_format.get("type") == "json_object":
        return response_format.get("schema") or {"type": "object"}
    if response_format.get("type") == "json_schema":
        return (response_format.get("json_schema") or {}).get("schema") or {"type": "object"}
    return None


def agentlab_chatml(*, llama: Any, messages: list[dict[str, Any]],
                    tools: list[dict[str, Any]] | None = None, tool_choice: Any = None,
                    stream: bool = False, stop: Any = None, response_format: Any = None,
                    max_tokens: int | None = None, grammar: Any = None,
                    functions: Any = None, function_call: Any = None,
                    **sampling: Any) -> Any:
    """The chat completion handler: one completion per request, whatever it is."""
    from llama_cpp.llama_chat_format import _convert_completion_to_chat

    install_cache(llama)
    if functions and not tools:
        tools = [{"type": "function", "function": f} for f in functions]
        tool_choice = tool_choice or function_call
    tool_turn = bool(tools) and tool_choice != "none"
    forced = None
    if isinstance(tool_choice, dict):
        forced = (tool_choice.get("function") or {}).get("name")
    pieces = chatml.render(messages, tools if tool_turn else None)
    tokens = _tokens(llama, pieces)
    _log_prompt(pieces, len(tokens), "tools" if tool_turn else "chat")
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if tool_turn:
        assert tools is not None
        grammar = tool_grammar(tools, forced, calls_only=tool_choice == "required")
        stops = []
    elif (schema := _response_schema(response_format)) is not None:
        grammar = grammar_for(schema)
    if grammar is not None:
        # The grammar already rules out degenerate repeats, and a repeat penalty (the server's
        # default 1.1) makes the model misspell what it must copy: "B Beijing" for "Beijing".
        sampling["repeat_penalty"] = 1.0
    keep = ("temperature", "top_p", "top_k", "min_p", "typical_p", "seed", "presence_penalty",
            "frequency_penalty", "repeat_penalty", "tfs_z", "mirostat_mode", "mirostat_tau",
            "mirostat_eta", "model", "logits_processor", "logit_bias")
    completion = llama.create_completion(
        prompt=tokens, stream=stream, stop=stops + [chatml.IM_END], max_tokens=max_tokens,
        grammar=grammar, **{k: v for k, v in sampling.items() if k in keep})
    if not tool_turn:
        return _convert_completion_to_chat(completion, stream=stream)
    names = [str((t.get("function") or {}).get("name")) for t in tools or []]
    if stream:
        return _stream_tool_turn(completion, names)
    choice = completion["choices"][0]
    return _tool_response(completion, chatml.read_reply(choice["text"], names),
                          choice.get("finish_reason"), completion.get("usage"))


def _tool_response(head: dict[str, Any], message: dict[str, Any], finish: str | None,
                   usage: Any) -> dict[str, Any]:
    finish = "tool_calls" if message.get("tool_calls") else finish
    return {"id": "chat" + head["id"], "object": "chat.completion", "created": head["created"],
            "model": head["model"], "usage": usage,
            "choices": [{"index": 0, "message": message, "finish_reason": finish,
                         "logprobs": None}]}


def _stream_tool_turn(chunks: Iterator[dict[str, Any]], names: list[str]
                      ) -> Iterator[dict[str, Any]]:
    """A tool turn streamed: an answer in plain text goes out as it is written; a call is read
    whole, then sent as one delta."""
    text, head, finish, streaming = "", None, None, False
    for chunk in chunks:
        head = head or chunk
        piece = chunk["choices"][0]["text"]
        finish = chunk["choices"][0].get("finish_reason") or finish
        text += piece
        if not streaming and text.strip():
            streaming = not text.lstrip().startswith("<")
            piece = text if streaming else ""
        if streaming and piece:
            yield _chunk(head, {"role": "assistant", "content": piece}, None)
    if head is None:
        return
    if streaming:
        yield _chunk(head, {}, finish)
        return
    yield from _as_chunks(_tool_response(head, chatml.read_reply(text, names), finish, None))


def _chunk(head: dict[str, Any], delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
    return {"id": "chat" + head["id"], "object": "chat.completion.chunk",
            "created": head["created"], "model": head["model"],
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]}


def _as_chunks(response: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """A whole tool-turn reply as a stream: one delta, then the finish."""
    choice = response["choices"][0]
    message = choice["message"]
    delta: dict[str, Any] = {"role": "assistant", "content": message.get("content")}
    if calls := message.get("tool_calls"):
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(calls)]
    head = {**response, "id": response["id"].removeprefix("chat")}
    yield _chunk(head, delta, None)
    yield _chunk(head, {}, choice["finish_reason"])


def main() -> None:
    """Register the handler, then run llama-cpp-python's server on sys.argv."""
    tie_to_parent()
    # Its pydantic settings (case-insensitive) and its __main__ (HOST, PORT) read environment
    # variables over our command line: a developer's PORT=3000 must not move the server.
    from llama_cpp.server.settings import Settings

    names = set(Settings.model_fields) | {"config_file"}
    for key in [k for k in os.environ if k.lower() in names]:
        del os.environ[key]
    from llama_cpp import llama_chat_format
    from llama_cpp.server import __main__ as server_main

    llama_chat_format.LlamaChatCompletionHandlerRegistry().register_chat_completion_handler(
        HANDLER, agentlab_chatml, overwrite=True)
    server_main.main()


if __name__ == "__main__":
    main()
