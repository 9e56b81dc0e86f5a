"""Specific, readable LLM errors, mapped from the openai SDK's exceptions."""

from __future__ import annotations

import os
import re
from typing import Any

import openai

from traces.redact import redact_url, redact_urls


class LLMError(Exception):
    """An LLM call failed; `str()` is fit to show a user, and never contains a key: nor a
    login or key-like parameter of a URL (a base URL may carry one), which the trace would
    keep in the step's text."""

    kind = "error"
    retryable = False

    def __init__(self, message: str, *, profile: str = "", base_url: str = "",
                 retryable: bool | None = None, status: int | None = None,
                 retry_after_s: float | None = None) -> None:
        super().__init__(redact_urls(message))
        self.profile = profile
        self.base_url = redact_url(base_url)
        if retryable is not None:
            self.retryable = retryable
        self.status = status  # the HTTP status, when there was one
        self.retry_after_s = retry_after_s  # the server's Retry-After, when it sent one
        self.attempts = 0  # set by the client: HTTP attempts spent before giving up


class EndpointUnreachable(LLMError):
    kind, retryable = "unreachable", True


class AuthenticationFailed(LLMError):
    kind = "auth"


class UnknownModel(LLMError):
    kind = "unknown_model"


class ContextTooLong(LLMError):
    """The prompt does not fit the model's context window: ours (before sending) or the
    server's word. `prompt_tokens` and `limit_tokens` are the server's counts when it gave them."""

    kind = "context_too_long"
    prompt_tokens: int | None = None
    limit_tokens: int | None = None


class RateLimited(LLMError):
    kind, retryable = "rate_limited", True


class LLMTimeout(LLMError):
    kind, retryable = "timeout", True


class ServerError(LLMError):
    kind, retryable = "server_error", True


class BadResponse(LLMError):
    kind = "bad_response"


# How servers say a prompt is too long: OpenAI and vLLM ("maximum context length",
# code context_length_exceeded), llama-cpp-python ("exceed context window", the same code),
# llama.cpp's llama-server ("exceeds the available context size", type
# exceed_context_size_error), and the wordings of other compatible servers.
_CONTEXT_CODES = {"context_length_exceeded", "exceed_context_size_error",
                  "string_above_max_length"}
_CONTEXT_WORDS = re.compile(
    r"context[ _](length|window|size)|maximum context|context.{0,40}exceed|exceed.{0,60}context"
    r"|prompt is too long|input is too long|too many (input |prompt )?tokens", re.I | re.S)
# (limit, prompt) or (prompt, limit) in the servers' wordings above.
_LIMIT_FIRST = re.compile(
    r"maximum context length is (\d+) tokens.{0,40}?(?:requested|resulted in|has) (\d+)", re.I)
_PROMPT_FIRST = re.compile(
    r"(?:requested tokens|request) \((\d+)(?: tokens)?\) exceeds? (?:the available )?context "
    r"(?:window|size)(?: of)? \(?(\d+)", re.I)
_IN_MESSAGES = re.compile(r"\((\d+) in the messages", re.I)


def is_context_error(message: str, code: str = "", kind: str = "") -> bool:
    """Does a server's error say that the prompt exceeds the model's context window?"""
    return bool({code, kind} & _CONTEXT_CODES) or bool(_CONTEXT_WORDS.search(message))


def context_too_long(message: str, *, model: str, where: str, body: Any = None,
                     **kw: Any) -> ContextTooLong:
    """The server's "too long", with its own counts when it gave them."""
    prompt = limit = None
    if match := _LIMIT_FIRST.search(message):
        limit, prompt = int(match[1]), int(match[2])
        if part := _IN_MESSAGES.search(message):  # the completion's share is not the prompt's
            prompt = int(part[1])
    elif match := _PROMPT_FIRST.search(message):
        prompt, limit = int(match[1]), int(match[2])
    if isinstance(body, dict):  # llama-server sends them as fields too
        prompt = _int(body.get("n_prompt_tokens")) or prompt
        limit = _int(body.get("n_ctx")) or limit
    counts = (f": the server counted {prompt:,} tokens for a window of {limit:,}"
              if prompt and limit else "")
    error = ContextTooLong(f"the prompt is too long for {model!r}{counts} {where} — the server "
                           f"said: {message}", **kw)
    error.prompt_tokens, error.limit_tokens = prompt, limit
    return error


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return str(exc.message)


def _error_body(body: Any) -> Any:
    return body.get("error", body) if isinstance(body, dict) else body


