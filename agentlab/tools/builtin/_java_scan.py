"""A small brace-aware scanner for Java source: methods, classes, loop depth, complexity."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

CLASS = re.compile(r"\b(class|interface|enum|record)\s+(\w+)")
METHOD = re.compile(
    r"^\s*(?:(?:public|private|protected|static|final|abstract|synchronized|native)\s+)*"
    r"(?:<[^>]+>\s+)?[\w<>\[\],.? ]+\s+(\w+)\s*\([^;]*\)\s*(?:throws [\w., ]+)?\s*\{?\s*$")
LOOP = re.compile(r"\b(for|while|do)\b")
DO_WHILE_TAIL = re.compile(r"^\s*\}?\s*while\s*\(.*\)\s*;\s*$")  # "} while (x);" ends a do
BRANCH = re.compile(r"\b(if|for|while|case|catch)\b|&&|\|\||\?")
KEYWORDS = {"if", "for", "while", "switch", "catch", "return", "new", "else", "do", "try"}


def strip_comments_and_strings(line: str, in_block: bool) -> tuple[str, bool, bool]:
    """(code without comments/strings, still inside a /* block */, had a comment)."""
    out, i, had_comment = [], 0, False
    while i < len(line):
        if in_block:
            end = line.find("*/", i)
            had_comment = True
            if end < 0:
                return "".join(out), True, had_comment
            in_block, i = False, end + 2
            continue
        if line.startswith("//", i):
            return "".join(out), False, True
        if line.startswith("/*", i):
            in_block, had_comment, i = True, True, i + 2
            continue
        if line[i] in "\"'":
            quote, j = line[i], i + 1
            while j < len(line) and line[j] != quote:
                j += 2 if line[j] == "\\" else 1
            out.append(quote * 2)
            i = j + 1
            continue
        out.append(line[i])
        i += 1
    return "".join(out), in_block, had_comment


@dataclass
class JavaMethod:
    name: str
    line: int
    complexity: int = 1
    depth_at_start: int = 0


@dataclass
class JavaScan:
    classes: list[tuple[str, int]] = field(default_factory=list)
    methods: list[JavaMethod] = field(default_factory=list)
    code_lines: int = 0
    comment_lines: int = 0
    blank_lines: int = 0
    loops: list[tuple[int, int]] = field(default_factory=list)  # (line, loop nesting depth)
    loop_spans: list[tuple[int, int]] = field(default_factory=list)  # (first, last line)
    code: list[str] = field(default_factory=list)  # code per line, comments/strings removed


def scan(source: str) -> JavaScan:
    result = JavaScan()
    depth, in_block = 0, False
    loop_stack: list[int] = []  # brace depth at which each open loop's body starts
    current: JavaMethod | None = None
    open_loops: list[list] = []  # [first line, brace depth before it, body opened]
    pending = 0  # brace-less loop headers whose body is still to come
    for number, raw in enumerate(source.splitlines(), 1):
        code, in_block, had_comment = strip_comments_and_strings(raw, in_block)
        result.code.append(code)
        if not raw.strip():
            result.blank_lines += 1
        elif code.strip():
            result.code_lines += 1
        elif had_comment:
            result.comment_lines += 1
        if m := CLASS.search(code):
            result.classes.append((m.group(2), number))
        m = METHOD.match(code)
        if m and m.group(1) not in KEYWORDS and not CLASS.search(code):
            current = JavaMethod(m.group(1), number, depth_at_start=depth)
            result.methods.append(current)
        elif current is not None:
            current.complexity += len(BRANCH.findall(code))
        stripped = code.strip()
        header = bool(LOOP.search(code)) and not DO_WHILE_TAIL.match(code)
        if header:
            result.loops.append((number, len(loop_stack) + pending + 1))
            open_loops.append([number, depth, False])
        before = depth
        depth += code.count("{") - code.count("}")
        # A block body counts until its brace closes; a brace-less body is the next statement,
        # which may be a loop again ("for (..)\n for (..)\n x();"), or a "{" on the next line.
        chained = header and depth == before and not stripped.endswith((";", "}"))
        if header and depth > before:
            loop_stack += [before + 1] * (pending + 1)
            pending = 0
        elif chained:
            pending += 1
        elif pending and stripped.startswith("{"):
            loop_stack += [before + 1] * pending
            pending = 0
        elif stripped:
            pending = 0
        for loop in list(open_loops):  # a loop's body ends where its braces close again
            start, base, opened = loop
            loop[2] = opened = opened or depth > base
            braceless = (not opened and number > start and not stripped.startswith("{")
                         and not chained)
            if (opened and depth <= base) or braceless:
                result.loop_spans.append((start, number))
                open_loops.remove(loop)
        loop_stack = [d for d in loop_stack if d <= depth]
        if current is not None and depth <= current.depth_at_start and "}" in code:
            current = None
    return result
