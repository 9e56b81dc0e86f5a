"""Code review for Python and Java: structure, security, performance and style findings, each
with a severity and a line number (Python through `ast`, Java through a brace-aware scanner)."""

from __future__ import annotations

import ast
import re
from typing import Annotated, Any, Literal

from agentlab.tools.builtin import _java_scan
from agentlab.tools.decorator import tool

Language = Literal["python", "java", "auto"]
CODE = Annotated[str, "the source code to review"]
LANG = Annotated[Language, "python, java, or auto to detect"]
MAX_LINE = 100

SECURITY_RULES: list[tuple[str, str, str, str]] = [  # (rule, severity, regex, message)
    ("sql-injection", "high",
     r"""(execute|executeQuery|executeUpdate|raw|query)\s*\(\s*"""
     r"""(f["']|"[^"]*"\s*(\+|%)|'[^']*'\s*(\+|%)|[^)]*\.format\()""",
     "SQL built from strings: use parameters (?, %s) or a prepared statement"),
    ("sql-injection", "high", r"""(?i)"(SELECT|INSERT|UPDATE|DELETE)\b[^"]*"\s*\+""",
     "SQL concatenated with input: use a prepared statement"),
    ("eval", "high", r"(?<![.\w])(eval|exec)\s*\(", "eval/exec runs arbitrary code"),
    ("shell", "high", r"shell\s*=\s*True|\bos\.system\s*\(|Runtime\.getRuntime\(\)\.exec\s*\(",
     "a shell command built at run time can be injected"),
    ("hardcoded-secret", "high",
     r"""(?i)\b(password|passwd|secret|api_?key|token)\s*=\s*["'][^"']{4,}["']""",
     "a hard-coded secret: read it from the environment or a vault"),
    ("pickle", "medium", r"\bpickle\.loads?\s*\(", "unpickling untrusted data runs code"),
    ("xss", "medium", r"\.innerHTML\s*=|document\.write\s*\(",
     "writing HTML from data invites XSS: use textContent or escaping"),
]
QUERY_CALL = re.compile(r"\.(execute|executeQuery|query|get|filter|fetch\w*)\s*\(")


def _language(code: str, language: Language) -> str:
    if language != "auto":
        return language
    java = re.search(r"\b(public|private|protected)\s+(static\s+)?[\w<>\[\]]+\s+\w+\s*\(|"
                     r"\bclass\s+\w+\s*(extends|implements|\{)|System\.out\.", code)
    return "java" if java and not re.search(r"^\s*def\s+\w+\(", code, re.M) else "python"


def _finding(severity: str, line: int, rule: str, message: str) -> dict[str, Any]:
    return {"severity": severity, "line": line, "rule": rule, "message": message}


def _report(language: str, findings: list[dict[str, Any]], **summary: Any) -> dict[str, Any]:
    findings.sort(key=lambda f: (f["line"], f["rule"]))
    counts = {s: sum(f["severity"] == s for f in findings) for s in ("high", "medium", "low")}
    return {"language": language, "findings": findings, "summary": {**counts, **summary}}


def _parse(code: str) -> ast.Module:
    try:
        return ast.parse(code)
    except SyntaxError as exc:
        raise ValueError(f"not valid Python (line {exc.lineno}): {exc.msg}") from None


def _complexity(fn: ast.AST) -> int:
    branches = (ast.If, ast.For, ast.AsyncFor, ast.While, ast.ExceptHandler, ast.IfExp,
                ast.comprehension, ast.Assert, ast.match_case)
    score = 1
    for node in ast.walk(fn):
        if isinstance(node, branches):
            score += 1
        elif isinstance(node, ast.BoolOp):
            score += len(node.values) - 1
    return score


