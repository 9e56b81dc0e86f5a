"""Credentials out of URLs, for everything that leaves the installation (bundles, OTLP).

A profile's base URL may carry a login (`https://user:pass@host/v1`) or a key in its query
(`?api_key=…`), and such URLs reach a run's record in more places than the snapshot: LLM errors
name the endpoint ("cannot reach https://…"), so step texts and a run's error do too. Every
string of an export therefore goes through `redact_urls`: the user-info part and key-like query
parameters are removed, the scheme, host, port, path and other parameters stay, so the record
still says where a call went. Pure: no Django.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

# A URL with a scheme, up to whitespace, a quote or an angle bracket (it may sit inside JSON
# text, an error message or HTML).
_URL = re.compile(r"\b[a-zA-Z][a-zA-Z0-9+.-]{1,20}://[^\s\"'<>\\`]+")
# Query parameter names that hold credentials: api_key, x-api-key, key, access_token, token,
# secret, password, passwd, pwd, auth, authorization, signature, sig, credential, session…
_SECRET_PARAM = re.compile(
    r"(key|token|secret|pass(word|wd)?|pwd|auth|sig(nature)?|credential|session|jwt|bearer)",
    re.IGNORECASE)


def redact_urls(value: Any) -> Any:
    """A copy of a JSON-like value in which every URL inside every string (keys too) is
    `redact_url`ed; other values are returned as they are."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {redact_text(k) if isinstance(k, str) else k: redact_urls(v)
                for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redact_urls(v) for v in value]
    return value


def redact_text(text: str) -> str:
    """`text` with each URL in it redacted (fast when there is none)."""
    if "://" not in text:
        return text
    return _URL.sub(lambda m: redact_url(m.group(0)), text)


def redact_url(url: str) -> str:
    """`url` without `user:password@` and without key-like query parameters."""
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an invalid IPv6 literal: keep the scheme only
        return url.partition("://")[0] + "://[invalid URL removed]"
    netloc = parts.netloc.rpartition("@")[2]
    query = parts.query
    if query:
        pairs = parse_qsl(query, keep_blank_values=True)
        kept = [(k, v) for k, v in pairs if not _SECRET_PARAM.search(k)]
        if len(kept) != len(pairs):
            query = urlencode(kept)
    fragment = "" if _SECRET_PARAM.search(parts.fragment) else parts.fragment
    if (netloc, query, fragment) == (parts.netloc, parts.query, parts.fragment):
        return url
    return urlunsplit((parts.scheme, netloc, parts.path, query, fragment))