def _error_type(body: Any) -> str:
    err = _error_body(body)
    return str(err.get("type") or "") if isinstance(err, dict) else ""


_RUNNING = "is the server running?"


def _connection_reason(exc: openai.APIConnectionError) -> tuple[str, str]:
    """The transport's own words (httpx2 under openai 3.x) in plain terms, and what to do."""
    cause = exc.__cause__
    name = type(cause).__name__ if cause else ""
    if name == "ConnectError":
        detail = str(cause).lower()
        if "certificate" in detail:
            return (f"its TLS certificate is not trusted here ({cause})",
                    "SSL_CERT_FILE may name a file of the certificates to trust")
        if "name" in detail or "resolv" in detail or "nodename" in detail:
            return f"host name not resolved ({cause})", _RUNNING
        return "connection refused", _RUNNING
    if name in ("RemoteProtocolError", "ReadError", "WriteError"):
        return f"connection dropped ({cause})", _RUNNING
    return f"connection failed ({cause or exc})", _RUNNING


def _retry_after(exc: openai.APIStatusError) -> float | None:
    try:
        return float(exc.response.headers.get("retry-after", ""))
    except (TypeError, ValueError):
        return None


def _key_hint(key_env: str) -> str:
    if not key_env:
        return "this profile names no API-key variable; set one in the admin"
    if not os.environ.get(key_env):
        return f"the environment variable {key_env} is not set"
    return f"check the key in the environment variable {key_env}"


def translate(exc: Exception, *, profile: str, base_url: str, model: str, key_env: str,
              timeout_s: float, secret: str = "") -> LLMError:
    """The specific LLMError for an SDK exception (`secret` is scrubbed from its message)."""
    error = _translate(exc, profile=profile, base_url=base_url, model=model, key_env=key_env,
                       timeout_s=timeout_s)
    if secret and len(secret) > 3 and secret in str(error):
        scrubbed = type(error)(str(error).replace(secret, "***"))
        scrubbed.__dict__.update(error.__dict__)
        return scrubbed
    return error


def _translate(exc: Exception, *, profile: str, base_url: str, model: str, key_env: str,
               timeout_s: float) -> LLMError:
    where = f"(profile {profile!r}, {base_url})"
    kw = {"profile": profile, "base_url": base_url}
    if isinstance(exc, openai.APITimeoutError):
        return LLMTimeout(f"no answer within {timeout_s:g} s {where}", **kw)
    if isinstance(exc, openai.APIConnectionError):
        reason, hint = _connection_reason(exc)
        return EndpointUnreachable(
            f"cannot reach {base_url} (profile {profile!r}): {reason} — {hint}", **kw)
    if isinstance(exc, openai.APIStatusError):
        msg = _server_message(exc)
        status = exc.status_code
        code = str(exc.code or "")
        low = msg.lower()
        kw.update(status=status, retry_after_s=_retry_after(exc))
        if status in (401, 403):
            return AuthenticationFailed(
                f"bad or missing API key {where}: {msg} — {_key_hint(key_env)}", **kw)
        if status == 429:
            # An exhausted quota does not come back with a retry.
            quota = code == "insufficient_quota" or "quota" in low
            return RateLimited(f"rate limited {where}: {msg}", retryable=not quota, **kw)
        if is_context_error(msg, code, _error_type(exc.body)):
            return context_too_long(msg, model=model, where=where, body=_error_body(exc.body),
                                    **kw)
        if status == 404 or code == "model_not_found" or (
                "model" in low and ("not found" in low or "does not exist" in low)):
            return UnknownModel(f"unknown model {model!r} {where}: {msg}", **kw)
        if status == 408:
            return LLMTimeout(f"the server gave up waiting (408) {where}: {msg}", **kw)
        if status >= 500 or status == 409:
            return ServerError(f"server error {status} {where}: {msg}", **kw)
        return BadResponse(f"request refused with {status} {where}: {msg}", **kw)
    if isinstance(exc, openai.APIError) and not isinstance(exc, openai.APIResponseValidationError):
        # An error event inside a stream: llama-server and others say "too long" this way too.
        msg = str(exc.message or "")
        if is_context_error(msg, str(exc.code or ""), str(exc.type or "")):
            return context_too_long(msg, model=model, where=where, body=exc.body, **kw)
    if isinstance(exc, openai.APIResponseValidationError | openai.APIError):
        # An error event inside a stream, or a body the SDK could not read: the server's side.
        return ServerError(f"the server reported an error {where}: {exc}", **kw)
    return BadResponse(f"unexpected reply {where}: {type(exc).__name__}: {exc}", **kw)
