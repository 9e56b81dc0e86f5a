"""Code review tools on small Python and Java samples with known problems at known lines."""

from __future__ import annotations

import json

import pytest

from agentlab.tools.executor import ToolExecutor
from agentlab.tools.registry import builtin_tools

PY = '''\
"""Order helpers."""
import os
import subprocess
from math import *

password = "correct-horse-battery"


def find(conn, name):
    """Look a customer up."""
    return conn.execute("SELECT * FROM customers WHERE name = '" + name + "'")


def find_f(cursor, uid):
    """Look an order up."""
    query = f"SELECT * FROM orders WHERE id = {uid}"
    cursor.execute(query)


def report(conn, customers, products, days):
    """Nested work."""
    out = ""
    for c in customers:
        rows = conn.execute("SELECT * FROM orders WHERE customer_id = ?", (c,))
        for p in products:
            for d in days:
                out += str(c) + str(p) + str(d)
    return out, rows


def BadName(x):
    # a comment
    if x and x > 1:
        os.system("rm -rf " + x)
    subprocess.run(x, shell=True)
    return eval(x)


class lower_case:
    pass
'''

JAVA = '''\
import java.util.*;

public class OrderService {
    private String apiKey = "sk-test-123456";

    // Finds orders
    public ResultSet find(Connection conn, String customer) throws SQLException {
        Statement st = conn.createStatement();
        return st.executeQuery("SELECT * FROM orders WHERE customer = '" + customer + "'");
    }

    public String Totals(List<Integer> ids, int[][][] cube) {
        String out = "";
        for (int id : ids) {
            ResultSet rs = stmt.executeQuery("SELECT total FROM orders WHERE id = ?");
            out += rs.getString(1);
        }
        for (int i = 0; i < cube.length; i++) {
            for (int j = 0; j < cube[i].length; j++) {
                for (int k = 0; k < cube[i][j].length; k++) {
                    if (cube[i][j][k] > 0 && i < 3) {
                        out += "x";
                    }
                }
            }
        }
        return out;
    }

    public void run(String cmd) throws Exception {
        Runtime.getRuntime().exec(cmd);
    }
}

class order_item {
}
'''


@pytest.fixture(scope="module")
def ex() -> ToolExecutor:
    return ToolExecutor(builtin_tools())


async def review(ex: ToolExecutor, tool: str, code: str, language: str = "auto") -> dict:
    result = await ex.run(tool, {"code": code, "language": language})
    assert result.ok, result.observation
    return json.loads(result.output)


def where(report: dict, rule: str) -> dict[int, str]:
    return {f["line"]: f["severity"] for f in report["findings"] if f["rule"] == rule}


async def test_language_detection(ex):
    assert (await review(ex, "check_style", PY))["language"] == "python"
    assert (await review(ex, "check_style", JAVA))["language"] == "java"


async def test_findings_have_the_documented_shape(ex):
    report = await review(ex, "check_security", PY, "python")
    assert report["findings"] and {"high", "medium", "low"} <= report["summary"].keys()
    for f in report["findings"]:
        assert set(f) == {"severity", "line", "rule", "message"}
        assert f["severity"] in {"high", "medium", "low", "info"} and f["message"]


async def test_python_structure(ex):
    s = await review(ex, "analyze_code_structure", PY, "python")
    names = {f["name"]: f for f in s["functions"]}
    assert names["find"]["line"] == 9 and names["find"]["complexity"] == 1
    assert names["report"]["complexity"] == 4          # 1 + three loops
    assert names["BadName"]["complexity"] == 3         # 1 + if + and
    assert [c["name"] for c in s["classes"]] == ["lower_case"]
    assert s["lines"] == len(PY.splitlines()) and s["comment_lines"] == 1
    assert s["blank_lines"] + s["code_lines"] + s["comment_lines"] == s["lines"]
    assert 0 < s["comment_ratio"] < 0.1


async def test_java_structure(ex):
    s = await review(ex, "analyze_code_structure", JAVA, "java")
    methods = {m["name"]: m for m in s["functions"]}
    assert methods["find"]["line"] == 7 and methods["run"]["line"] == 30
    assert methods["Totals"]["complexity"] >= 6        # 4 loops, if, &&
    assert {c["name"] for c in s["classes"]} == {"OrderService", "order_item"}
    assert s["comment_lines"] == 1


