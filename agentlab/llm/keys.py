"""Which environment variables a model profile may read its API key from (pure).

A profile names a variable and the client sends its value, as a bearer token, to the profile's
endpoint (an MCP server's header variable likewise, to the server's URL). So the name must look
like a key (`…_API_KEY`, `…_TOKEN`, `…_KEY`), must not be one the server runs on (its secret
key, its database or Redis URL, anything the settings read), and must be one the operator
allows: AGENTLAB_KEY_VARIABLES, a comma-separated list (default: DEFAULT_KEY_VARIABLES, the
common LLM providers' names), read when a name is checked. Any other `*_KEY` or `*_TOKEN` of the
server's environment (AWS_SECRET_ACCESS_KEY, GITHUB_TOKEN…) is never sent. The admin refuses
such a name, and the client refuses it again at run time (a snapshot may come from elsewhere).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping

KEY_NAME = re.compile(r"^[A-Z][A-Z0-9_]*_(?:API_KEY|TOKEN|KEY)$")
# What agentlab/settings.py reads (tests/test_keys.py keeps this list complete), and what the
# server's own tooling runs on.
SERVER_VARIABLES = frozenset({
    "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "DATABASE_URL", "REDIS_URL",
    "EMAIL_BACKEND", "DEFAULT_FROM_EMAIL", "LOG_LEVEL", "AGENTLAB_VAR_DIR",
    "AGENTLAB_LOCAL_LLM_URL", "AGENTLAB_LOCAL_LLM_PORT", "AGENTLAB_COMPUTE_SLOTS",
    "AGENTLAB_MAX_MESSAGE_CHARS", "AGENTLAB_MAX_FRAME_CHARS", "AGENTLAB_MAX_ACTIVE_RUNS",
    "AGENTLAB_APPROVAL_TTL_S", "AGENTLAB_SOCKET_OUTBOX", "AGENTLAB_BACKFILL_PAGE",
    "AGENTLAB_MAX_TOKENS", "AGENTLAB_FEEDBACK_NOTE_CHARS", "AGENTLAB_FEEDBACK_LABEL_CHARS",
    "AGENTLAB_REVIEW_SYNC_S",
    "AGENTLAB_LIVE_SCORING_EVERY_S",
    "AGENTLAB_ANNOTATIONS_URL",
    "AGENTLAB_EMBEDDED_MODEL_CONCURRENCY", "AGENTLAB_MODEL_CONCURRENCY",
    "AGENTLAB_ENV", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS", "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD", "AGENTLAB_OTEL_PROJECT", "AGENTLAB_INSTALLATION_ID",
    "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED",
    "DJANGO_SETTINGS_MODULE", "DJANGO_SECRET_KEY",
    # runs on workers (docs/ARCHITECTURE.md "Runs on workers")
    "AGENTLAB_RUNS_ON", "AGENTLAB_TAKEOVER_S", "AGENTLAB_WORKER_GRACE_S", "AGENTLAB_WORKER_POOL",
    "AGENTLAB_DB_POOL",
    "AGENTLAB_CONTROL_REPLY_S", "AGENTLAB_KEY_VARIABLES", "AGENTLAB_WORKER_STALL_S",
    # what one import may hold (docs/SECURITY.md)
    "AGENTLAB_OTLP_MAX_ATTRIBUTES", "AGENTLAB_OTLP_MAX_EVENTS", "AGENTLAB_OTLP_MAX_LINKS",
    "AGENTLAB_OTLP_MAX_VALUES", "AGENTLAB_OTLP_MAX_ITEMS", "AGENTLAB_IMPORT_MAX_DEPTH",
    "AGENTLAB_IMPORT_STREAM_FROM_BYTES", "AGENTLAB_IMPORT_MAX_FILE_BYTES",
    "AGENTLAB_IMPORT_MAX_SPANS",
    # the OTLP receiver (docs/INTEROP.md "Receiving traces live")
    "AGENTLAB_RECEIVER_MAX_BODY_BYTES", "AGENTLAB_RECEIVER_MAX_INFLATED_BYTES",
    "AGENTLAB_RECEIVER_CHUNK_SPANS",
    "AGENTLAB_RECEIVER_SPANS_PER_S", "AGENTLAB_RECEIVER_BURST_SPANS",
    "AGENTLAB_RECEIVER_MAX_IN_FLIGHT", "AGENTLAB_RECEIVER_MAX_DECODING",
    "AGENTLAB_RECEIVER_QUIET_S", "AGENTLAB_RECEIVER_MAX_SPANS_PER_RUN",
    "AGENTLAB_RECEIVER_MAX_OPEN_TRACES", "AGENTLAB_RECEIVER_MAX_TRACES_PER_REQUEST",
    "AGENTLAB_RECEIVER_MAX_VALUE_CHARS",
    # the gateway (docs/GATEWAY.md)
    "AGENTLAB_GATEWAY_MAX_BODY_BYTES", "AGENTLAB_GATEWAY_REQUESTS_PER_MIN",
    "AGENTLAB_GATEWAY_MAX_IN_FLIGHT", "AGENTLAB_GATEWAY_MAX_HELD", "AGENTLAB_GATEWAY_HOLD_S",
    "AGENTLAB_GATEWAY_IDLE_S", "AGENTLAB_GATEWAY_MAX_SESSIONS",
    # manage.py attach's (a gateway token in the shell that may also start the server)
    "AGENTLAB_SERVER", "AGENTLAB_TOKEN",
})
# OTEL_*: the exporter's endpoint and headers (a collector's auth token) are the server's own.
SERVER_PREFIXES = ("DJANGO_", "OTEL_")


# The operator's allow-list (docs/ARCHITECTURE.md "Settings"), and its default.
KEY_VARIABLES_SETTING = "AGENTLAB_KEY_VARIABLES"
DEFAULT_KEY_VARIABLES = (
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "MISTRAL_API_KEY",
    "GROQ_API_KEY", "TOGETHER_API_KEY", "FIREWORKS_API_KEY", "DEEPSEEK_API_KEY",
    "OPENROUTER_API_KEY", "XAI_API_KEY", "COHERE_API_KEY", "HF_TOKEN",
)


def allowed_key_variables(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The variables the operator lets a profile or an MCP header name (AGENTLAB_KEY_VARIABLES,
    comma-separated; unset: DEFAULT_KEY_VARIABLES; set but empty: none)."""
    raw = (os.environ if environ is None else environ).get(KEY_VARIABLES_SETTING)
    if raw is None:
        return frozenset(DEFAULT_KEY_VARIABLES)
    return frozenset(item.strip() for item in raw.split(",") if item.strip())


def key_variable_problem(name: str, allowed: frozenset[str] | None = None) -> str | None:
    """Why `name` may not hold a profile's API key, or None when it may ("" = no key).
    `allowed`: the allow-list (None: the operator's, read now)."""
    if not name:
        return None
    if name in SERVER_VARIABLES or name.startswith(SERVER_PREFIXES):
        return (f"{name} is a variable the server itself runs on; a model profile may not send "
                "it to an endpoint")
    if not KEY_NAME.match(name):
        return (f"{name!r} does not look like the name of an API key: use upper case, ending in "
                "_API_KEY, _TOKEN or _KEY (e.g. OPENAI_API_KEY)")
    allowed = allowed_key_variables() if allowed is None else allowed
    if name not in allowed:
        return (f"{name} is not one of the variables the operator allows a key to be read from "
                f"({KEY_VARIABLES_SETTING}: {', '.join(sorted(allowed)) or 'none'})")
    return None
