"""Typed returns, pure: a return annotation -> its JSON schema, what the model is told about
it, and the answer read back into a value (parsed, checked against the schema with jsonschema,
then built by pydantic: a dataclass, a BaseModel, a TypedDict, a list of them…). `str` (or no
annotation) is the answer as it is."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import jsonschema

FENCE = re.compile(r"^\s*```[a-zA-Z]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


class ShapeError(ValueError):
    """An answer that is not the declared type; the message says why, for the model."""


@dataclass(frozen=True)
class OutputType:
    annotation: Any
    schema: dict[str, Any] | None  # None: the answer's text as it is

    def instructions(self) -> str:
        if self.schema is None:
            return ""
        return ("Your final answer must be only a JSON value (no other text) that matches this "
                "JSON schema:\n" + json.dumps(self.schema, ensure_ascii=False))

    def parse(self, answer: str) -> Any:
        """The value the answer stands for; ShapeError when it is not of the declared type."""
        if self.schema is None:
            return answer
        data = read_json(answer)
        errors = sorted(jsonschema.Draft202012Validator(self.schema).iter_errors(data),
                        key=lambda e: list(e.absolute_path))
        if errors:
            raise ShapeError("; ".join(_describe(e) for e in errors[:5]))
        from pydantic import TypeAdapter, ValidationError

        try:
            return TypeAdapter(self.annotation).validate_python(data)
        except ValidationError as exc:
            raise ShapeError(str(exc)) from None


def output_type(annotation: Any) -> OutputType:
    """The OutputType of a return annotation (TypeError for one pydantic cannot describe)."""
    if annotation in (str, None) or annotation is type(None):
        return OutputType(str, None)
    from pydantic import PydanticSchemaGenerationError, TypeAdapter

    try:
        schema = TypeAdapter(annotation).json_schema()
    except PydanticSchemaGenerationError as exc:
        raise TypeError(f"@agent: the return type {annotation!r} has no JSON schema: "
                        f"{exc}") from None
    return OutputType(annotation, schema)


def read_json(answer: str) -> Any:
    """The JSON value of an answer: the whole text, a fenced block, or the outermost {…} or
    […] inside it (models like to add a sentence)."""
    text = answer.strip()
    if match := FENCE.match(text):
        text = match.group(1).strip()
    candidates = [text]
    for start, end in (("{", "}"), ("[", "]")):
        i, j = text.find(start), text.rfind(end)
        if 0 <= i < j:
            candidates.append(text[i:j + 1])
    for candidate in candidates:
        try:
            return json.loads(candidate)
        except ValueError:
            continue
    raise ShapeError("the answer is not JSON" + (f": {answer[:200]!r}" if answer else
                                                 " (it is empty)"))


def _describe(error: jsonschema.ValidationError) -> str:
    where = "/".join(str(p) for p in error.absolute_path) or "the answer"
    return f"{where}: {error.message}"
