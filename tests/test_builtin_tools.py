"""The built-in tool library on real inputs, called through the real executor."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from datetime import date, timedelta
from pathlib import Path

import pytest

from agentlab.tools.builtin import business_db, erp
from agentlab.tools.executor import ToolExecutor
from agentlab.tools.registry import builtin_tools

SAMPLES = Path(__file__).parent / "samples"


pytestmark = pytest.mark.usefixtures("own_var_dir")


def call(ex: ToolExecutor, name: str, args):
    result = asyncio.run(ex.run(name, args))
    return result


def value(ex: ToolExecutor, name: str, args):
    result = call(ex, name, args)
    assert result.ok, result.observation
    try:
        return json.loads(result.output)
    except json.JSONDecodeError:
        return result.output


def test_the_library_has_every_family_and_marks_the_writers():
    tools = builtin_tools()
    assert {"calculator", "current_time", "get_weather", "get_air_quality", "list_tables",
            "describe_table", "sql_query", "search", "query_order", "update_delivery_date",
            "send_email", "analyze_code_structure", "check_security", "check_performance",
            "check_style"} <= set(tools)
    assert {n for n, t in tools.items() if t.side_effects} == {"update_delivery_date",
                                                              "send_email"}


@pytest.mark.parametrize(("expression", "expected"), [
    ("2**10 + sqrt(16)", "1028"), ("(3 + 4) * 2.5", "17.5"), ("max(3, 9) - 10 // 3", "6"),
    ("round(pi, 3)", "3.142"), ("2^3", "8"),
    # A percentage of a quantity, as the question is written; "%" between numbers is modulo.
    ("15% of 2480", "372"), ("12.5 % OF (40 + 40)", "10"), ("17 % 5", "2"),
])
def test_calculator(ex, expression, expected):
    assert call(ex, "calculator", {"expression": expression}).output == expected


@pytest.mark.parametrize(("expression", "error"), [
    ("1/0", "division by zero"), ("x + 1", "name 'x' is not allowed"),
    ("__import__('os')", "function '__import__' is not allowed"),
    ("(1).__class__", "Attribute is not allowed"), ("9**99999", "too large"),
    ("[1, 2]", "List is not allowed"), ("2 +", "not an arithmetic expression"),
])
def test_calculator_refuses_what_is_not_arithmetic(ex, expression, error):
    result = call(ex, "calculator", {"expression": expression})
    assert not result.ok and error in result.observation


def test_current_time_in_a_zone_and_a_helpful_error(ex):
    now = value(ex, "current_time", {"timezone": "Asia/Tokyo"})
    assert now["iso"].endswith("+09:00") and now["timezone"] == "Asia/Tokyo"
    assert "Europe/Paris" in call(ex, "current_time", {"timezone": "Paris"}).observation


def test_weather_and_air_quality_from_demo_data(ex):
    weather = value(ex, "get_weather", {"city": "sao paulo"})
    assert weather["city"] == "São Paulo" and "DEMO DATA" in weather["source"]
    air = value(ex, "get_air_quality", {"city": "Delhi"})
    assert air["aqi"] == 198 and air["level"] == "unhealthy"
    missing = call(ex, "get_weather", {"city": "Atlantis"})
    assert "no demo data for 'Atlantis'" in missing.observation and "Paris" in missing.observation


def test_business_db_answers_match_an_independent_query(ex):
    path = business_db.ensure_business_db()
    with sqlite3.connect(path) as raw:
        expected = raw.execute("SELECT COUNT(*), ROUND(SUM(total), 2) FROM orders "
                               "WHERE status = 'delivered'").fetchone()
        anchor = raw.execute("SELECT value FROM meta WHERE key = 'anchor_date'").fetchone()[0]
    assert anchor == "2026-06-30"
    got = value(ex, "sql_query", {"query": "SELECT COUNT(*) AS n, ROUND(SUM(total), 2) AS s "
                                           "FROM orders WHERE status = 'delivered'"})
    assert (got["rows"][0]["n"], got["rows"][0]["s"]) == expected
    assert value(ex, "list_tables", {}) == ["customers", "meta", "order_items", "orders",
                                            "products"]
    described = value(ex, "describe_table", {"table": "customers"})
    assert described["row_count"] == 200 and len(described["sample_rows"]) == 3
    assert {"name": "country", "type": "TEXT"} in described["columns"]


@pytest.mark.parametrize(("query", "refusal"), [
    ("DROP TABLE orders", "only SELECT queries are allowed (got DROP)"),
    ("DELETE FROM orders", "(got DELETE)"),
    ("INSERT INTO meta VALUES ('a', 'b')", "(got INSERT)"),
    ("UPDATE orders SET total = 0", "(got UPDATE)"),
    ("CREATE TABLE t (x)", "(got CREATE)"),
    ("ATTACH DATABASE '/tmp/x.db' AS x", "(got ATTACH)"),
    ("PRAGMA writable_schema = 1", "(got PRAGMA)"),
    ("SELECT 1; DELETE FROM orders", "one statement per call"),
    ("SELECT load_extension('evil')", "not authorized to use function: load_extension"),
    ("WITH gone AS (SELECT 1) DELETE FROM orders", "only reading is allowed"),
    ("SELECT * FROM pragma_table_info('orders')", "only reading is allowed"),
])
def test_every_kind_of_write_is_refused(ex, query, refusal):
    result = call(ex, "sql_query", {"query": query})
    assert not result.ok and refusal in result.observation
    with sqlite3.connect(business_db.ensure_business_db()) as raw:
        assert raw.execute("SELECT COUNT(*) FROM orders").fetchone()[0] == 3000


def test_limits_and_errors_that_pass_through(ex, monkeypatch):
    many = value(ex, "sql_query", {"query": "SELECT * FROM order_items"})
    assert many["row_count"] == 200 and "only the first 200 rows" in many["note"]
    assert value(ex, "sql_query", {"query": "SELECT ';' AS s;"})["rows"] == [{"s": ";"}]
    assert "no such column: colour" in call(ex, "sql_query",
                                            {"query": "SELECT colour FROM orders"}).observation
    monkeypatch.setattr(business_db, "TIME_LIMIT_S", 0.3)
    endless = call(ex, "sql_query", {"query": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL "
                                              "SELECT x + 1 FROM c) SELECT COUNT(*) FROM c"})
    assert "stopped after 0.3 s (time limit)" in endless.observation


def test_search_follows_each_hop_of_every_chain(ex):
    questions = json.loads((Path(builtin_tools()["search"].fn.__code__.co_filename).parent.parent
                            / "data" / "knowledge_questions.json").read_text())
    assert len(questions) >= 8
    for q in questions:
        for hop in q["hops"]:
            assert value(ex, "search", {"query": hop, "k": 1})[0]["title"] == hop
    first = value(ex, "search", {"query": "Who founded Altavia Robotics?"})
    assert "Mira Okonkwo" in json.dumps(first)
    assert call(ex, "search", {"query": '"AND ( NEAR'}).ok
    assert "No results" in value(ex, "search", {"query": "xyzzy"})


def test_erp_update_writes_the_change_log_and_validates(ex):
    order = value(ex, "query_order", {"order_id": "so-1002"})
    assert order["order_id"] == "SO-1002"
    if order["status"] == "delivered":
        order = next(o for o in (value(ex, "query_order", {"order_id": f"SO-{n}"})
                                 for n in range(1001, 1061)) if o["status"] != "delivered")
    new = (date.today() + timedelta(days=60)).isoformat()
    done = value(ex, "update_delivery_date", {"order_id": order["order_id"], "new_date": new,
                                              "reason": "customer asked"})
    assert done["new_date"] == new and done["old_date"] == order["delivery_date"]
    after = value(ex, "query_order", {"order_id": order["order_id"]})
    assert after["delivery_date"] == new
    assert after["delivery_changes"][-1]["reason"] == "customer asked"
    past = (date.today() - timedelta(days=1)).isoformat()
    for args, error in [({"new_date": past, "reason": "x"}, "in the past"),
                        ({"new_date": "next week", "reason": "x"}, "not an ISO date"),
                        ({"new_date": new, "reason": "  "}, "a reason is required")]:
        result = call(ex, "update_delivery_date", {"order_id": order["order_id"], **args})
        assert error in result.observation
    assert "SO-1001 to SO-1060" in call(ex, "query_order", {"order_id": "SO-9"}).observation
    assert erp.erp_path().exists()


@pytest.mark.django_db
def test_send_email_goes_through_djangos_mail_backend(ex, settings):
    from django.core import mail

    settings.MAILERS = {"default": {"BACKEND": "django.core.mail.backends.locmem.EmailBackend"}}
    assert "E-mail sent" in value(ex, "send_email", {"to": "ops@example.com",
                                                      "subject": "Delay", "body": "Sorry"})
    assert mail.outbox[-1].to == ["ops@example.com"] and mail.outbox[-1].subject == "Delay"
    assert "not a valid e-mail" in call(ex, "send_email", {"to": "nobody", "subject": "x",
                                                            "body": "y"}).observation


@pytest.mark.parametrize("sample", ["orders.py", "Orders.java"])
def test_code_review_finds_the_planted_problems(ex, sample):
    code = (SAMPLES / sample).read_text()
    java = sample.endswith(".java")
    security = value(ex, "check_security", {"code": code})
    assert security["language"] == ("java" if java else "python")
    found = {(f["rule"], f["line"]) for f in security["findings"]}
    assert ("sql-injection", 8 if java else 9) in found
    assert ("hardcoded-secret", 4) in found
    assert (("shell", 26) if java else ("eval", 24)) in found
    perf = value(ex, "check_performance", {"code": code})
    assert perf["summary"]["max_loop_depth"] == 3
    assert ("nested-loops", 15 if java else 17, "high") in {
        (f["rule"], f["line"], f["severity"]) for f in perf["findings"]}
    if not java:
        rules = {(f["rule"], f["line"]) for f in perf["findings"]}
        assert ("n-plus-one", 19) in rules and ("string-concat-in-loop", 18) in rules
    structure = value(ex, "analyze_code_structure", {"code": code})
    worst = max(structure["functions"], key=lambda f: f["complexity"])
    assert worst["name"] == ("Count" if java else "report") and worst["complexity"] >= 4
    style = {f["rule"] for f in value(ex, "check_style", {"code": code})["findings"]}
    assert {"wildcard-import", "naming"} <= style
