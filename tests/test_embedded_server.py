"""The embedded server we start (agentlab/llm/embedded_server.py), for real on loopback: the
prompt it tokenizes is what was sent, and it dies with the process that started it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agentlab.llm.client import OpenAIChatModel
from agentlab.llm.embedded_server import PROMPT_LOG_ENV
from agentlab.llm.local_server import LocalModelServer
from agentlab.llm.types import ProfileConfig
from traces.owners import pid_alive

pytestmark = pytest.mark.embedded

HOSTILE = """say "hi" & it's <b>x</b>"""
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}
ROOT = Path(__file__).resolve().parents[1]


async def test_the_prompt_the_server_tokenizes_is_what_was_sent(tmp_path, monkeypatch):
    log = tmp_path / "prompts.jsonl"
    monkeypatch.setenv(PROMPT_LOG_ENV, str(log))
    server = LocalModelServer(port=0, log_path=tmp_path / "server.log", write_state=False,
                              warm=False)
    url = server.start(timeout_s=180)
    try:
        model = OpenAIChatModel(ProfileConfig(name="Local SmolLM2", base_url=url, model="",
                                              temperature=0.0, max_tokens=8, retries=0))
        messages = [
            {"role": "system", "content": f"system {HOSTILE}"},
            {"role": "user", "content": f"user {HOSTILE}"},
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": "c1", "type": "function",
                "function": {"name": "get_weather", "arguments": json.dumps({"city": HOSTILE})}}]},
            {"role": "tool", "tool_call_id": "c1", "content": f"result {HOSTILE}"},
            {"role": "assistant", "content": f"assistant {HOSTILE}"},
            {"role": "user", "content": "again"},
        ]
        await model.chat(messages, tools=[WEATHER])  # a tool turn
        await model.chat(messages, on_token=lambda d: None)  # a chat turn, streamed
    finally:
        server.stop()
    prompts = [json.loads(line) for line in log.read_text().splitlines()]
    assert [p["kind"] for p in prompts] == ["tools", "chat"]
    for prompt in (p["prompt"] for p in prompts):
        for prefix in ("system ", "user ", "result ", "assistant "):
            assert prefix + HOSTILE in prompt, prompt
        assert json.dumps(HOSTILE) in prompt  # the tool call's argument
        for entity in ("&#34;", "&#39;", "&lt;", "&gt;", "&amp;"):
            assert entity not in prompt


def test_a_server_dies_with_the_parent_killed_by_sigkill(tmp_path):
    script = (f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
              "from agentlab.llm.local_server import LocalModelServer\n"
              "s = LocalModelServer(port=0, write_state=False, warm=False,"
              f" log_path=__import__('pathlib').Path({str(tmp_path / 'server.log')!r}))\n"
              "s.start(timeout_s=180)\nprint(s.process.pid, flush=True)\n"
              "import time; time.sleep(600)\n")
    env = {**os.environ, "AGENTLAB_VAR_DIR": str(tmp_path)}
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              text=True, env=env)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert pid_alive(child)
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
        deadline = time.monotonic() + 15
        while pid_alive(child) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not pid_alive(child), "the model server outlived its parent"
    finally:
        parent.kill()
