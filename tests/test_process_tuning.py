"""The web process's tuning (agentlab/process_tuning.py): daphne reads each request's
Content-Type as before, and what the process makes after start-up is still collected."""

from __future__ import annotations

import gc
import weakref

from twisted.web import http

import agentlab.asgi  # noqa: F401 - the web application, loaded as daphne loads it
from agentlab.process_tuning import tune_web_process

TYPES = [b"application/json", b"application/json; charset=utf-8", b"APPLICATION/JSON",
         b"application/x-www-form-urlencoded", b"multipart/form-data; boundary=----x",
         b"text/plain;charset=latin-1", b"not a type", b"", b"\xff\xfe/\x00"]


def test_daphne_reads_every_content_type_as_twisted_does() -> None:
    parse = http._parseContentType
    assert hasattr(parse, "cache_info"), "the web application leaves Twisted's parse uncached"
    original = parse.__wrapped__
    for value in TYPES * 2:  # the second time from the cache
        assert parse(value) == original(value), value
    assert parse.cache_info().hits >= len(TYPES)


class Node:
    pass


def test_what_is_loaded_is_out_of_the_collectors_walk_and_later_objects_are_not() -> None:
    loaded = Node()
    tune_web_process()  # again: idempotent
    assert not any(o is loaded for o in gc.get_objects())  # frozen: never walked again

    a, b = Node(), Node()
    a.other, b.other = b, a  # a cycle: only the collector frees it
    gone = weakref.ref(a)
    del a, b
    gc.collect()
    assert gone() is None
