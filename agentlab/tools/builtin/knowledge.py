"""search: full-text search (SQLite FTS5, BM25) over a small fictional knowledge base whose
facts chain, for multi-hop questions (Self-Ask, ReWOO) that a model cannot answer from memory."""

from __future__ import annotations

import json
import re
import sqlite3
import threading
from functools import cache
from pathlib import Path
from typing import Annotated

from agentlab.tools.decorator import tool

DATA = Path(__file__).resolve().parent.parent / "data" / "knowledge_base.jsonl"
_WORD = re.compile(r"\w+", re.UNICODE)
_STOP = {"the", "a", "an", "of", "in", "is", "was", "who", "what", "where", "which", "when",
         "that", "and", "or", "to", "by", "for", "did", "does", "do", "how", "many", "its"}
_lock = threading.Lock()


@cache
def _index() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    conn.execute("CREATE VIRTUAL TABLE kb USING fts5(title, text, tokenize='unicode61')")
    with DATA.open(encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    conn.executemany("INSERT INTO kb (title, text) VALUES (?, ?)",
                     [(r["title"], r["text"]) for r in rows])
    return conn


def _match_expression(query: str) -> str:
    """User text -> an FTS5 expression of quoted terms (never a syntax error), OR-ed."""
    words = [w for w in _WORD.findall(query.lower()) if w not in _STOP] or \
        _WORD.findall(query.lower())
    return " OR ".join(f'"{w}"' for w in words)


@tool(category="knowledge")
def search(query: Annotated[str, "what to look up, e.g. Altavia Robotics founder"],
           k: Annotated[int, "how many results"] = 3) -> list | str:
    """Search the knowledge base (encyclopedia entries); returns the best entries first."""
    expression = _match_expression(query)
    if not expression:
        raise ValueError("the query has no words to search for")
    k = max(1, min(k, 10))
    with _lock:
        rows = _index().execute(
            "SELECT title, text, bm25(kb, 5.0, 1.0) AS score FROM kb WHERE kb MATCH ? "
            "ORDER BY score LIMIT ?", (expression, k + 10)).fetchall()
    if not rows:
        return f"No results for {query!r}. Try fewer or different words."
    words = " ".join(_WORD.findall(query.lower()))
    ranked = sorted(((-s + _title_bonus(t, words), t, text) for t, text, s in rows),
                    key=lambda r: -r[0])
    return [{"title": t, "snippet": text, "score": round(s, 3)} for s, t, text in ranked[:k]]


def _title_bonus(title: str, words: str) -> float:
    """Naming an entry's whole title beats naming part of a longer one ("Ostravel" vs
    "Ostravel Comets"); the longer of two named titles wins."""
    title_words = _WORD.findall(title.lower())
    return 2.0 * len(title_words) if f" {' '.join(title_words)} " in f" {words} " else 0.0
