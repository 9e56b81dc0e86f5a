"""search over the fictional knowledge base: each hop of every chain ranks its entry first."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentlab.tools.executor import ToolExecutor
from agentlab.tools.registry import builtin_tools

DATA = Path(__file__).resolve().parent.parent / "agentlab" / "tools" / "data"
ENTRIES = {row["title"]: row["text"] for row in map(
    json.loads, (DATA / "knowledge_base.jsonl").read_text(encoding="utf-8").splitlines())}
QUESTIONS = json.loads((DATA / "knowledge_questions.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def ex() -> ToolExecutor:
    return ToolExecutor(builtin_tools())


async def search(ex: ToolExecutor, query: str, k: int = 3):
    result = await ex.run("search", {"query": query, "k": k})
    assert result.ok, result.observation
    return json.loads(result.output) if result.output.startswith("[") else result.output


def test_dataset_is_large_and_consistent():
    assert len(ENTRIES) >= 55
    assert len(QUESTIONS) >= 8
    assert any(len(q["hops"]) >= 3 for q in QUESTIONS)
    for q in QUESTIONS:
        hops = q["hops"]
        assert all(h in ENTRIES for h in hops), q
        for here, there in zip(hops, hops[1:], strict=False):
            assert there in ENTRIES[here], f"{here!r} does not lead to {there!r}"
        assert q["answer"] in ENTRIES[hops[-1]], q


@pytest.mark.parametrize("q", QUESTIONS, ids=[q["question"][:50] for q in QUESTIONS])
async def test_each_hop_ranks_its_entry_first(ex, q):
    for title in q["hops"]:
        hits = await search(ex, title)
        assert hits[0]["title"] == title, (title, [h["title"] for h in hits])


async def test_zephyr_chain_by_natural_questions(ex):
    assert (await search(ex, "Zephyr X2 drone maker"))[0]["title"] == "Zephyr X2"
    assert (await search(ex, "who founded Altavia Robotics"))[0]["title"] == "Altavia Robotics"
    hit = (await search(ex, "Mira Okonkwo born"))[0]
    assert hit["title"] == "Mira Okonkwo" and "Port Ellery" in hit["snippet"]


async def test_result_shape_and_k(ex):
    hits = await search(ex, "Port Ellery", k=5)
    assert 1 < len(hits) <= 5
    assert set(hits[0]) == {"title", "snippet", "score"}
    scores = [h["score"] for h in hits]
    assert scores == sorted(scores, reverse=True)
    assert len(await search(ex, "Port Ellery", k=1)) == 1


@pytest.mark.parametrize("query", ['"AND (', "NEAR(a b) OR", "title:*", "a' OR 1=1 --",
                                   "^^^ -- ))", "Zephyr AND NOT"])
async def test_fts_syntax_in_user_input_never_errors(ex, query):
    result = await ex.run("search", {"query": query})
    assert result.ok or "no words" in result.observation, result.observation
    assert "syntax" not in result.observation.lower()


async def test_no_hits_is_a_helpful_message(ex):
    text = await search(ex, "xylophonist quasar")
    assert isinstance(text, str) and "No results" in text
