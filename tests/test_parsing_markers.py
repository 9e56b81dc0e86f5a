"""What small and non-English models write: full-width colons, a cut-off stop word, JSON with
prose or comments, inputs in call syntax, markers in another language (configured per agent)."""

from __future__ import annotations

import pytest

from agentlab.paradigms.parsing import (
    FollowUp,
    ReactAction,
    ReactFinal,
    SelfAskFinal,
    coerce_input,
    parse_react,
    parse_self_ask,
    stop_words,
)


def test_full_width_colons_are_read_as_colons() -> None:
    got = parse_react('Thought：查天气\nAction：get_weather\nAction Input：{"city": "Paris"}')
    assert got == ReactAction("查天气", "get_weather", {"city": "Paris"})
    assert parse_react("Thought：知道了\nFinal Answer：15 °C") == ReactFinal("知道了", "15 °C")


@pytest.mark.parametrize("tail", ["\nObs", "\nObserv", "\nobservation", "\n  Ob"])
def test_a_stop_word_cut_off_at_the_end_is_not_part_of_the_input(tail: str) -> None:
    got = parse_react(f"Thought: look\nAction: search\nAction Input: Paris weather{tail}")
    assert got == ReactAction("look", "search", "Paris weather")
    final = parse_react(f"Thought: done\nFinal Answer: It is sunny.{tail}")
    assert isinstance(final, ReactFinal) and final.answer == "It is sunny."


def test_a_word_that_only_looks_like_a_stop_word_stays() -> None:
    got = parse_react("Thought: t\nFinal Answer: The planets\nObsidian")
    assert isinstance(got, ReactFinal) and got.answer.endswith("Obsidian")


def test_json_followed_by_prose_or_with_comments_is_read() -> None:
    assert coerce_input('{"city": "Paris"} I will now wait.') == {"city": "Paris"}
    assert coerce_input('{"city": "Paris", // the capital\n "units": "C"}') == {
        "city": "Paris", "units": "C"}
    assert coerce_input('{ /* where */ "city": "Paris # 1"}') == {"city": "Paris # 1"}
    got = parse_react('Action: get_weather\nAction Input: {"city": "Paris"} // the capital\n'
                      "Then I read the result.")
    assert got.tool_input == {"city": "Paris"}


def test_an_input_in_call_syntax_is_unwrapped() -> None:
    assert coerce_input('get_weather({"city": "Paris"})') == {"city": "Paris"}
    assert coerce_input('`SomeTool({"q": "x"})`.') == {"q": "x"}
    got = parse_react("Thought: t\nAction: get_weather\n"
                      'Action Input: get_weather({"city": "Oslo"})')
    assert got == ReactAction("t", "get_weather", {"city": "Oslo"})


def test_react_markers_in_another_language() -> None:
    markers = {"thought": ["Gedanke"], "action": ["Aktion"], "action_input": ["Eingabe"],
               "final_answer": ["Endgültige Antwort"], "observation": ["Beobachtung"]}
    got = parse_react('Gedanke: Wetter nachsehen\nAktion: get_weather\nEingabe: {"city": "Bern"}'
                      "\nBeobachtung: erfunden", markers=markers)
    assert got == ReactAction("Wetter nachsehen", "get_weather", {"city": "Bern"})
    final = parse_react("Gedanke：fertig\nEndgültige Antwort: 12 °C\nBeob", markers=markers)
    assert final == ReactFinal("fertig", "12 °C")
    assert stop_words(markers, "observation", "Observation") == ["Observation:", "Beobachtung:"]


def test_self_ask_prefixes_in_another_language() -> None:
    markers = {"follow_up": ["Nachfrage"], "final_answer": ["Die Antwort ist"],
               "intermediate_answer": ["Zwischenantwort"]}
    assert parse_self_ask("Nachfrage: Wer gründete Zephyr?\nZwischen",
                          markers=markers) == FollowUp("Wer gründete Zephyr?")
    assert parse_self_ask("Die Antwort ist： Genf", markers=markers) == SelfAskFinal("Genf")
    assert parse_self_ask("Follow up：Who founded it?") == FollowUp("Who founded it?")
