"""Real agents of real frameworks (tests/framework_agents/), run in the frameworks virtualenv
(requirements-frameworks.txt, made by scripts/test) against the scripted OpenAI-compatible
server, exporting with the SDK's own OTLP/HTTP exporter. Used by tests/test_frameworks.py;
`python -m tests.framework_runs` writes their captures to tests/otel_captures/ again.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from tests.fake_openai import FakeOpenAI, Reply

ROOT = Path(__file__).parent.parent
AGENTS = Path(__file__).parent / "framework_agents"
CAPTURES = Path(__file__).parent / "otel_captures"
REQUIREMENTS = ROOT / "requirements-frameworks.txt"
QUESTION = "What is the weather in Paris?"
WEATHER = ("sunny, 21 °C", "rain, 12 °C")  # run a, run b: one tool result changed
ARGUMENTS = '{"city": "Paris"}'
# The GenAI instrumentation puts message content on spans only in its latest conventions.
GENAI_CONTENT = {"OTEL_SEMCONV_STABILITY_OPT_IN": "gen_ai_latest_experimental",
                 "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_only"}


def answer(weather: str) -> str:
    return f"In Paris it is {weather}."


@dataclass(frozen=True)
class Framework:
    """One agent script and how its model is scripted: a tool call, then the answer."""

    name: str
    script: str
    env: dict[str, str] = field(default_factory=dict)
    final_tool: str | None = None  # smolagents answers through its final_answer tool

    def replies(self, weather: str) -> list[Reply]:
        final = (Reply(tool_calls=[(self.final_tool, json.dumps({"answer": answer(weather)}))],
                       usage=(60, 9)) if self.final_tool
                 else Reply(text=answer(weather), usage=(60, 9)))
        return [Reply(tool_calls=[("get_weather", ARGUMENTS)], usage=(40, 12)), final]


FRAMEWORKS = {f.name: f for f in [
    Framework("openai", "openai_sdk.py"),
    Framework("langgraph", "langgraph_agent.py"),
    Framework("smolagents", "smolagents_agent.py", final_tool="final_answer"),
    Framework("openai-agents", "openai_agents_agent.py"),
    Framework("llamaindex", "llamaindex_agent.py"),
    Framework("genai", "genai_agent.py", env=GENAI_CONTENT),
    Framework("genai-no-content", "genai_agent.py"),
]}


def default_python() -> Path:
    """Where scripts/lib.sh frameworks_venv puts the virtualenv (named by the pins' hash)."""
    tag = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:10]
    cache = Path(os.environ.get("AGENTLAB_FRAMEWORKS_CACHE", Path.home() / ".cache" / "agentlab"))
    return cache / f"frameworks-{tag}" / "bin" / "python"


def frameworks_python() -> Path | None:
    """AGENTLAB_FRAMEWORKS_PYTHON (which must exist), else the cached virtualenv, else None."""
    if explicit := os.environ.get("AGENTLAB_FRAMEWORKS_PYTHON"):
        assert Path(explicit).exists(), f"AGENTLAB_FRAMEWORKS_PYTHON={explicit} does not exist"
        return Path(explicit)
    python = default_python()
    return python if python.exists() and (python.parent.parent / ".complete").exists() else None


def run_agent(python: Path, framework: Framework, server: FakeOpenAI, export: dict[str, str],
              *, weather: str = WEATHER[0]) -> str:
    """Run `framework`'s agent once on QUESTION with its model scripted; its printed answer.
    `export` is the OTEL_EXPORTER_OTLP_* (and project) environment it sends its spans with."""
    server.reset()
    server.script(*framework.replies(weather))
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OTEL_", "OPENAI_", "DJANGO_", "AGENTLAB_"))}
    env |= {"OPENAI_BASE_URL": server.base_url, "OPENAI_API_KEY": "sk-scripted",
            "WEATHER": weather,
            "OTEL_BSP_SCHEDULE_DELAY": "100", "PYTHONUNBUFFERED": "1",
            "OTEL_SERVICE_NAME": f"weather-{framework.name}", **framework.env, **export}
    done = subprocess.run([str(python), str(AGENTS / framework.script), QUESTION], env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{framework.name} agent failed:\n{done.stderr[-4000:]}"
    return done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""


def otlp_json(requests: Iterable[ExportTraceServiceRequest]) -> dict[str, Any]:
    """The exports as one OTLP/JSON document, as a collector's file exporter writes it (hex
    ids, lowerCamelCase names)."""
    merged = ExportTraceServiceRequest()
    for request in requests:
        merged.resource_spans.extend(request.resource_spans)
    return _hex_ids(json_format.MessageToDict(merged))


def _hex_ids(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: base64.b64decode(v).hex()
                if k in ("traceId", "spanId", "parentSpanId") and isinstance(v, str)
                else _hex_ids(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_hex_ids(v) for v in value]
    return value


def write_captures(python: Path, names: Iterable[str]) -> None:
    """Each framework's run a (and b: the tool says WEATHER[1]) to tests/otel_captures/."""
    from tests.otlp_receiver import OTLPReceiver

    CAPTURES.mkdir(exist_ok=True)
    with FakeOpenAI() as server:
        for name in names:
            framework = FRAMEWORKS[name]
            runs = [("", WEATHER[0])] + ([] if name == "genai-no-content" else [("-b", WEATHER[1])])
            for suffix, weather in runs:
                with OTLPReceiver() as receiver:
                    said = run_agent(python, framework, server,
                                     {"OTEL_EXPORTER_OTLP_ENDPOINT": receiver.url}, weather=weather)
                    doc = otlp_json(receiver.requests)
                path = CAPTURES / f"{name}{suffix}.json"
                path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
                count = sum(len(s["spans"]) for r in doc["resourceSpans"] for s in r["scopeSpans"])
                print(f"{path.relative_to(ROOT)}: {count} spans; the agent said {said!r}")


if __name__ == "__main__":
    found = frameworks_python()
    assert found, "no frameworks virtualenv: run scripts/test, or set AGENTLAB_FRAMEWORKS_PYTHON"
    write_captures(found, sys.argv[1:] or FRAMEWORKS)
