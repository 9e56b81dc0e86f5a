"""Java loop nesting by real structure: brace-less bodies, "{" on the next line, do-while."""

from __future__ import annotations

from agentlab.tools.builtin import _java_scan
from agentlab.tools.builtin.code_review import check_performance

BRACELESS = """class A {
    void a(Connection c, int[] xs) {
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 3; j++)
                for (int k = 0; k < 3; k++)
                    c.createStatement().executeQuery("SELECT 1");
        for (int x : xs) log(x);
        for (int y : xs) log(y);
    }
}
"""

NEXT_LINE_BRACE = """class B {
    void b(int[] xs) {
        for (int i : xs)
        {
            while (ok())
            {
                step();
            }
        }
        String s = "";
        do {
            s += "x";
        } while (more());
        while (done()) { tick(); }
    }
}
"""


def depths(code: str) -> dict[int, int]:
    return dict(_java_scan.scan(code).loops)


def test_braceless_loops_nest_by_their_statement():
    assert depths(BRACELESS) == {3: 1, 4: 2, 5: 3, 7: 1, 8: 1}
    report = check_performance.fn(BRACELESS, "java")
    nested = {f["line"]: f for f in report["findings"] if f["rule"] == "nested-loops"}
    assert nested[5]["severity"] == "high" and "3 deep" in nested[5]["message"]
    assert report["summary"]["max_loop_depth"] == 3
    assert any(f["rule"] == "n-plus-one" and f["line"] == 6 for f in report["findings"])


def test_brace_on_the_next_line_and_do_while_tail():
    # line 13 "} while (more());" closes the do-loop: it is no loop of its own
    assert depths(NEXT_LINE_BRACE) == {3: 1, 5: 2, 11: 1, 14: 1}
    report = check_performance.fn(NEXT_LINE_BRACE, "java")
    assert [f["line"] for f in report["findings"] if f["rule"] == "nested-loops"] == [5]
    assert any(f["rule"] == "string-concat-in-loop" and f["line"] == 12
               for f in report["findings"])