@tool(category="code")
def analyze_code_structure(code: CODE, language: LANG = "auto") -> dict:
    """Classes, functions with cyclomatic complexity, line counts and the comment ratio."""
    lang = _language(code, language)
    lines = code.splitlines()
    if lang == "java":
        scan = _java_scan.scan(code)
        functions = [{"name": m.name, "line": m.line, "complexity": m.complexity}
                     for m in scan.methods]
        classes = [{"name": n, "line": line} for n, line in scan.classes]
        code_n, comments, blank = scan.code_lines, scan.comment_lines, scan.blank_lines
    else:
        tree = _parse(code)
        functions = [{"name": n.name, "line": n.lineno, "complexity": _complexity(n)}
                     for n in ast.walk(tree)
                     if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
        classes = [{"name": n.name, "line": n.lineno} for n in ast.walk(tree)
                   if isinstance(n, ast.ClassDef)]
        blank = sum(not line.strip() for line in lines)
        comments = sum(line.strip().startswith("#") for line in lines)
        code_n = len(lines) - blank - comments
    return {"language": lang, "lines": len(lines), "code_lines": code_n,
            "comment_lines": comments, "blank_lines": blank,
            "comment_ratio": round(comments / max(1, code_n + comments), 3),
            "classes": classes, "functions": sorted(functions, key=lambda f: f["line"]),
            "max_complexity": max((f["complexity"] for f in functions), default=0)}


_SQL_WORDS = re.compile(r"(?i)\b(select|insert|update|delete)\b")
_EXECUTE = {"execute", "executemany", "executescript", "raw", "query", "executeQuery"}


def _built_sql(node: ast.AST | None) -> bool:
    """An f-string, + / % concatenation or .format() call whose text looks like SQL."""
    if isinstance(node, ast.JoinedStr):
        text = "".join(v.value for v in node.values if isinstance(v, ast.Constant))
    elif isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add | ast.Mod):
        text = ast.unparse(node)
    elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
          and node.func.attr == "format"):
        text = ast.unparse(node.func.value)
    else:
        return False
    return bool(_SQL_WORDS.search(text))


def _python_sql_calls(tree: ast.AST) -> set[int]:
    """Lines where execute()-like calls get SQL built from strings, directly or via a name."""
    built: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and _built_sql(node.value):
            built |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    lines = set()
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in _EXECUTE and node.args):
            arg = node.args[0]
            if _built_sql(arg) or (isinstance(arg, ast.Name) and arg.id in built):
                lines.add(node.lineno)
    return lines


@tool(category="code")
def check_security(code: CODE, language: LANG = "auto") -> dict:
    """Security problems: SQL injection, eval/exec, shell commands, secrets, pickle, XSS."""
    lang = _language(code, language)
    findings = []
    flagged: set[tuple[int, str]] = set()
    for number, line in enumerate(code.splitlines(), 1):
        for rule, severity, pattern, message in SECURITY_RULES:
            if (number, rule) not in flagged and re.search(pattern, line):
                flagged.add((number, rule))
                findings.append(_finding(severity, number, rule, message))
    if lang != "python":
        return _report(lang, findings)
    try:
        tree = _parse(code)
    except ValueError as exc:
        # A snippet (a model's one-line copy, a fragment pasted in a review) still gets the
        # line rules' findings; only the data flow below needs the whole program.
        return _report(lang, findings, note=f"{exc}: checked line by line only")
    for number in _python_sql_calls(tree) - {n for n, _ in flagged}:
        findings.append(_finding("high", number, "sql-injection",
                                 "SQL built from strings reaches execute(): use parameters"))
    return _report(lang, findings)


def _python_loops(tree: ast.AST) -> list[tuple[ast.AST, int]]:
    found: list[tuple[ast.AST, int]] = []

    def visit(node: ast.AST, depth: int) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                visit(child, 0)
            elif isinstance(child, ast.For | ast.AsyncFor | ast.While):
                found.append((child, depth + 1))
                visit(child, depth + 1)
            else:
                visit(child, depth)

    visit(tree, 0)
    return found


