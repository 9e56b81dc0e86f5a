"""Django settings: all from the environment, with safe defaults (docs/ARCHITECTURE.md)."""

from __future__ import annotations

import os
from typing import Any

import dj_database_url
from django.utils.csp import CSP

from agentlab.paths import REPO_ROOT, var_dir
from agentlab.secrets import load_secret_key


def env_bool(name: str, default: bool = False) -> bool:
    return os.environ.get(name, str(default)).strip().lower() in {"1", "true", "yes", "on"}


def env_list(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, default).split(",") if item.strip()]


BASE_DIR = REPO_ROOT
VAR_DIR = var_dir()

SECRET_KEY = load_secret_key(VAR_DIR)
DEBUG = env_bool("DEBUG")
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "daphne",  # before staticfiles, so `runserver` is daphne's
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "django_htmx",
    "agentlab",
    "agentlab.chat",
    "agentlab.compare",
    "agentlab.evals",
    "agentlab.tokens",
    "agentlab.receiver",
    "agentlab.gateway",
    "agentlab.feedback",
    "agentlab.review",
    "agentlab.monitors",
    "traces",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django.middleware.csp.ContentSecurityPolicyMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
]

# Every page passes this policy: scripts only from our own static files (no inline script, no
# eval), sockets and requests to this origin only. Inline style attributes are allowed (step
# depth, waterfall bars, chart sizes are CSS variables set per element).
SECURE_CSP = {
    "default-src": [CSP.SELF],
    "script-src": [CSP.SELF],
    "style-src": [CSP.SELF, CSP.UNSAFE_INLINE],
    "img-src": [CSP.SELF, "data:"],
    "connect-src": [CSP.SELF],
    "object-src": [CSP.NONE],
    "base-uri": [CSP.SELF],
    "form-action": [CSP.SELF],
    "frame-ancestors": [CSP.NONE],
}

ROOT_URLCONF = "agentlab.urls"
ASGI_APPLICATION = "agentlab.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.environ.get("DATABASE_URL") or f"sqlite:///{VAR_DIR / 'agentlab.sqlite3'}",
        conn_max_age=0,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the trace viewer read while a run writes; IMMEDIATE + a busy timeout avoid
    # "database is locked" when several runs record steps at once.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    # A file, not pytest-django's default in-memory database, so that a live server process
    # (the browser tests' daphne) sees what the tests write.
    DATABASES["default"]["TEST"] = {"NAME": str(VAR_DIR / "test_agentlab.sqlite3")}

