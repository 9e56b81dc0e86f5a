"""What a long-running process (web or worker) tunes in the runtime and libraries it runs on.

- **The cyclic garbage collector.** A web process holds ~190,000 objects the collector
  tracks once Django, the apps and their first requests are loaded, and every full
  (generation 2) collection walked them all: 24–136 ms each on this machine, every agent
  call in flight stalled behind it (`manage.py bench_gateway`: most of the 50-client p99).
  What is loaded at start-up lives as long as the process, so it is moved out of the
  collector's sight once (`gc.freeze`, as the Python docs advise for such objects); later
  objects are collected as before, and frozen ones are still freed when their last
  reference goes (reference counting is untouched).
- **Twisted's Content-Type parse.** Daphne's HTTP server parses the Content-Type of every
  POST with the email package (`twisted.web.http._parseContentType`), to find form bodies
  it would decode into `request.args` — which daphne never reads (Django parses its own
  forms): ~0.17 ms of CPU a request here, a fifth of daphne's own cost per request, for the
  same one or two values an agent's client sends on every call. The same function, its
  answers kept for the last few distinct values (what it returns for a value never changes).
- **The TLS trust store.** Loading it takes 30–170 ms of CPU here; the model clients share the
  process's one context (agentlab.llm.wire.ssl_context), loaded at start-up rather than on the
  event loop under the first model call.
"""

from __future__ import annotations

import functools
import gc

from agentlab.llm.wire import ssl_context

CACHED_TYPES = 64  # distinct Content-Type values remembered (each a short bytes key)


def tune_web_process() -> None:
    """Call once the application is loaded (agentlab/asgi.py). Idempotent."""
    cache_content_type_parsing()
    tune_worker_process()


def tune_worker_process() -> None:
    """What a process that runs agents needs (`manage.py worker`, and the web process)."""
    ssl_context()
    freeze_loaded_objects()


def freeze_loaded_objects() -> None:
    """What is loaded by now (Django, the apps, their modules) is out of every later
    collection's walk; a worker calls it before it takes runs (`manage.py worker`)."""
    gc.freeze()


def cache_content_type_parsing() -> None:
    try:
        from twisted.web import http
    except ImportError:  # pragma: no cover - daphne requires Twisted
        return
    parse = http._parseContentType
    if not hasattr(parse, "cache_info"):
        http._parseContentType = functools.lru_cache(maxsize=CACHED_TYPES)(parse)