@tool(category="code")
def check_performance(code: CODE, language: LANG = "auto") -> dict:
    """Performance problems: nested loops (by real depth), string += in loops, N+1 queries."""
    lang = _language(code, language)
    findings: list[dict[str, Any]] = []
    lines = code.splitlines()
    if lang == "java":
        scan = _java_scan.scan(code)
        loops = scan.loops
        bodies = scan.loop_spans
        code_lines = scan.code
    else:
        tree = _parse(code)
        loops = [(node.lineno, depth) for node, depth in _python_loops(tree)]
        bodies = [(node.lineno, node.end_lineno or node.lineno)
                  for node, _ in _python_loops(tree)]
        code_lines = lines
    for line, depth in loops:
        if depth >= 2:
            findings.append(_finding("high" if depth >= 3 else "medium", line, "nested-loops",
                                     f"loop nested {depth} deep: O(n^{depth}); "
                                     "index with a dict/set or restructure"))
    in_loop = {n for start, end in bodies for n in range(start + 1, end + 1)}
    declared = r"\bString\s+(\w+)\s*=" if lang == "java" else r"^\s*(\w+)\s*=\s*(?:f?[\"']|str\()"
    strings = {m.group(1) for text in lines for m in [re.search(declared, text)] if m}
    grows = re.compile(r"\w+\s*\+=\s*(str\(|f?[\"'])|\+=\s*\w+\s*\+\s*[\"']"
                       + "".join(f"|\\b{re.escape(n)}\\s*\\+=" for n in sorted(strings)))
    for number, text in enumerate(code_lines, 1):
        if number not in in_loop:
            continue
        if grows.search(lines[number - 1] if lang == "java" else text):
            findings.append(_finding("medium", number, "string-concat-in-loop",
                                     "string built with += in a loop: collect parts and join"))
        if QUERY_CALL.search(text) and re.search(r"(execute|query|objects|select|find)", text,
                                                 re.I):
            findings.append(_finding("high", number, "n-plus-one",
                                     "a query inside a loop (N+1): fetch everything at once"))
    return _report(lang, findings, max_loop_depth=max((d for _, d in loops), default=0))


@tool(category="code")
def check_style(code: CODE, language: LANG = "auto") -> dict:
    """Style: long lines, naming conventions, missing docstrings, wildcard imports, whitespace."""
    lang = _language(code, language)
    findings = []
    for number, line in enumerate(code.splitlines(), 1):
        if len(line) > MAX_LINE:
            findings.append(_finding("low", number, "line-length",
                                     f"line is {len(line)} characters (max {MAX_LINE})"))
        if line != line.rstrip():
            findings.append(_finding("info", number, "trailing-whitespace",
                                     "trailing whitespace"))
        if re.match(r"\s*from\s+\S+\s+import\s+\*|\s*import\s+[\w.]+\.\*;", line):
            findings.append(_finding("low", number, "wildcard-import",
                                     "wildcard import hides where names come from"))
    if lang == "java":
        for m in _java_scan.scan(code).methods:
            if not re.match(r"^[a-z][A-Za-z0-9]*$", m.name):
                findings.append(_finding("low", m.line, "naming",
                                         f"method {m.name!r} should be camelCase"))
        for name, line in _java_scan.scan(code).classes:
            if not re.match(r"^[A-Z][A-Za-z0-9]*$", name):
                findings.append(_finding("low", line, "naming",
                                         f"class {name!r} should be PascalCase"))
        return _report(lang, findings)
    for node in ast.walk(_parse(code)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            is_class = isinstance(node, ast.ClassDef)
            pattern = r"^_?[A-Z][A-Za-z0-9]*$" if is_class else r"^_{0,2}[a-z][a-z0-9_]*_{0,2}$"
            if not re.match(pattern, node.name):
                findings.append(_finding("low", node.lineno, "naming", (
                    f"class {node.name!r} should be PascalCase" if is_class
                    else f"function {node.name!r} should be snake_case")))
            if not node.name.startswith("_") and ast.get_docstring(node) is None:
                findings.append(_finding("info", node.lineno, "missing-docstring",
                                         f"public {'class' if is_class else 'function'} "
                                         f"{node.name!r} has no docstring"))
    return _report(lang, findings)