def redis_channel_layer(url: str) -> dict[str, Any]:
    """The channels-redis layer on `url` (also what the tests' Redis fixtures install).

    Its pub/sub layer, not the core one: a group message is one PUBLISH, which Redis pushes to
    every process subscribed to the group, where the core layer reads the group's members (a
    sorted set), runs a Lua script per message and has each reader poll its channel
    (BZPOPMIN, and a clean-up script each time): 3.2 Redis commands a step became 0.75, and
    CPU and latency fell with them (`manage.py bench_live --profile scale`; the figures are in
    docs/ARCHITECTURE.md). No per-channel capacity either (the core layer dropped group sends
    past it, silently): each socket bounds its own queue (AGENTLAB_SOCKET_OUTBOX). Pub/sub
    keeps nothing for a process that does not listen yet, and nothing needs it to: a socket
    subscribes to its run's group when it is admitted and reads the steps it lacks from the
    database only when the browser's `sync` comes, a round trip later."""
    return {"BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            "CONFIG": {"hosts": [url]}}


if redis_url := os.environ.get("REDIS_URL"):
    CHANNEL_LAYERS = {"default": redis_channel_layer(redis_url)}
else:
    CHANNEL_LAYERS = {"default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}}

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# Mail that agents send (the send_email tool) is kept in the admin's outbox unless configured.
MAILERS = {"default": {"BACKEND": os.environ.get("EMAIL_BACKEND", "agentlab.mail.OutboxBackend")}}
DEFAULT_FROM_EMAIL = os.environ.get("DEFAULT_FROM_EMAIL", "agent-lab@localhost")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": os.environ.get("LOG_LEVEL", "WARNING")},
    "loggers": {"agentlab": {"level": os.environ.get("LOG_LEVEL", "INFO")}},
}


# -- Limits on what a user can send and start (docs/ARCHITECTURE.md "Settings") ---------------


def env_int(name: str, default: int) -> int:
    """A whole number from the environment; a value that is not one stops the server, by name."""
    raw = os.environ.get(name, "").strip()
    try:
        return int(raw) if raw else default
    except ValueError:
        raise ValueError(f"{name} must be a whole number, not {raw!r}") from None


# A chat message, a compare question or a one-off run's question (characters).
AGENTLAB_MAX_MESSAGE_CHARS = env_int("AGENTLAB_MAX_MESSAGE_CHARS", 20_000)
# One WebSocket frame from a browser (characters); daphne itself closes at 1 MiB.
AGENTLAB_MAX_FRAME_CHARS = env_int("AGENTLAB_MAX_FRAME_CHARS", 256 * 1024)
# Runs one user may have going at once (running, paused, or queued and claimed); 0: no limit.
AGENTLAB_MAX_ACTIVE_RUNS = env_int("AGENTLAB_MAX_ACTIVE_RUNS", 10)
# Access tokens one user may have that are not revoked; 0: no limit.
AGENTLAB_MAX_TOKENS = env_int("AGENTLAB_MAX_TOKENS", 20)
# Feedback (docs/FEEDBACK.md): the longest note, and the longest label (of a key's categories,
# an imported or a scorer's label), in characters.
AGENTLAB_FEEDBACK_NOTE_CHARS = env_int("AGENTLAB_FEEDBACK_NOTE_CHARS", 4_000)
AGENTLAB_FEEDBACK_LABEL_CHARS = env_int("AGENTLAB_FEEDBACK_LABEL_CHARS", 100)
# Review queues' rules (docs/REVIEW.md): every this many seconds a web process's thread adds
# the new runs that match them; 0: none (run `manage.py review_sync` instead).
AGENTLAB_REVIEW_SYNC_S = env_int("AGENTLAB_REVIEW_SYNC_S", 30)
# Live scorers (docs/FEEDBACK.md "Scorers on live traffic"): seconds between two passes of a
# process's scoring thread (a web process's with AGENTLAB_RUNS_ON=web, a worker's otherwise);
# 0: this process does not score.
AGENTLAB_LIVE_SCORING_EVERY_S = env_int("AGENTLAB_LIVE_SCORING_EVERY_S", 10)
# Seconds a tool call waits for approve or deny before it is denied and the run goes on.
AGENTLAB_APPROVAL_TTL_S = env_int("AGENTLAB_APPROVAL_TTL_S", 30 * 60)
# Events one run socket may have waiting to be sent; past it the socket is closed with 1013
# and the browser reconnects and re-syncs from the database (nothing is lost).
AGENTLAB_SOCKET_OUTBOX = env_int("AGENTLAB_SOCKET_OUTBOX", 2_000)
# Steps read from the database and sent per page of a sync's backfill.
AGENTLAB_BACKFILL_PAGE = env_int("AGENTLAB_BACKFILL_PAGE", 200)
# Requests one process sends to a model endpoint at once; the rest wait their turn in order,
# and the wait is not charged to a run's time limit (agentlab/llm/gate.py). The embedded model
# (llama.cpp) answers one at a time; 0: no limit.
AGENTLAB_EMBEDDED_MODEL_CONCURRENCY = env_int("AGENTLAB_EMBEDDED_MODEL_CONCURRENCY", 1)
AGENTLAB_MODEL_CONCURRENCY = env_int("AGENTLAB_MODEL_CONCURRENCY", 0)  # every other endpoint

# -- Where runs execute (docs/ARCHITECTURE.md "Runs on workers") ---------------------------------
# "web": asyncio tasks of the web process (the embedded default). "workers": procrastinate jobs
# run by `manage.py worker` processes; needs PostgreSQL (DATABASE_URL) and Redis (REDIS_URL).
AGENTLAB_RUNS_ON = os.environ.get("AGENTLAB_RUNS_ON", "web").strip().lower() or "web"
RUN_ENGINES = {"web": "agentlab.runs.engine.InProcess",
               "workers": "agentlab.workers.engine.WorkerEngine"}
if AGENTLAB_RUNS_ON not in RUN_ENGINES:
    raise ValueError(f'AGENTLAB_RUNS_ON must be "web" or "workers", not {AGENTLAB_RUNS_ON!r}')
# The class every start, control and state request of a run goes to (agentlab/runs/engine.py),
# by dotted path, as Channels names its layer.
AGENTLAB_RUN_ENGINE = RUN_ENGINES[AGENTLAB_RUNS_ON]
# How the lower layers ask the higher ones without importing them (traces/hooks.py).
AGENTLAB_HOOKS = {
    "paradigm_name": "agentlab.hooks.paradigm_name",
    "run_scores": "agentlab.hooks.run_scores",
    "sweep": "agentlab.hooks.sweep",
    "prepare_run": "agentlab.forks.record.prepare_for",
    "run_feedback": "agentlab.feedback.display.run_feedback",
    "step_feedback": "agentlab.feedback.display.step_feedback",
    "feedback_filter": "agentlab.feedback.filters.runs_with",
    "feedback_filter_choices": "agentlab.feedback.filters.suggestions",
    "bundle_sections": "agentlab.feedback.bundle.sections",
    "run_cases": "agentlab.evals.case_views.run_cases",
    "case_form": "agentlab.evals.case_views.form_options",
    "linked_runs": "agentlab.gateway.links.linked_runs",
    "phoenix_anchor": "agentlab.bench.phoenix_trace.anchor",
}
# A worker silent this long (no heartbeat, s) has its runs taken over by another worker.
AGENTLAB_TAKEOVER_S = env_int("AGENTLAB_TAKEOVER_S", 10)
# A worker whose event loop has not run for this long (s) stops, and its runs are taken over
# (its heartbeat, from a thread, keeps a shorter stall from looking like a dead worker); 0: never.
AGENTLAB_WORKER_STALL_S = env_int("AGENTLAB_WORKER_STALL_S", 120)
# SIGTERM: a worker takes no new run and finishes the ones it holds for at most this long (s).
AGENTLAB_WORKER_GRACE_S = env_int("AGENTLAB_WORKER_GRACE_S", 600)
# Database connections of a worker's job queue (its runs' steps use Django's own).
AGENTLAB_WORKER_POOL = env_int("AGENTLAB_WORKER_POOL", 4)
# Seconds a control (pause, cancel, approve…) waits for the worker holding the run to answer.
AGENTLAB_CONTROL_REPLY_S = env_int("AGENTLAB_CONTROL_REPLY_S", 5)
# PostgreSQL: a pool of at most this many connections per process (psycopg_pool, through
# Django's backend, as Django advises under ASGI); 0: a connection per use. Without it each
# database_sync_to_async call of a socket opened a connection and closed it, and PostgreSQL
# forked a backend for each: two thirds of its CPU per step (bench_live --calls, 100 runs:
# 0.25 connections and 2.4 ms a step; pooled, 0.8 ms).
AGENTLAB_DB_POOL = env_int("AGENTLAB_DB_POOL", 20)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql" and AGENTLAB_DB_POOL > 0:
    DATABASES["default"].setdefault("OPTIONS", {})["pool"] = {
        "min_size": 1, "max_size": AGENTLAB_DB_POOL, "timeout": 30}


# -- OpenTelemetry (docs/INTEROP.md) -----------------------------------------------------------
# The project every exported span names (openinference.project.name: Phoenix's project).
AGENTLAB_OTEL_PROJECT = os.environ.get("AGENTLAB_OTEL_PROJECT", "").strip() or "agentlab"
# Live export: on when an OTLP endpoint is set (the SDK's exporter reads these variables and
# OTEL_EXPORTER_OTLP_HEADERS itself); OTEL_SDK_DISABLED=true turns it off.
AGENTLAB_OTEL_LIVE = bool(os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
                          or os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT")) \
    and not env_bool("OTEL_SDK_DISABLED")
# Feedback as span annotations (agentlab/feedback/phoenix.py): Phoenix's base URL, where its REST
# API takes POST /v1/span_annotations. Unset: the OTLP endpoint's base while live export is on
# (Phoenix serves both on one port); "off": none sent.
AGENTLAB_ANNOTATIONS_URL = os.environ.get("AGENTLAB_ANNOTATIONS_URL", "").strip()
# What one OTLP upload may hold (counted before anything is built from it, traces/otel/decode.py):
# attributes of one span (or event, link, resource), events and links of one span, items of one
# array or kvlist value, and all of them together.
AGENTLAB_OTLP_MAX_ATTRIBUTES = env_int("AGENTLAB_OTLP_MAX_ATTRIBUTES", 10_000)
AGENTLAB_OTLP_MAX_EVENTS = env_int("AGENTLAB_OTLP_MAX_EVENTS", 10_000)
AGENTLAB_OTLP_MAX_LINKS = env_int("AGENTLAB_OTLP_MAX_LINKS", 1_000)
AGENTLAB_OTLP_MAX_VALUES = env_int("AGENTLAB_OTLP_MAX_VALUES", 10_000)
AGENTLAB_OTLP_MAX_ITEMS = env_int("AGENTLAB_OTLP_MAX_ITEMS", 5_000_000)
# Steps inside steps an imported run (bundle or OTLP) may have.
AGENTLAB_IMPORT_MAX_DEPTH = env_int("AGENTLAB_IMPORT_MAX_DEPTH", 1_000)
# A big OTLP file (traces/otel/streamed.py: JSON lines, one request a line, read a line at a
# time): from this size a JSON-lines file streams (smaller ones are read whole); its most bytes
# (checked before it is read) and its most spans (all its traces together; counted as it is
# read, before anything is written). AGENTLAB_OTLP_MAX_ITEMS then counts each line's items.
AGENTLAB_IMPORT_STREAM_FROM_BYTES = env_int("AGENTLAB_IMPORT_STREAM_FROM_BYTES", 16 * 1024 * 1024)
AGENTLAB_IMPORT_MAX_FILE_BYTES = env_int("AGENTLAB_IMPORT_MAX_FILE_BYTES", 32 * 1024**3)
AGENTLAB_IMPORT_MAX_SPANS = env_int("AGENTLAB_IMPORT_MAX_SPANS", 1_000_000)
# The OTLP/HTTP receiver (POST /v1/traces, agentlab/receiver/): a request's body as sent (the spec
# recommends 20 MiB) and once decompressed (64 MiB: the most the Python SDK's exporter sends),
# refused with 413 past either; inflating stops at the limit, so a gzip bomb costs no more.
AGENTLAB_RECEIVER_MAX_BODY_BYTES = env_int("AGENTLAB_RECEIVER_MAX_BODY_BYTES", 20 * 1024 * 1024)
AGENTLAB_RECEIVER_MAX_INFLATED_BYTES = env_int("AGENTLAB_RECEIVER_MAX_INFLATED_BYTES",
                                               64 * 1024 * 1024)
# Per sender, per process (agentlab/receiver/ratelimit.py): spans a second and the burst above
# it, then 429 with Retry-After; requests at once (429); 0: no limit.
AGENTLAB_RECEIVER_SPANS_PER_S = env_int("AGENTLAB_RECEIVER_SPANS_PER_S", 5_000)
AGENTLAB_RECEIVER_BURST_SPANS = env_int("AGENTLAB_RECEIVER_BURST_SPANS", 20_000)
AGENTLAB_RECEIVER_MAX_IN_FLIGHT = env_int("AGENTLAB_RECEIVER_MAX_IN_FLIGHT", 4)
# Bodies decoded at once in one process, off the event loop; past it 503 with Retry-After, so a
# flood never queues threads (one sender holds at most all but one of them); 0: no limit.
AGENTLAB_RECEIVER_MAX_DECODING = env_int("AGENTLAB_RECEIVER_MAX_DECODING", 2)
# A trace with no root span for this long after its last span ends as interrupted.
AGENTLAB_RECEIVER_QUIET_S = env_int("AGENTLAB_RECEIVER_QUIET_S", 300)
# Spans one received run may hold, and traces one user may have open (no root span yet).
AGENTLAB_RECEIVER_MAX_SPANS_PER_RUN = env_int("AGENTLAB_RECEIVER_MAX_SPANS_PER_RUN", 100_000)
AGENTLAB_RECEIVER_MAX_OPEN_TRACES = env_int("AGENTLAB_RECEIVER_MAX_OPEN_TRACES", 1_000)
# Traces one request may hold (as one upload); a text attribute's length, kept cut past it.
AGENTLAB_RECEIVER_MAX_TRACES_PER_REQUEST = env_int("AGENTLAB_RECEIVER_MAX_TRACES_PER_REQUEST",
                                                   1_000)
AGENTLAB_RECEIVER_MAX_VALUE_CHARS = env_int("AGENTLAB_RECEIVER_MAX_VALUE_CHARS", 1_000_000)
# Spans the receiver stores (and publishes) a transaction at a time: the first spans of a big
# request reach a watching page while the rest are stored (agentlab/receiver/chunks.py).
AGENTLAB_RECEIVER_CHUNK_SPANS = env_int("AGENTLAB_RECEIVER_CHUNK_SPANS", 128)

# The OpenAI-compatible gateway (/gateway/v1, agentlab/gateway/, docs/GATEWAY.md): a request's
# body (before Django reads it); per user and process, requests a minute and at once; how long
# a call may be held at a breakpoint (clients give up: the openai SDKs after 600 s, many
# frameworks sooner), and how long a run may be quiet before it ends.
AGENTLAB_GATEWAY_MAX_BODY_BYTES = env_int("AGENTLAB_GATEWAY_MAX_BODY_BYTES", 8 * 1024 * 1024)
AGENTLAB_GATEWAY_REQUESTS_PER_MIN = env_int("AGENTLAB_GATEWAY_REQUESTS_PER_MIN", 6_000)
AGENTLAB_GATEWAY_MAX_IN_FLIGHT = env_int("AGENTLAB_GATEWAY_MAX_IN_FLIGHT", 64)
AGENTLAB_GATEWAY_MAX_HELD = env_int("AGENTLAB_GATEWAY_MAX_HELD", 16)
AGENTLAB_GATEWAY_HOLD_S = env_int("AGENTLAB_GATEWAY_HOLD_S", 300)
AGENTLAB_GATEWAY_IDLE_S = env_int("AGENTLAB_GATEWAY_IDLE_S", 120)
# Gateway sessions (manage.py attach, a run page's replay or fork for a runner) one user may
# have open at once; one not ended within a day stops counting.
AGENTLAB_GATEWAY_MAX_SESSIONS = env_int("AGENTLAB_GATEWAY_MAX_SESSIONS", 100)


# -- Production profile: AGENTLAB_ENV=production (docs/SECURITY.md "Deploying") ------------------
# Behind a TLS-terminating proxy that sets X-Forwarded-Proto; `manage.py check --deploy` is clean.
AGENTLAB_ENV = os.environ.get("AGENTLAB_ENV", "development").strip().lower()
if AGENTLAB_ENV == "production":
    if DEBUG:
        raise ValueError("AGENTLAB_ENV=production runs with DEBUG off; unset DEBUG")
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 365 * 24 * 3600)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)
    SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = True
    SECURE_CSP["upgrade-insecure-requests"] = True
elif AGENTLAB_ENV != "development":
    raise ValueError(f"AGENTLAB_ENV must be development or production, not {AGENTLAB_ENV!r}")
