"""Pieces of `manage.py bench_live` that run in their own processes
(python -m agentlab.bench.stack).

- `llm PORT_FILE CALLS [DELAY_S]`: an instant (or paced) OpenAI-compatible server on
  loopback. It plays a ReAct agent in function-calling mode: it asks for `calculator` until
  the conversation holds `tool_calls` results, then answers. Streamed (SSE) or not, as
  asked; usage is always reported.
- `prepare`: in a fresh state folder, migrate, then create a user with a session, a model profile
  on that server, one agent and queued runs; prints their ids and the session key as JSON.

Nothing here imports tests/: a management command must work in an installed copy.
"""

from __future__ import annotations

import json
import os
import random
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

BENCH_USER = "bench"
BENCH_AGENT = "Bench ReAct"


def tool_calls_for(steps: int) -> int:
    """ReAct steps = llm + (tool + llm) per call + final; so `steps` ≈ 2 * calls + 2."""
    return max(0, (steps - 2) // 2)


def _reply(body: dict[str, Any], calls: int) -> dict[str, Any]:
    done = sum(1 for m in body.get("messages", []) if m.get("role") == "tool")
    if done < calls and body.get("tools"):
        # A new expression each time: the same call again and again is a loop the runtime stops,
        # and no two runs share one (nothing rendered for one run is reused for another).
        args = json.dumps({"expression": f"{random.randint(2, 10**9)}*7+{done}"})
        return {"tool_calls": [{"id": f"call_{done}", "type": "function",
                                "function": {"name": "calculator", "arguments": args}}]}
    return {"content": "The answer is 42."}


def _chunks(reply: dict[str, Any], usage: dict[str, int], include_usage: bool) -> list[dict]:
    base = {"id": "bench", "object": "chat.completion.chunk", "created": int(time.time()),
            "model": "bench-model"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": ""})]
    if "content" in reply:
        text = reply["content"]
        out += [chunk({"content": text[i:i + 8]}) for i in range(0, len(text), 8)]
        out.append(chunk({}, "stop"))
    else:
        calls = [{"index": i, **c} for i, c in enumerate(reply["tool_calls"])]
        out += [chunk({"tool_calls": calls}), chunk({}, "tool_calls")]
    if include_usage:
        out.append({**base, "choices": [], "usage": usage})
    return out


def serve_llm(calls: int, port: int = 0, delay_s: float = 0.0) -> ThreadingHTTPServer:
    """Start the server in a daemon thread; returns it (its port: server_address[1]). It
    answers at once, or after `delay_s` (a paced model: runs that mostly wait, as real ones)."""
    usage = {"prompt_tokens": 20, "completion_tokens": 5, "total_tokens": 25}

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms ACK wait

        def log_message(self, *args: Any) -> None:
            pass

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802
            self._send(200, {"object": "list", "data": [{"id": "bench-model", "object": "model"}]})

        def do_POST(self) -> None:  # noqa: N802
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            reply = _reply(body, calls)
            if delay_s:
                time.sleep(delay_s)  # this request's thread only
            if not body.get("stream"):
                message = {"role": "assistant", "content": reply.get("content"),
                           **({"tool_calls": reply["tool_calls"]} if "tool_calls" in reply
                              else {})}
                finish = "tool_calls" if "tool_calls" in reply else "stop"
                self._send(200, {"id": "bench", "object": "chat.completion",
                                 "created": int(time.time()), "model": "bench-model",
                                 "choices": [{"index": 0, "message": message,
                                              "finish_reason": finish}], "usage": usage})
                return
            wants = bool((body.get("stream_options") or {}).get("include_usage"))
            data = b"".join(f"data: {json.dumps(c)}\n\n".encode()
                            for c in _chunks(reply, usage, wants))
            data += b"data: [DONE]\n\n"
            # The whole stream is ready at once, so it has a length and the connection stays
            # open for the next call, as with OpenAI, vLLM or llama.cpp (keep-alive).
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    class Server(ThreadingHTTPServer):
        request_queue_size = 1024  # 100 runs connect at once; the default backlog is 5
        daemon_threads = True

    httpd = Server(("127.0.0.1", port), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    return httpd


def prepare(llm_url: str, counts: list[int], steps: int) -> dict[str, Any]:
    """Fresh database objects for the bench (run inside the bench's own state folder)."""
    import django

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "agentlab.settings")
    django.setup()
    from importlib import import_module

    from django.conf import settings
    from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
    from django.contrib.auth.models import User
    from django.core.management import call_command

    from agentlab.models import Agent, ModelProfile, Tool
    from agentlab.runs.start import start_run

    call_command("migrate", verbosity=0, interactive=False)
    user = User.objects.create_user(BENCH_USER, password=None)
    session = import_module(settings.SESSION_ENGINE).SessionStore()
    session[SESSION_KEY] = str(user.pk)
    session[BACKEND_SESSION_KEY] = "django.contrib.auth.backends.ModelBackend"
    session[HASH_SESSION_KEY] = user.get_session_auth_hash()
    session.create()
    profile = ModelProfile.objects.create(name="Bench (instant)", base_url=llm_url,
                                          model="bench-model", retries=0, timeout_s=30)
    iterations = min(100, tool_calls_for(steps) + 1)
    agent = Agent(name=BENCH_AGENT, paradigm="react", model_profile=profile,
                  params={"mode": "function_calling", "max_iterations": iterations},
                  max_steps=steps + 10, max_llm_calls=iterations + 1, total_timeout_s=600)
    agent.full_clean()
    agent.save()
    agent.tools.set(Tool.objects.filter(name="calculator"))
    runs = [[start_run(user, agent, "What is 6*7?", places=0).pk for _ in range(n)]
            for n in counts]
    return {"session_cookie": settings.SESSION_COOKIE_NAME, "session": session.session_key,
            "runs": runs}


def main(argv: list[str]) -> None:
    if argv[:1] == ["llm"]:
        httpd = serve_llm(int(argv[2]), delay_s=float(argv[3]) if len(argv) > 3 else 0.0)
        with open(argv[1], "w") as f:  # the parent waits for this file: the port is open
            f.write(str(httpd.server_address[1]))
        threading.Event().wait()
    elif argv[:1] == ["prepare"]:
        counts = [int(n) for n in argv[2].split(",")]
        print(json.dumps(prepare(argv[1], counts, int(argv[3]))))
    else:
        sys.exit("usage: python -m agentlab.bench.stack llm PORT_FILE CALLS [DELAY_S] | "
                 "prepare LLM_URL COUNTS STEPS")


if __name__ == "__main__":
    main(sys.argv[1:])
