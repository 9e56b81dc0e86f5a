"""The embedded server's prompt cache (issue 38: the server's memory grew without bound): what it
holds is what it counts, it stays within its capacity, gives freed memory back, and a state it
slimmed still continues a prompt as the full one did."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from agentlab.llm import embedded_server
from agentlab.llm.embedded_server import KEY_BYTES_PER_TOKEN, PromptCache, install_cache

VOCAB = 49152  # SmolLM2's


def fake_state(tokens: int, kv_bytes_per_token: int = 23_000) -> SimpleNamespace:
    """A LlamaState as llama-cpp-python's save_state makes it with logits_all off: the KV bytes,
    and min(tokens, n_batch) rows of logits that nothing wrote."""
    return SimpleNamespace(llama_state_size=tokens * kv_bytes_per_token,
                           scores=np.zeros((min(tokens, 512), VOCAB), dtype=np.single),
                           input_ids=np.zeros(4096, dtype=np.intc), n_tokens=tokens)


@pytest.fixture
def trims(monkeypatch):
    calls: list[int] = []
    monkeypatch.setattr(embedded_server, "release_memory", lambda: calls.append(1) or 1)
    return calls


def test_a_state_is_counted_with_everything_it_holds(trims):
    cache = PromptCache(1 << 30)
    key = tuple(range(600))
    cache[key] = state = fake_state(600)
    assert state.scores.shape == (1, VOCAB)  # 512 unwritten rows (96 MB) dropped, one kept
    assert cache.cache_size == (600 * 23_000 + VOCAB * 4 + 4096 * 4
                                + KEY_BYTES_PER_TOKEN * 600)


def test_it_keeps_every_row_when_the_model_keeps_all_logits(trims):
    cache = PromptCache(1 << 30, keep_scores=True)
    cache[(1, 2, 3)] = state = fake_state(3)
    assert state.scores.shape == (3, VOCAB)
    assert cache.cache_size == PromptCache.state_bytes((1, 2, 3), state)


def test_it_stays_within_its_capacity_and_trims_after_evicting(trims):
    cache = PromptCache(100 * 2**20)
    for run in range(40):  # 40 prompts of 300 to 2,250 tokens: ~1.1 GB of states
        tokens = 300 + 50 * run
        cache[tuple([run] * tokens)] = fake_state(tokens)
        assert cache.cache_size <= cache.capacity_bytes
        assert cache.cache_size == sum(PromptCache.state_bytes(k, s)
                                       for k, s in cache.cache_state.items())
    assert cache.evictions == 40 - len(cache.cache_state) > 0
    assert len(trims) == cache.trims > 0
    assert len(trims) <= cache.evictions  # once per store that evicted, not per request


def test_a_prompt_gets_the_state_sharing_its_longest_prefix(trims):
    cache = PromptCache(1 << 30)
    cache[(1, 2, 3, 9)] = short = fake_state(4)
    cache[(1, 2, 3, 4, 5, 9)] = long = fake_state(6)
    cache[(7, 8)] = fake_state(2)
    assert cache[(1, 2, 3, 4, 5, 6, 7)] is long
    assert cache[(1, 2, 3, 8)] is short
    assert (5, 5) not in cache
    with pytest.raises(KeyError):
        cache[(5, 5)]
    assert list(cache.cache_state)[-1] == (1, 2, 3, 9)  # the last one read is the newest
    cache[(1, 2, 3, 9)] = fake_state(4)  # the same prompt again replaces its entry
    assert len(cache.cache_state) == 3
    assert cache.cache_size == sum(PromptCache.state_bytes(k, s)
                                   for k, s in cache.cache_state.items())


def test_the_handler_installs_it_once_with_the_configured_capacity(monkeypatch):
    monkeypatch.setenv(embedded_server.PROMPT_CACHE_ENV, str(5 << 20))
    llama = SimpleNamespace(cache=None, _logits_all=False)
    llama.set_cache = lambda c: setattr(llama, "cache", c)
    install_cache(llama)
    first = llama.cache
    install_cache(llama)
    assert isinstance(first, PromptCache) and llama.cache is first
    assert first.capacity_bytes == 5 << 20 and not first.keep_scores


def test_malloc_trim_is_called_through_glibc():
    assert embedded_server.release_memory() in (0, 1)  # 1 on glibc, 0 elsewhere


@pytest.mark.embedded
def test_a_real_state_is_counted_and_its_slimmed_copy_continues_the_prompt():
    llama_cpp = pytest.importorskip("llama_cpp")
    from agentlab.llm.local_server import find_model_path

    llama = llama_cpp.Llama(model_path=str(find_model_path()), n_ctx=1024, n_threads=2,
                            logits_all=False, verbose=False)
    try:
        prompt = llama.tokenize(b"The capital of France is Paris. " * 20)
        llama.eval(prompt)
        state = llama.save_state()
        full = int(state.llama_state_size) + state.scores.nbytes + state.input_ids.nbytes
        assert state.scores.nbytes > 20 * state.llama_state_size / 100  # what upstream missed
        cache = PromptCache(1 << 30, keep_scores=False)
        cache[prompt] = state
        assert cache.cache_size == (len(state.llama_state) + VOCAB * 4
                                    + state.input_ids.nbytes + KEY_BYTES_PER_TOKEN * len(prompt))
        assert cache.cache_size < full
        expected = llama.create_completion(prompt, max_tokens=6, temperature=0.0)
        llama.reset()
        llama.eval(llama.tokenize(b"Something else entirely."))
        llama.load_state(cache[prompt])
        again = llama.create_completion(prompt, max_tokens=6, temperature=0.0)
        assert again["choices"][0]["text"] == expected["choices"][0]["text"]
    finally:
        llama.close()


def test_the_server_is_started_with_our_cache_and_the_last_logits_only(tmp_path, monkeypatch):
    from agentlab.llm import local_server

    seen = {}

    class Started(Exception):
        pass

    def popen(cmd, **kwargs):
        seen.update(cmd=cmd, env=kwargs["env"])
        raise Started

    monkeypatch.setattr(local_server.subprocess, "Popen", popen)
    server = local_server.LocalModelServer(port=0, log_path=tmp_path / "log",
                                           write_state=False, warm=False)
    with pytest.raises(Started):
        server.start()
    cmd = seen["cmd"]
    assert cmd[cmd.index("--logits_all") + 1] == "False"
    assert "--cache" not in cmd  # the server's LlamaRAMCache miscounts (issue 38)
    assert seen["env"][embedded_server.PROMPT_CACHE_ENV] == str(1 << 30)
