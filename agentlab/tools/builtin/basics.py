"""calculator and current_time: exact answers small models get wrong on their own."""

from __future__ import annotations

import ast
import math
import operator
import re
from datetime import datetime
from typing import Annotated, Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from agentlab.tools.decorator import tool
from agentlab.tools.schema import NOT_EMPTY

_BINARY = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Div: operator.truediv, ast.FloorDiv: operator.floordiv, ast.Mod: operator.mod,
           ast.Pow: operator.pow}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_FUNCTIONS = {"sqrt": math.sqrt, "log": math.log, "log10": math.log10, "exp": math.exp,
              "sin": math.sin, "cos": math.cos, "tan": math.tan, "abs": abs, "round": round,
              "min": min, "max": max, "floor": math.floor, "ceil": math.ceil}
_CONSTANTS = {"pi": math.pi, "e": math.e}
MAX_EXPONENT = 1000
MAX_MAGNITUDE = 1e300
MAX_LENGTH = 500
# "15% of 2480", as people (and models asked "What is 15% of 2480?") write it: (15 / 100) * 2480.
# A bare "%" between numbers stays Python's modulo.
_PERCENT_OF = re.compile(r"(\d+(?:\.\d+)?|\.\d+)\s*%\s*of\b", re.IGNORECASE)


def _eval(node: ast.AST) -> Any:
    if isinstance(node, ast.Expression):
        return _eval(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _eval(node.left), _eval(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ValueError(f"exponent {right} is too large (at most {MAX_EXPONENT})")
        try:
            value = _BINARY[type(node.op)](left, right)
        except ZeroDivisionError:
            raise ValueError("division by zero") from None
        if isinstance(value, complex):
            raise ValueError("the result is not a real number")
        if abs(value) > MAX_MAGNITUDE:
            raise ValueError("the result is too large")
        return value
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_eval(node.operand))
    if isinstance(node, ast.Name):
        if node.id in _CONSTANTS:
            return _CONSTANTS[node.id]
        raise ValueError(f"name {node.id!r} is not allowed; use numbers, pi, e and "
                         f"{', '.join(_FUNCTIONS)}")
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and not node.keywords:
        fn = _FUNCTIONS.get(node.func.id)
        if fn is None:
            raise ValueError(f"function {node.func.id!r} is not allowed; use "
                             f"{', '.join(_FUNCTIONS)}")
        try:
            return fn(*[_eval(a) for a in node.args])
        except (TypeError, ValueError, OverflowError) as exc:
            raise ValueError(f"{node.func.id}(): {exc}") from None
    raise ValueError(f"{type(node).__name__} is not allowed in an arithmetic expression")


@tool(category="math")
def calculator(expression: Annotated[str, "arithmetic, e.g. (3 + 4) * sqrt(16) / 2",
                                      NOT_EMPTY]) -> str:
    """Evaluate an arithmetic expression exactly: + - * / // % **, parentheses, sqrt, log, exp,
    sin, cos, tan, abs, round, min, max, floor, ceil, pi, e; "15% of 2480" is a percentage."""
    if len(expression) > MAX_LENGTH:
        raise ValueError(f"the expression is longer than {MAX_LENGTH} characters")
    text = expression.strip().replace("^", "**").replace("×", "*").replace("÷", "/")
    text = _PERCENT_OF.sub(r"(\1 / 100) *", text)
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError:
        raise ValueError(f"not an arithmetic expression: {expression!r}") from None
    value = _eval(tree)
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        value = int(value)
    return str(value)


@tool(category="general")
def current_time(timezone: Annotated[str, "IANA time zone, e.g. Europe/Paris"] = "UTC") -> dict:
    """The current date and time in a time zone."""
    try:
        zone = ZoneInfo(timezone.strip())
    except (ZoneInfoNotFoundError, ValueError):
        close = sorted(z for z in available_timezones() if timezone.strip().lower()
                       in z.lower())[:5]
        hint = f" Did you mean: {', '.join(close)}?" if close else \
            " Use an IANA name such as Europe/Paris or America/New_York."
        raise ValueError(f"unknown time zone {timezone!r}.{hint}") from None
    now = datetime.now(zone)
    return {"timezone": timezone, "iso": now.isoformat(timespec="seconds"),
            "date": now.date().isoformat(), "time": now.strftime("%H:%M:%S"),
            "weekday": now.strftime("%A")}