async def test_python_security(ex):
    report = await review(ex, "check_security", PY)
    assert where(report, "sql-injection") == {11: "high", 17: "high"}  # concat, f-string var
    assert 6 in where(report, "hardcoded-secret")
    assert set(where(report, "shell")) == {34, 35}
    assert 36 in where(report, "eval")
    assert 24 not in where(report, "sql-injection")  # parameterised: fine


async def test_java_security(ex):
    report = await review(ex, "check_security", JAVA)
    assert where(report, "sql-injection") == {9: "high"}
    assert 4 in where(report, "hardcoded-secret")
    assert 31 in where(report, "shell")


@pytest.mark.parametrize("snippet", ['pickle.loads(blob)', 'el.innerHTML = data',
                                     'document.write(x)', 'exec(code)'])
async def test_other_security_rules(ex, snippet):
    assert (await review(ex, "check_security", snippet, "python"))["findings"]


async def test_python_performance(ex):
    report = await review(ex, "check_performance", PY)
    assert where(report, "nested-loops") == {25: "medium", 26: "high"}
    assert report["summary"]["max_loop_depth"] == 3
    assert 24 in where(report, "n-plus-one")
    assert 27 in where(report, "string-concat-in-loop")
    assert 11 not in where(report, "n-plus-one")  # a query outside a loop is fine


async def test_python_loop_depth_is_real_nesting_not_indentation(ex):
    code = "def f(a, b):\n    for x in a:\n        pass\n    for y in b:\n        pass\n"
    report = await review(ex, "check_performance", code)
    assert report["summary"]["max_loop_depth"] == 1 and not where(report, "nested-loops")


async def test_java_performance(ex):
    report = await review(ex, "check_performance", JAVA)
    assert where(report, "nested-loops") == {19: "medium", 20: "high"}
    assert report["summary"]["max_loop_depth"] == 3
    assert 15 in where(report, "n-plus-one")
    assert {16, 22} <= set(where(report, "string-concat-in-loop"))
    assert 9 not in where(report, "n-plus-one")


async def test_python_style(ex):
    long_line = "x = '" + "a" * 120 + "'   \n"
    report = await review(ex, "check_style", PY + long_line)
    assert 4 in where(report, "wildcard-import")
    naming = where(report, "naming")
    assert 31 in naming and 39 in naming and 9 not in naming
    assert 39 in where(report, "missing-docstring")  # class lower_case
    assert 9 not in where(report, "missing-docstring")
    last = len(PY.splitlines()) + 1
    assert last in where(report, "line-length") and last in where(report, "trailing-whitespace")


async def test_java_style(ex):
    report = await review(ex, "check_style", JAVA)
    assert 1 in where(report, "wildcard-import")
    naming = where(report, "naming")
    assert 12 in naming and 35 in naming and 7 not in naming and 3 not in naming


async def test_invalid_python_is_a_clear_error(ex):
    result = await ex.run("analyze_code_structure", {"code": "def (:", "language": "python"})
    assert not result.ok and "not valid Python" in result.observation


async def test_security_reviews_a_snippet_that_does_not_parse(ex):
    """A one-line copy of a program (what a small model writes into a plan) is not valid Python,
    yet its line-level problems are still found, and the report says the rest was not checked."""
    snippet = 'import requests API_KEY = "live-1234567890abcdef" def fetch(url): pass'
    report = await review(ex, "check_security", snippet, "python")
    assert where(report, "hardcoded-secret") == {1: "high"}
    assert "not valid Python" in report["summary"]["note"]
    whole = await review(ex, "check_security", 'API_KEY = "live-1234567890abcdef"\n', "python")
    assert "note" not in whole["summary"]


async def test_language_enum_is_validated(ex):
    result = await ex.run("check_style", {"code": "x = 1", "language": "cobol"})
    assert not result.ok and result.error_type == "validation"


async def test_java_loop_body_ends_at_its_closing_brace(ex):
    code = ("class A {\n    void f(List<Integer> ids) {\n        for (int id : ids) {\n"
            "            total += id;\n        }\n"
            "        ResultSet rs = stmt.executeQuery(\"SELECT 1\");\n    }\n}\n")
    report = await review(ex, "check_performance", code, "java")
    assert not where(report, "n-plus-one")  # the query is after the loop, not inside it
