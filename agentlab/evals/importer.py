"""Suite files -> validated case rows, or every bad row as RowError(line, field, reason).

Pure (no Django). Two formats:
- JSONL: one JSON object per line; blank lines are skipped.
- CSV: a header row, then one case per record; tags separated by commas or semicolons.
Fields: question (required), expected, scorer (default "contains"), tolerance (numeric only),
rubric (llm_judge), tags. An unknown field is an error, so a typo never drops data silently.
Saving is the caller's business (agentlab/evals/suites.py does it all-or-nothing).
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from dataclasses import dataclass, field
from typing import Any

from agentlab.evals.scorers import SCORERS, ScorerError, numbers, read_schema
from agentlab.paradigms.user_regex import UnsafePattern, compile_pattern

FIELDS = ("question", "expected", "scorer", "tolerance", "rubric", "tags")
DEFAULT_SCORER = "contains"


@dataclass(frozen=True)
class RowError:
    line: int
    field: str  # "" when the whole line is wrong (bad JSON)
    reason: str

    def __str__(self) -> str:
        where = f"line {self.line}" + (f", {self.field}" if self.field else "")
        return f"{where}: {self.reason}"


@dataclass(frozen=True)
class CaseRow:
    line: int
    question: str
    expected: str = ""
    scorer: str = DEFAULT_SCORER
    tolerance: float | None = None
    rubric: str = ""
    tags: list[str] = field(default_factory=list)

    def model_fields(self) -> dict[str, Any]:
        return {"question": self.question, "expected": self.expected, "scorer": self.scorer,
                "tolerance": self.tolerance, "rubric": self.rubric, "tags": self.tags}


class ImportFailed(ValueError):
    def __init__(self, errors: list[RowError]) -> None:
        super().__init__(f"{len(errors)} bad row(s); nothing was imported:\n"
                         + "\n".join(str(e) for e in errors))
        self.errors = errors


def guess_format(filename: str) -> str:
    name = filename.lower()
    if name.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    if name.endswith((".csv", ".tsv")):
        return "csv"
    raise ValueError(f"cannot tell the format of {filename!r}: name it .jsonl or .csv")


def decode(data: bytes) -> str:
    """UTF-8 (with or without a BOM, as spreadsheets write it)."""
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ImportFailed([RowError(0, "", f"the file is not UTF-8 text ({exc.reason} at "
                                            f"byte {exc.start})")]) from None


def parse(text: str, fmt: str) -> list[CaseRow]:
    """All rows, or ImportFailed listing every bad one."""
    rows, errors = (parse_jsonl if fmt == "jsonl" else parse_csv)(text)
    if errors:
        raise ImportFailed(errors)
    if not rows:
        raise ImportFailed([RowError(0, "", "the file has no cases")])
    return rows


def parse_jsonl(text: str) -> tuple[list[CaseRow], list[RowError]]:
    rows: list[CaseRow] = []
    errors: list[RowError] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            errors.append(RowError(number, "", f"invalid JSON: {exc.msg} (column {exc.colno})"))
            continue
        if not isinstance(obj, dict):
            errors.append(RowError(number, "", f"expected a JSON object, got "
                                               f"{type(obj).__name__}"))
            continue
        _collect(validate(obj, number), rows, errors)
    return rows, errors


def parse_csv(text: str) -> tuple[list[CaseRow], list[RowError]]:
    rows: list[CaseRow] = []
    errors: list[RowError] = []
    try:
        dialect = csv.Sniffer().sniff(text.split("\n", 1)[0], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    reader = csv.reader(io.StringIO(text), dialect)
    header = next(reader, None)
    if header is None:
        return [], [RowError(1, "", "the file is empty (a header row is needed)")]
    header = [h.strip().lower() for h in header]
    errors += [RowError(1, h or f"column {i}", _unknown(h)) for i, h in enumerate(header, 1)
               if h not in FIELDS]
    if "question" not in header:
        errors.append(RowError(1, "question", "the header has no question column"))
    if errors:
        return [], errors
    start = reader.line_num + 1
    for record in reader:
        number, start = start, reader.line_num + 1  # a quoted cell may span several lines
        if not any(cell.strip() for cell in record):
            continue
        if len(record) > len(header):
            errors.append(RowError(number, "", f"{len(record)} cells but the header has "
                                               f"{len(header)} columns"))
            continue
        _collect(validate(dict(zip(header, record, strict=False)), number), rows, errors)
    return rows, errors


def validate(obj: dict[str, Any], line: int) -> CaseRow | list[RowError]:
    """One case's fields (JSON values or CSV strings) checked together."""
    errors = [RowError(line, str(k), _unknown(str(k))) for k in obj if k not in FIELDS]
    question = _text(obj.get("question"))
    if not question:
        errors.append(RowError(line, "question", "missing (every case needs a question)"))
    scorer = (_text(obj.get("scorer")) or DEFAULT_SCORER).lower().replace(" ", "_")
    if scorer not in SCORERS:
        errors.append(RowError(line, "scorer", f"unknown scorer {scorer!r}; use one of "
                                               f"{', '.join(SCORERS)}"))
    expected, rubric = _text(obj.get("expected")), _text(obj.get("rubric"))
    tolerance = _tolerance(obj.get("tolerance"), line, errors)
    if tolerance is not None and scorer != "numeric":
        errors.append(RowError(line, "tolerance", f"only numeric cases have a tolerance "
                                                  f"(this one is {scorer})"))
    if scorer == "numeric" and len(numbers(expected)) != 1:
        errors.append(RowError(line, "expected", f"numeric scorer: {expected!r} is not a "
                                                 "number"))
    elif scorer == "regex":
        try:  # the rule the scorer applies: length, counted repeats, then the regex module
            compile_pattern(expected)
        except UnsafePattern as exc:
            errors.append(RowError(line, "expected", str(exc)))
    elif scorer == "json_schema" and expected:
        try:
            read_schema(expected)
        except ScorerError as exc:
            errors.append(RowError(line, "expected", str(exc)))
    if scorer in ("exact", "contains", "regex", "json_schema") and not expected:
        errors.append(RowError(line, "expected", f"missing (the {scorer} scorer needs it)"))
    if scorer == "llm_judge" and not (rubric or expected):
        errors.append(RowError(line, "rubric", "the llm_judge scorer needs a rubric or an "
                                               "expected answer"))
    tags = _tags(obj.get("tags"), line, errors)
    if errors:
        return errors
    return CaseRow(line=line, question=question, expected=expected, scorer=scorer,
                   tolerance=tolerance, rubric=rubric, tags=tags)


def _collect(checked: CaseRow | list[RowError], rows: list[CaseRow],
             errors: list[RowError]) -> None:
    if isinstance(checked, list):
        errors.extend(checked)
    else:
        rows.append(checked)


def _unknown(name: str) -> str:
    return f"unknown column {name!r}; columns: {', '.join(FIELDS)}"


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    return (value if isinstance(value, str) else json.dumps(value)).strip()


def _tolerance(value: Any, line: int, errors: list[RowError]) -> float | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    try:
        number = float(value) if not isinstance(value, bool) else math.nan
    except (TypeError, ValueError):
        number = math.nan
    if not math.isfinite(number) or number < 0:
        errors.append(RowError(line, "tolerance", f"{value!r} is not a number >= 0"))
        return None
    return number


def _tags(value: Any, line: int, errors: list[RowError]) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [t.strip() for t in re.split(r"[,;]", value) if t.strip()]
    if isinstance(value, list) and all(isinstance(t, str) for t in value):
        return [t.strip() for t in value if t.strip()]
    errors.append(RowError(line, "tags", "tags must be a list of strings or a comma-separated "
                                         "text"))
    return []
