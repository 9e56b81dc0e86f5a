"""Arguments from an LLM -> what the tool's schema wants: safe coercion, then jsonschema."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError, best_match


def _coerce(value: Any, schema: dict[str, Any]) -> Any:
    """Fix what small models get wrong in a harmless way ("3" for 3, "true" for true)."""
    kind = schema.get("type")
    if isinstance(value, str):
        text = value.strip()
        try:
            if kind == "integer" and text.lstrip("+-").isdigit():
                return int(text)
            if kind == "number":
                return float(text)
        except ValueError:
            return value
        if kind == "boolean" and text.lower() in {"true", "false"}:
            return text.lower() == "true"
        if kind in ("object", "array") and text[:1] in "{[":
            try:
                return json.loads(text)
            except json.JSONDecodeError:
                return value
    if kind == "number" and isinstance(value, int) and not isinstance(value, bool):
        return value
    if kind == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    if kind == "array" and isinstance(value, list) and "items" in schema:
        return [_coerce(v, schema["items"]) for v in value]
    return value


def coerce_arguments(schema: dict[str, Any], arguments: Any) -> tuple[dict[str, Any], str | None]:
    """(arguments as a dict, None) or (what was given, the problem)."""
    props: dict[str, Any] = schema.get("properties", {})
    required = schema.get("required", [])
    if arguments is None or arguments == "":
        arguments = {}
    if isinstance(arguments, str):
        text = arguments.strip()
        try:
            decoded = json.loads(text)
        except json.JSONDecodeError:
            decoded = None
        if isinstance(decoded, dict):
            arguments = decoded
        else:
            # A bare string for a tool with one string parameter is that parameter.
            strings = [k for k in (required or props) if props.get(k, {}).get("type") == "string"]
            if len(strings) == 1 and (len(required) <= 1):
                value = text.strip("'\"") if decoded is None else str(decoded)
                arguments = {strings[0]: value}
            else:
                names = ", ".join(props) or "none"
                return {"input": arguments}, (
                    f"expected a JSON object with the fields {names}, got the text {text[:80]!r}"
                )
    if not isinstance(arguments, dict):
        return {"input": arguments}, f"expected a JSON object, got {type(arguments).__name__}"
    # null for an optional parameter means "not given" (small models send it): the default applies
    return {k: _coerce(v, props.get(k, {})) for k, v in arguments.items()
            if not (v is None and k in props and k not in required
                    and not _allows_null(props[k]))}, None


def _allows_null(schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    return ("null" in kinds or None in schema.get("enum", ())
            or any(_allows_null(s) for s in schema.get("anyOf", ())))


@lru_cache(maxsize=256)
def _validator(schema_json: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads(schema_json))


def _field(error: ValidationError) -> str:
    return ".".join(str(p) for p in error.absolute_path)


def describe_violation(schema: dict[str, Any], arguments: dict[str, Any]) -> str | None:
    """A message naming the field and the expectation, or None when the arguments are valid."""
    validator = _validator(json.dumps(schema, sort_keys=True))
    error = best_match(validator.iter_errors(arguments))
    if error is None:
        return None
    where = _field(error)
    if error.validator == "required":
        return f"{error.message} (fields: {', '.join(schema.get('properties', {}))})"
    if error.validator == "additionalProperties":
        allowed = ", ".join(schema.get("properties", {})) or "none"
        return f"{error.message}; allowed fields: {allowed}"
    if error.validator == "type":
        return f"field {where!r}: expected {error.validator_value}, got {error.instance!r}"
    if error.validator == "enum":
        options = ", ".join(repr(v) for v in error.validator_value)
        return f"field {where!r}: {error.instance!r} is not one of {options}"
    return f"field {where!r}: {error.message}" if where else error.message
