"""Specific, readable LLM errors, mapped from the openai SDK's exceptions."""

from __future__ import annotations

import openai


class LLMError(Exception):
    """An LLM call failed; `str()` is fit to show a user, and never contains a key."""

    kind = "error"
    retryable = False

    def __init__(self, message: str, *, profile: str = "", base_url: str = "") -> None:
        super().__init__(message)
        self.profile = profile
        self.base_url = base_url


class EndpointUnreachable(LLMError):
    kind, retryable = "unreachable", True


class AuthenticationFailed(LLMError):
    kind = "auth"


class UnknownModel(LLMError):
    kind = "unknown_model"


class ContextTooLong(LLMError):
    kind = "context_too_long"


class RateLimited(LLMError):
    kind, retryable = "rate_limited", True


class LLMTimeout(LLMError):
    kind, retryable = "timeout", True


class ServerError(LLMError):
    kind, retryable = "server_error", True


class BadResponse(LLMError):
    kind = "bad_response"


def _server_message(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    return str(exc.message)


def translate(exc: Exception, *, profile: str, base_url: str, model: str, key_env: str,
              timeout_s: float) -> LLMError:
    """The specific LLMError for an SDK exception."""
    where = f"(profile {profile!r}, {base_url})"
    kw = {"profile": profile, "base_url": base_url}
    if isinstance(exc, openai.APITimeoutError):
        return LLMTimeout(f"no answer within {timeout_s:g} s {where}", **kw)
    if isinstance(exc, openai.APIConnectionError):
        return EndpointUnreachable(
            f"cannot reach {base_url} (profile {profile!r}): connection refused or dropped — "
            "is the server running?", **kw)
    if isinstance(exc, openai.APIStatusError):
        msg = _server_message(exc)
        status = exc.status_code
        low = msg.lower()
        if status in (401, 403):
            hint = (f"check the key in ${key_env}" if key_env
                    else "this profile names no API-key variable; set one in the admin")
            return AuthenticationFailed(f"bad or missing API key {where}: {msg} — {hint}", **kw)
        if status == 429:
            return RateLimited(f"rate limited {where}: {msg}", **kw)
        if "context" in low and ("length" in low or "window" in low or "exceed" in low):
            return ContextTooLong(f"the conversation is too long for {model!r} {where}: {msg}",
                                  **kw)
        if status == 404 or "model" in low and "not" in low and "found" in low:
            return UnknownModel(f"unknown model {model!r} {where}: {msg}", **kw)
        if status >= 500:
            return ServerError(f"server error {status} {where}: {msg}", **kw)
        return BadResponse(f"request refused with {status} {where}: {msg}", **kw)
    return BadResponse(f"unexpected reply {where}: {type(exc).__name__}: {exc}", **kw)
