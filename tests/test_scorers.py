"""The scorers (pure, no database): normalisation, numbers, regex errors, the judge's reply.

The judge tests use tests/scripted_model.py's ScriptedModel: only the judge's words matter."""

from __future__ import annotations

import pytest

from agentlab.evals import scorers
from agentlab.evals.scorers import ScorerError, score_answer
from tests.scripted_model import ScriptedModel, reply


@pytest.mark.parametrize(("answer", "expected"), [
    ("Paris", "paris"), ("  The   Paris. ", "Paris"), ("a Harrow & Finch!", "Harrow & Finch"),
    ("Zürich", "Zurich"), ("**Caldmoor University**", "Caldmoor University"),
])
def test_exact_ignores_case_spacing_end_punctuation_articles_and_accents(answer, expected):
    s = score_answer("exact", answer, expected)
    assert (s.score, s.passed) == (1.0, True)


@pytest.mark.parametrize(("answer", "expected"), [
    ("Paris, France", "Paris"), ("1,234.5", "1234.5"), ("Lyon", "Paris"),
])
def test_exact_keeps_inner_punctuation_and_words(answer, expected):
    s = score_answer("exact", answer, expected)
    assert (s.score, s.passed) == (0.0, False) and s.detail["answer"] == \
        scorers.normalise(answer)


def test_contains_finds_the_normalised_text_but_not_inside_a_longer_word():
    assert score_answer("contains", "He was born in the town of LISK.", "Lisk").passed
    assert score_answer("contains", "It was light  rain today", "light rain").passed
    assert not score_answer("contains", "Professor Liskov", "Lisk").passed
    with pytest.raises(ScorerError, match="expected text is empty"):
        score_answer("contains", "anything", "  ")


@pytest.mark.parametrize(("text", "found"), [
    ("1,234.5", [1234.5]), ("5 cents", [5.0]), ("-3", [-3.0]), ("it is −2 °C", [-2.0]),
    ("$7,006,652", [7006652.0]), ("on 2026-06-30", [2026.0, 6.0, 30.0]), ("1e3", [1000.0]),
    ("no digits", []), (".5 and 0.25", [0.5, 0.25]),
])
def test_numbers_are_extracted_with_separators_signs_and_decimals(text, found):
    assert scorers.numbers(text) == found


def test_numeric_uses_the_last_number_of_the_answer_within_the_tolerance():
    s = score_answer("numeric", "17 * 23 = 391", "391")
    assert s.passed and s.detail["used"] == 391 and s.detail["numbers"] == [17, 23, 391]
    assert score_answer("numeric", "about 3.14", "3.143", 0.01).passed
    assert not score_answer("numeric", "about 3.14", "3.143", 0.001).passed
    assert not score_answer("numeric", "391, or maybe 17", "391").passed  # the last one counts
    assert score_answer("numeric", "The total is 1,786.98 dollars", "1786.98").passed
    assert score_answer("numeric", "0.30000000000000004", "0.3").passed  # float rounding
    empty = score_answer("numeric", "I don't know", "42")
    assert not empty.passed and empty.detail["reason"] == "the answer contains no number"


def test_numeric_refuses_an_expected_value_that_is_not_one_number():
    with pytest.raises(ScorerError, match="'forty-two' is not one number"):
        score_answer("numeric", "42", "forty-two")
    with pytest.raises(ScorerError, match="tolerance must be a number >= 0"):
        score_answer("numeric", "42", "42", -1)


def test_regex_is_a_case_insensitive_search_and_an_invalid_one_is_a_clear_error():
    s = score_answer("regex", "Yes, the air is GOOD.", r"\bgood\b")
    assert s.passed and s.detail["match"] == "GOOD"
    assert not score_answer("regex", "bad", r"\bgood\b").passed
    with pytest.raises(ScorerError, match=r"invalid regular expression '\[a-': "):
        score_answer("regex", "anything", "[a-")


def test_unknown_scorer_and_sync_judge_are_errors():
    with pytest.raises(ScorerError, match="unknown scorer 'fuzzy'"):
        score_answer("fuzzy", "a", "a")
    with pytest.raises(ScorerError, match="asynchronous"):
        score_answer("llm_judge", "a", "a")


@pytest.mark.parametrize(("text", "parsed"), [
    ('{"reasoning": "right", "score": 9, "passed": true}', (9.0, True, "right")),
    ('Sure!\n```json\n{"score": 4, "reasoning": "vague"}\n```', (4.0, False, "vague")),
    ('{"score": "7", "passed": "yes", "reason": "ok"}', (7.0, True, "ok")),
    ("<think>hmm</think>Score: 6/10", (6.0, True, "Score: 6/10")),
])
def test_the_judge_reply_is_read_tolerantly(text, parsed):
    assert scorers.parse_judge_reply(text) == parsed


@pytest.mark.parametrize(("text", "reason"), [
    ("I like it.", "unreadable reply"), ('{"score": 14}', "outside 0 to 10"),
    ('{"score": "great"}', "is not a number"),
])
def test_an_unreadable_judge_reply_is_an_error(text, reason):
    with pytest.raises(ScorerError, match=reason):
        scorers.parse_judge_reply(text)


async def test_judge_sends_question_rubric_expected_and_answer_and_records_the_reasoning():
    model = ScriptedModel([reply('{"reasoning": "Names the moon.", "score": 8, '
                                 '"passed": true}')])
    s = await scorers.judge(model, question="Why tides?", expected="the moon",
                            rubric="Must name the moon's gravity.", answer="The moon pulls.")
    assert (s.score, s.passed) == (0.8, True)
    assert s.detail["reasoning"] == "Names the moon." and s.detail["score_10"] == 8
    prompt = model.requests[0]["messages"][0]["content"]
    for part in ("Why tides?", "the moon", "Must name the moon's gravity.", "The moon pulls."):
        assert part in prompt


async def test_an_unreadable_judge_reply_keeps_what_the_judge_said():
    model = ScriptedModel([reply("No idea, really.")])
    with pytest.raises(scorers.JudgeReplyError) as caught:
        await scorers.judge(model, question="q", expected="e", rubric="", answer="a")
    assert caught.value.detail["reply"] == "No idea, really."


SCHEMA = '{"type": "object", "required": ["city"], "properties": {"city": {"type": "string"}}}'


def test_json_schema_reads_the_answers_json_and_names_the_first_problem():
    assert score_answer("json_schema", '{"city": "Paris"}', SCHEMA).passed
    assert score_answer("json_schema", '```json\n{"city": "Oslo"}\n```', SCHEMA).passed
    assert score_answer("json_schema", 'It is {"city": "Rome"} I think', SCHEMA).passed
    wrong = score_answer("json_schema", '{"city": 7}', SCHEMA)
    assert (wrong.score, wrong.passed) == (0.0, False)
    assert wrong.detail["reason"] == "city: 7 is not of type 'string'"
    prose = score_answer("json_schema", "Paris", SCHEMA)
    assert not prose.passed and "not JSON" in prose.detail["reason"]


@pytest.mark.parametrize(("schema", "why"), [
    ("{not json", "not JSON"), ("[1]", "must be a JSON object"),
    ('{"type": "nope"}', "invalid schema"),
    ('{"properties": {"a": {"pattern": "(a+)+$"}}}', "pattern is not allowed"),
    ("{" * 30 + "}" * 30, "not JSON"), (" " * 20_001, "at most 20,000"),
])
def test_a_schema_that_cannot_be_used_is_a_scorer_error(schema, why):
    with pytest.raises(ScorerError, match=why):
        score_answer("json_schema", "{}", schema)
