"""Importing suites (JSONL, CSV): every bad row reported as (line, field, reason), nothing
half-imported; the admin import page and `import_suite`; the demo suite, whose every expected
answer is recomputed here from the shipped demo data and tools."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import call_command
from django.core.management.base import CommandError

from agentlab.evals import importer
from agentlab.evals.demo import DATA, DEMO_SUITE, demo_defaults, load_demo_suite
from agentlab.evals.importer import RowError, parse_csv, parse_jsonl
from agentlab.evals.models import Case, Suite
from agentlab.evals.scorers import numbers, score_answer
from agentlab.evals.suites import import_text


def jsonl(*objs):
    return "\n".join(o if isinstance(o, str) else json.dumps(o) for o in objs)


def test_good_jsonl_rows_become_cases_with_defaults():
    rows, errors = parse_jsonl(jsonl(
        {"question": "2+2?", "expected": 4, "scorer": "numeric", "tolerance": "0.5"}, "",
        {"question": "Capital?", "expected": "Paris", "tags": ["geo", "easy"]}))
    assert errors == []
    assert [(r.line, r.scorer, r.expected, r.tolerance, r.tags) for r in rows] == [
        (1, "numeric", "4", 0.5, []), (3, "contains", "Paris", None, ["geo", "easy"])]


def test_every_bad_jsonl_row_is_reported_with_line_field_and_reason():
    _rows, errors = parse_jsonl(jsonl(
        {"question": "ok", "expected": "x"},
        '{"question": "broken", ',
        {"expected": "x"},
        {"question": "q", "expected": "x", "scorer": "fuzzy"},
        {"question": "q", "expected": "4", "scorer": "numeric", "tolerance": "wide"},
        {"question": "q", "expected": "four", "scorer": "numeric"},
        {"question": "q", "expected": "x", "answer": "x"},
        '["a list"]',
        {"question": "q", "expected": "[a-", "scorer": "regex"},
        {"question": "q", "scorer": "llm_judge"},
        {"question": "q", "expected": "x", "tags": 3}))
    assert [(e.line, e.field) for e in errors] == [
        (2, ""), (3, "question"), (4, "scorer"), (5, "tolerance"), (6, "expected"),
        (7, "answer"), (8, ""), (9, "expected"), (10, "rubric"), (11, "tags")]
    reasons = {e.line: e.reason for e in errors}
    assert reasons[2].startswith("invalid JSON: ")
    assert reasons[3] == "missing (every case needs a question)"
    assert reasons[4] == ("unknown scorer 'fuzzy'; use one of exact, contains, numeric, regex, "
                          "json_schema, llm_judge")
    assert reasons[5] == "'wide' is not a number >= 0"
    assert reasons[6] == "numeric scorer: 'four' is not a number"
    assert reasons[7].startswith("unknown column 'answer'; columns: question, expected")
    assert reasons[8] == "expected a JSON object, got list"
    assert str(errors[0]).startswith("line 2: invalid JSON")
    assert str(errors[1]) == "line 3, question: missing (every case needs a question)"


@pytest.mark.parametrize(("pattern", "reason"), [
    ("[a-", "invalid regular expression '[a-'"),
    ("((a{1000}){1000}){1000}", "expand to 1,000,000,000 items"),
    ("a" * 1001, "1,001 characters long"),
])
def test_a_regex_the_scorer_would_refuse_is_refused_at_import(pattern, reason):
    # The scorer's own rule (agentlab/paradigms/user_regex.py), so a bomb never reaches a run.
    rows, errors = parse_jsonl(json.dumps({"question": "q", "expected": pattern,
                                           "scorer": "regex"}))
    assert rows == [] and [e.field for e in errors] == ["expected"]
    assert reason in errors[0].reason


def test_csv_with_tags_semicolons_and_a_multiline_cell():
    text = ('question,expected,scorer,tolerance,tags\n'
            '"Two\nlines?",yes,contains,,a; b\n'
            'What is 6*7?,42,numeric,0,math,\n')
    rows, errors = parse_csv(text)
    assert errors == [RowError(4, "", "6 cells but the header has 5 columns")]
    assert rows[0].question == "Two\nlines?" and rows[0].tags == ["a", "b"] and rows[0].line == 2
    rows, errors = parse_csv(text.replace("math,\n", '"math,arith"\n'))
    assert errors == [] and rows[1].tags == ["math", "arith"] and rows[1].tolerance == 0


def test_csv_header_problems_are_reported_on_line_1():
    _rows, errors = parse_csv("question,expect\nq,x\n")
    assert errors == [RowError(1, "expect", "unknown column 'expect'; columns: question, "
                                            "expected, scorer, tolerance, rubric, tags")]
    _rows, errors = parse_csv("expected\nx\n")
    assert errors == [RowError(1, "question", "the header has no question column")]
    _rows, errors = parse_csv("question,expected,scorer\nq,x,exact\n,x,exact\n")
    assert errors == [RowError(3, "question", "missing (every case needs a question)")]


def test_format_and_encoding_errors_are_clear():
    with pytest.raises(ValueError, match="name it .jsonl or .csv"):
        importer.guess_format("cases.txt")
    with pytest.raises(importer.ImportFailed, match="not UTF-8"):
        importer.decode(b"question\n\xff\xfe")
    assert importer.decode("\ufeffquestion\n".encode()) == "question\n"


@pytest.mark.django_db
def test_nothing_is_imported_when_one_row_is_bad():
    Suite.objects.create(name="Mine")
    text = jsonl({"question": "a", "expected": "a"}, {"question": "b", "scorer": "nope"})
    with pytest.raises(importer.ImportFailed) as caught:
        import_text("Mine", text, "jsonl")
    assert caught.value.errors == [RowError(2, "scorer", "unknown scorer 'nope'; use one of "
                                                         "exact, contains, numeric, regex, "
                                                         "json_schema, llm_judge")]
    with pytest.raises(importer.ImportFailed):
        import_text("New suite", text, "jsonl")
    assert not Case.objects.exists() and list(Suite.objects.values_list("name", flat=True)) \
        == ["Mine"]


@pytest.mark.django_db
def test_an_import_appends_after_the_existing_cases():
    suite, first = import_text("S", jsonl({"question": "a", "expected": "a"}), "jsonl")
    _, more = import_text("S", "question,expected\nb,b\nc,c\n", "csv")
    assert [c.position for c in suite.cases.order_by("position")] == [1, 2, 3]
    assert [c.question for c in more] == ["b", "c"]


@pytest.mark.django_db
def test_import_suite_command(tmp_path):
    good = tmp_path / "cases.jsonl"
    good.write_text(jsonl({"question": "a", "expected": "a"}, {"question": "b", "expected": "b"}))
    out = io.StringIO()
    call_command("import_suite", str(good), "--suite", "Cmd", stdout=out)
    assert out.getvalue().strip() == "Imported 2 case(s) into suite 'Cmd' (2 in all)."
    bad = tmp_path / "bad.csv"
    bad.write_text("question,scorer\n,exact\nq,regex\n")
    with pytest.raises(CommandError) as caught:
        call_command("import_suite", str(bad), "--suite", "Cmd")
    assert str(caught.value).splitlines() == [
        "3 bad row(s); nothing was imported:",
        "line 2, question: missing (every case needs a question)",
        "line 2, expected: missing (the exact scorer needs it)",
        "line 3, expected: missing (the regex scorer needs it)"]
    assert Suite.objects.get(name="Cmd").cases.count() == 2


@pytest.mark.django_db
def test_the_admin_import_page_lists_the_row_errors_and_imports_good_files(client, staff):
    client.force_login(staff)
    assert "Import cases (JSONL/CSV)" in client.get("/admin/evals/suite/").content.decode()
    bad = SimpleUploadedFile("cases.jsonl", jsonl({"question": "q", "expected": "x",
                                                   "scorer": "numeric"}, "{oops").encode())
    resp = client.post("/admin/evals/suite/import/", {"suite": "Web", "file": bad})
    page = resp.content.decode()
    assert resp.status_code == 200 and "Nothing was imported: 2 problems" in page
    assert "<td>1</td><td>expected</td><td>numeric scorer: &#x27;x&#x27; is not a number</td>" \
        in page
    assert not Suite.objects.filter(name="Web").exists()
    good = SimpleUploadedFile("cases.csv", b"question,expected,scorer\nq,7,numeric\n")
    resp = client.post("/admin/evals/suite/import/", {"suite": "Web", "file": good})
    suite = Suite.objects.get(name="Web")
    assert resp.status_code == 302 and resp["Location"] == f"/admin/evals/suite/{suite.pk}/change/"
    assert suite.cases.get().expected == "7"


# -- the demo suite ----------------------------------------------------------------------------

@pytest.mark.django_db
def test_the_demo_suite_loads_once_and_keeps_the_users_edits():
    assert demo_defaults() == [f"evaluation suite '{DEMO_SUITE}' (41 cases)"]
    suite = Suite.objects.get(name=DEMO_SUITE)
    suite.cases.filter(position=1).update(question="edited")
    assert demo_defaults() == [] and load_demo_suite() == suite
    assert suite.cases.count() == 41 and suite.cases.get(position=1).question == "edited"
    tags = {t for c in suite.cases.all() for t in c.tags}
    assert {"weather", "air_quality", "calculator", "business_db", "knowledge",
            "code_review"} <= tags


def demo_cases():
    return [json.loads(line) for line in DATA.read_text(encoding="utf-8").splitlines()]


def truth(case, own_var_dir):
    """The expected answer of a demo case, computed from the demo data and tools."""
    from agentlab.tools.builtin import basics, business_db, weather

    q = case["question"]
    w = {c: weather.get_weather.fn(c) for c in ("Paris", "London", "São Paulo", "Sydney",
                                                 "Moscow", "Cairo", "Berlin", "Delhi")}
    aq = {c: weather.get_air_quality.fn(c) for c in ("Beijing", "Cairo", "Delhi", "Sydney",
                                                      "Paris")}

    def sql(query):
        return business_db.run_query(query)["rows"][0]

    calc = basics.calculator.fn
    table = {
        "temperature in Paris": w["Paris"]["temperature_c"],
        "weather like in London": w["London"]["condition"],
        "humidity in São Paulo": w["São Paulo"]["humidity_pct"],
        "wind speed in Sydney": w["Sydney"]["wind_kmh"],
        "temperature in Moscow": w["Moscow"]["temperature_c"],
        "Cairo or Berlin": max(("Cairo", "Berlin"), key=lambda c: w[c]["temperature_c"]),
        "Delhi than Moscow": w["Delhi"]["temperature_c"] - w["Moscow"]["temperature_c"],
        "AQI) in Beijing": aq["Beijing"]["aqi"],
        "pollutant in Cairo": aq["Cairo"]["main_pollutant"],
        "PM2.5 concentration in Delhi": aq["Delhi"]["pm25"],
        "air quality in Sydney good": "yes" if aq["Sydney"]["level"] == "good" else "no",
        "Delhi or Paris": max(("Delhi", "Paris"), key=lambda c: aq[c]["aqi"]),
        "17 * 23": calc("17 * 23"), "1234 * 5678": calc("1234 * 5678"),
        "square root of 1764": calc("sqrt(1764)"), "15% of 2480": calc("0.15 * 2480"),
        "(125 + 375) / 8": calc("(125 + 375) / 8"), "2 to the power of 20": calc("2 ** 20"),
        "22 divided by 7": calc("round(22 / 7, 3)"),
        "How many customers are": sql("SELECT COUNT(*) v FROM customers")["v"],
        "status 'cancelled'": sql("SELECT COUNT(*) v FROM orders WHERE status='cancelled'")["v"],
        "Laptops category": sql("SELECT COUNT(*) v FROM products WHERE category='Laptops'")["v"],
        "country has the most": sql("SELECT country v FROM customers GROUP BY country "
                                    "ORDER BY COUNT(*) DESC LIMIT 1")["v"],
        "most expensive product": sql("SELECT name v FROM products ORDER BY unit_price DESC "
                                      "LIMIT 1")["v"],
        "average order total": sql("SELECT ROUND(AVG(total), 2) v FROM orders")["v"],
        "enterprise segment": sql("SELECT COUNT(*) v FROM customers "
                                  "WHERE segment='enterprise'")["v"],
        "order with id 42": sql("SELECT status v FROM orders WHERE id=42")["v"],
        "highest total order value": sql(
            "SELECT c.name v FROM orders o JOIN customers c ON c.id=o.customer_id "
            "GROUP BY c.id ORDER BY SUM(o.total) DESC LIMIT 1")["v"],
        "June 2026": sql("SELECT COUNT(*) v FROM orders WHERE order_date LIKE '2026-06-%'")["v"],
        "most revenue": sql(
            "SELECT p.category v FROM order_items i JOIN products p ON p.id=i.product_id "
            "JOIN orders o ON o.id=i.order_id WHERE o.status != 'cancelled' "
            "GROUP BY p.category ORDER BY SUM(i.quantity * i.unit_price) DESC LIMIT 1")["v"],
    }
    matches = [v for k, v in table.items() if k in q]
    assert len(matches) == 1, f"no single recomputation for {q!r}"
    return str(matches[0])


def test_every_weather_calculator_and_database_answer_matches_the_demo_data(own_var_dir):
    checked = 0
    for case in demo_cases():
        if not {"weather", "air_quality", "calculator", "business_db"} & set(case["tags"]):
            continue
        want = truth(case, own_var_dir)
        # The expected answer, given as the agent's reply, must pass its own case.
        s = score_answer(case["scorer"], want, case["expected"], case.get("tolerance"))
        assert s.passed, f"{case['question']!r}: data says {want!r}, case expects " \
                         f"{case['expected']!r}"
        if case["scorer"] == "numeric":
            assert numbers(want)[-1] == pytest.approx(float(case["expected"]))
        checked += 1
    assert checked == 30


def test_a_yes_no_case_refuses_the_answer_that_says_no():
    (case,) = [c for c in demo_cases() if "air quality in Sydney good" in c["question"]]
    passed = {answer: score_answer(case["scorer"], answer, case["expected"]).passed
              for answer in ("Yes", "Yes, the air quality in Sydney is good.",
                             "The air quality in Sydney is not good.", "No")}
    # "not good" once passed `\b(yes|good)\b` (a Plan-and-Execute answer, experiment 29).
    assert passed == {"Yes": True, "Yes, the air quality in Sydney is good.": True,
                      "The air quality in Sydney is not good.": False, "No": False}


def test_every_knowledge_answer_is_the_knowledge_bases():
    from agentlab.tools.builtin.knowledge import DATA as KB

    known = {q["question"]: q for q in json.loads(
        (Path(KB).parent / "knowledge_questions.json").read_text(encoding="utf-8"))}
    titles = {json.loads(line)["title"] for line in Path(KB).read_text("utf-8").splitlines()}
    cases = [c for c in demo_cases() if "knowledge" in c["tags"]]
    assert len(cases) == 6
    for case in cases:
        entry = known[case["question"]]
        assert case["expected"] == entry["answer"] and set(entry["hops"]) <= titles
        assert len(entry["hops"]) >= 2  # multi-hop


def test_every_code_review_finding_is_what_the_review_tools_report():
    from agentlab.tools.builtin import code_review

    cases = [c for c in demo_cases() if "code_review" in c["tags"]]
    assert len(cases) == 5
    for case in cases:
        code = case["question"].split("\n\n", 1)[1]
        check = (code_review.check_performance if "performance" in case["tags"]
                 else code_review.check_security)
        findings = check.fn(code, "python")["findings"]
        assert findings, f"the tools find nothing in {code!r}"
        said = " ".join(f"{f['rule']} {f['message']}" for f in findings)
        assert score_answer(case["scorer"], said, case["expected"]).passed, (said, case)
