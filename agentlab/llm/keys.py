"""Which environment variables a model profile may read its API key from (pure).

A profile names a variable and the client sends its value, as a bearer token, to the profile's
endpoint. So the name must look like a key (`…_API_KEY`, `…_TOKEN`, `…_KEY`) and must not be one
the server runs on: its secret key, its database or Redis URL, anything the settings read. The
admin refuses such a name, and the client refuses it again at run time (a snapshot may come
from elsewhere).
"""

from __future__ import annotations

import re

KEY_NAME = re.compile(r"^[A-Z][A-Z0-9_]*_(?:API_KEY|TOKEN|KEY)$")
# What agentlab/settings.py reads (tests/test_keys.py keeps this list complete), and what the
# server's own tooling runs on.
SERVER_VARIABLES = frozenset({
    "SECRET_KEY", "DEBUG", "ALLOWED_HOSTS", "CSRF_TRUSTED_ORIGINS", "DATABASE_URL", "REDIS_URL",
    "EMAIL_BACKEND", "DEFAULT_FROM_EMAIL", "LOG_LEVEL", "AGENTLAB_VAR_DIR",
    "AGENTLAB_LOCAL_LLM_URL", "AGENTLAB_LOCAL_LLM_PORT", "AGENTLAB_COMPUTE_SLOTS",
    "AGENTLAB_MAX_MESSAGE_CHARS", "AGENTLAB_MAX_FRAME_CHARS", "AGENTLAB_MAX_ACTIVE_RUNS",
    "AGENTLAB_APPROVAL_TTL_S", "AGENTLAB_SOCKET_OUTBOX", "AGENTLAB_BACKFILL_PAGE",
    "AGENTLAB_EMBEDDED_MODEL_CONCURRENCY", "AGENTLAB_MODEL_CONCURRENCY",
    "AGENTLAB_ENV", "SECURE_SSL_REDIRECT", "SECURE_HSTS_SECONDS", "SECURE_HSTS_INCLUDE_SUBDOMAINS",
    "SECURE_HSTS_PRELOAD", "AGENTLAB_OTEL_PROJECT", "AGENTLAB_INSTALLATION_ID",
    "OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_SDK_DISABLED",
    "DJANGO_SETTINGS_MODULE", "DJANGO_SECRET_KEY",
    # runs on workers (docs/ARCHITECTURE.md "Runs on workers")
    "AGENTLAB_RUNS_ON", "AGENTLAB_TAKEOVER_S", "AGENTLAB_WORKER_GRACE_S", "AGENTLAB_WORKER_POOL",
    "AGENTLAB_DB_POOL",
    "AGENTLAB_CONTROL_REPLY_S",
})
# OTEL_*: the exporter's endpoint and headers (a collector's auth token) are the server's own.
SERVER_PREFIXES = ("DJANGO_", "OTEL_")


def key_variable_problem(name: str) -> str | None:
    """Why `name` may not hold a profile's API key, or None when it may ("" = no key)."""
    if not name:
        return None
    if name in SERVER_VARIABLES or name.startswith(SERVER_PREFIXES):
        return (f"{name} is a variable the server itself runs on; a model profile may not send "
                "it to an endpoint")
    if not KEY_NAME.match(name):
        return (f"{name!r} does not look like the name of an API key: use upper case, ending in "
                "_API_KEY, _TOKEN or _KEY (e.g. OPENAI_API_KEY)")
    return None
