"""Detectors: text -> spans (start, end, label). Each is tuned to miss ordinary numbers: card
numbers must pass Luhn and start like a card, IBANs must pass mod-97, phone numbers need an
international prefix or a common national shape. The spans, never the text, go into a trace."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    start: int
    end: int
    label: str  # what was found: email, phone, card, iban, api_key, deny, length


Detector = Callable[[str], list["Span"]]

_EMAIL = re.compile(r"(?<![\w.+-])[A-Za-z0-9._%+-]{1,64}@(?:[A-Za-z0-9-]{1,63}\.)+[A-Za-z]{2,24}"
                    r"(?![\w-])")
# +CC then 7-13 more digits in groups; (555) 123-4567; 555-123-4567; 030 1234567 / 020 7946 0958.
_PHONE = re.compile(
    r"(?<![\w+])(?<!\d[ .-])(?:"
    r"\+\d{1,3}(?:[ .-]?\(\d{1,4}\))?(?:[ .-]?\d{1,5}){2,5}"
    r"|\(\d{3}\)[ ]?\d{3}[ .-]\d{4}"
    r"|\d{3}[.-]\d{3}[.-]\d{4}"
    r"|0[1-9]\d{0,3}[ /-]\d{3,8}(?:[ -]\d{2,5})?"
    r")(?!\w|[ .-]\d)")
_CARD = re.compile(r"(?<![\w-])(?<!\d )[2-6]\d{3}(?:[ -]?\d{1,4}){2,4}(?![\w-]| \d)")
_IBAN = re.compile(r"(?<![A-Za-z0-9])[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,3})?"
                   r"(?![A-Za-z0-9])")
_KEYS = re.compile(
    r"(?<![\w-])(?:"
    r"sk-ant-[A-Za-z0-9_-]{20,}"
    r"|sk-(?:proj-|live-|test-)?[A-Za-z0-9_-]{20,}"
    r"|(?:AKIA|ASIA)[0-9A-Z]{16}"
    r"|gh[pousr]_[A-Za-z0-9]{30,}"
    r"|github_pat_[A-Za-z0-9_]{22,}"
    r"|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|AIza[0-9A-Za-z_-]{35}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r")(?![\w-])")
# A PEM private key, BEGIN to END (a secret of several lines).
_PEM = re.compile(r"-----BEGIN (?:[A-Z0-9]+ ){0,3}PRIVATE KEY-----[\s\S]{0,20000}?"
                  r"-----END (?:[A-Z0-9]+ ){0,3}PRIVATE KEY-----")
_BEARER = re.compile(r"\b[Bb]earer\s+([A-Za-z0-9._~+/-]{20,}=*)")


def emails(text: str) -> list[Span]:
    return [Span(m.start(), m.end(), "email") for m in _EMAIL.finditer(text)]


def phones(text: str) -> list[Span]:
    found = []
    for m in _PHONE.finditer(text):
        digits = sum(c.isdigit() for c in m.group())
        if 8 <= digits <= 15:
            found.append(Span(m.start(), m.end(), "phone"))
    return found


def luhn_ok(digits: str) -> bool:
    total = 0
    for i, char in enumerate(reversed(digits)):
        d = int(char)
        if i % 2:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


def cards(text: str) -> list[Span]:
    found = []
    for m in _CARD.finditer(text):
        digits = re.sub(r"[ -]", "", m.group())
        if 13 <= len(digits) <= 19 and luhn_ok(digits):
            found.append(Span(m.start(), m.end(), "card"))
    return found


def iban_ok(compact: str) -> bool:
    moved = compact[4:] + compact[:4]
    number = "".join(str(int(c, 36)) for c in moved)
    return int(number) % 97 == 1


def ibans(text: str) -> list[Span]:
    found = []
    for m in _IBAN.finditer(text):
        compact = m.group().replace(" ", "")
        if 15 <= len(compact) <= 34 and iban_ok(compact):
            found.append(Span(m.start(), m.end(), "iban"))
    return found


def api_keys(text: str) -> list[Span]:
    found = [Span(m.start(), m.end(), "api_key") for m in _KEYS.finditer(text)]
    found += [Span(m.start(1), m.end(1), "api_key") for m in _BEARER.finditer(text)]
    found += [Span(m.start(), m.end(), "api_key") for m in _PEM.finditer(text)]
    return sorted(found, key=lambda s: s.start)


DETECTORS: dict[str, Detector] = {
    "email": emails, "phone": phones, "card": cards, "iban": ibans, "api_key": api_keys,
}


def pii(text: str) -> list[Span]:
    """Every detector's spans; one that overlaps a span found first is left out (cards and
    IBANs are looked for before phone numbers: their digit groups are no phone)."""
    found: list[Span] = []
    for label in ("card", "iban", "api_key", "email", "phone"):
        found += [s for s in DETECTORS[label](text)
                  if not any(s.start < f.end and f.start < s.end for f in found)]
    return sorted(found, key=lambda s: s.start)
