"""Tests for agentlab.paradigms.parsing: each case is named by the format it shows."""

from __future__ import annotations

from typing import Any

import pytest

from agentlab.paradigms.parsing import (
    FollowUp,
    ParseError,
    PlanStep,
    ReactAction,
    ReactFinal,
    SelfAskFinal,
    common,
    parse_numbered_plan,
    parse_react,
    parse_rewoo_plan,
    parse_score,
    parse_self_ask,
    resolve_refs,
)


def cases(table: list[tuple[Any, ...]]) -> list[Any]:
    """Rows of (id, *values) -> pytest params named by what each case shows."""
    return [pytest.param(*row[1:], id=row[0]) for row in table]


# ------------------------------------------------------------------------------ parse_react

# (id, reply, expected tool, expected input); the thought is checked separately below.
REACT_ACTIONS: list[tuple[Any, ...]] = [
    (
        "classic_json_input",
        'Thought: I need the weather.\nAction: get_weather\nAction Input: {"city": "Paris"}',
        "get_weather",
        {"city": "Paris"},
    ),
    (
        "plain_text_input",
        "Thought: x\nAction: search\nAction Input: python decorators",
        "search",
        "python decorators",
    ),
    (
        "quoted_input_unquoted",
        'Action: search\nAction Input: "python decorators"',
        "search",
        "python decorators",
    ),
    ("single_quoted_input_unquoted", "Action: search\nAction Input: 'cats'", "search", "cats"),
    ("lowercase_markers", "thought: x\naction: search\naction input: cats", "search", "cats"),
    ("uppercase_markers", "THOUGHT: x\nACTION: search\nACTION INPUT: cats", "search", "cats"),
    ("marker_parameters", "Action: search\nParameters: cats", "search", "cats"),
    ("marker_input", "Action: search\nInput: cats", "search", "cats"),
    ("marker_arguments_json", 'Action: search\nArguments: {"q": "cats"}', "search", {"q": "cats"}),
    ("marker_args", "Action: search\nArgs: cats", "search", "cats"),
    ("marker_action_underscore_input", "Action: search\nAction_Input: cats", "search", "cats"),
    (
        "bold_markers_colon_inside",
        "**Thought:** x\n**Action:** search\n**Action Input:** cats",
        "search",
        "cats",
    ),
    (
        "bold_markers_colon_outside",
        "**Thought**: x\n**Action**: search\n**Action Input**: cats",
        "search",
        "cats",
    ),
    (
        "heading_markers",
        "### Thought: x\n### Action: search\n### Action Input: cats",
        "search",
        "cats",
    ),
    ("numbered_markers", "Thought 2: x\nAction 2: search\nAction Input 2: cats", "search", "cats"),
    (
        "json_in_json_fence",
        'Action: get_weather\nAction Input:\n```json\n{"city": "Paris", "days": 3}\n```',
        "get_weather",
        {"city": "Paris", "days": 3},
    ),
    (
        "json_in_bare_fence",
        'Action: get_weather\nAction Input: ```\n{"city": "Paris"}\n```',
        "get_weather",
        {"city": "Paris"},
    ),
    (
        "python_dict_input",
        "Action: get_weather\nAction Input: {'city': 'Paris', 'metric': True}",
        "get_weather",
        {"city": "Paris", "metric": True},
    ),
    (
        "json_trailing_comma",
        'Action: get_weather\nAction Input: {"city": "Paris",}',
        "get_weather",
        {"city": "Paris"},
    ),
    (
        "multiline_json_input",
        'Action: get_weather\nAction Input: {\n  "city": "Paris"\n}',
        "get_weather",
        {"city": "Paris"},
    ),
    (
        "json_then_chatter",
        'Action: get_weather\nAction Input: {"city": "Paris"}\nLet me wait.',
        "get_weather",
        {"city": "Paris"},
    ),
    (
        "multiline_text_input",
        "Action: python\nAction Input: x = 1\nprint(x)\n",
        "python",
        "x = 1\nprint(x)",
    ),
    (
        "fenced_code_input",
        "Action: python\nAction Input:\n```python\nprint(1)\n```",
        "python",
        "print(1)",
    ),
    (
        "marker_inside_json_string",
        'Action: search\nAction Input: {"q": "what is the\\nFinal Answer: 42"}',
        "search",
        {"q": "what is the\nFinal Answer: 42"},
    ),
    (
        "blob_action_input",
        '{"action": "search", "action_input": {"q": "cats"}}',
        "search",
        {"q": "cats"},
    ),
    ("blob_tool_keys", '{"tool": "search", "tool_input": "cats"}', "search", "cats"),
    (
        "blob_name_arguments_string",
        '{"name": "get_weather", "arguments": "{\\"city\\": \\"Paris\\"}"}',
        "get_weather",
        {"city": "Paris"},
    ),
    (
        "blob_openai_function_nested",
        '{"function": {"name": "get_weather", "arguments": {"city": "Paris"}}}',
        "get_weather",
        {"city": "Paris"},
    ),
    (
        "blob_in_fence_after_thought",
        'I should look it up.\n```json\n{"action": "search", "action_input": "cats"}\n```',
        "search",
        "cats",
    ),
    (
        "blob_after_action_marker",
        'Thought: x\nAction:\n```json\n{"action": "search", "action_input": "cats"}\n```',
        "search",
        "cats",
    ),
    ("blob_without_input", '{"action": "list_files"}', "list_files", ""),
    (
        "bracket_form",
        "Thought 1: x\nAction 1: Search[Colorado orogeny]",
        "Search",
        "Colorado orogeny",
    ),
    (
        "bracket_nested",
        "Action: Search[Python [programming language]]",
        "Search",
        "Python [programming language]",
    ),
    ("bracket_lookup", "Action 3: Lookup[eastern sector]", "Lookup", "eastern sector"),
    ("bracket_bare_line", "Thought: I'll search.\nSearch[Milhouse]", "Search", "Milhouse"),
    (
        "call_form_kwargs",
        'Action: get_weather(city="Paris", days=2)',
        "get_weather",
        {"city": "Paris", "days": 2},
    ),
    ("call_form_positional", 'Action: get_weather("Paris")', "get_weather", "Paris"),
    (
        "call_empty_parens_then_input",
        'Action: get_weather()\nAction Input: {"city": "Paris"}',
        "get_weather",
        {"city": "Paris"},
    ),
    ("tool_in_backticks", "Action: `search`\nAction Input: cats", "search", "cats"),
    ("tool_in_quotes", 'Action: "search"\nAction Input: cats', "search", "cats"),
    ("tool_trailing_period", "Action: search.\nAction Input: cats", "search", "cats"),
    ("tool_in_square_brackets", "Action: [search]\nAction Input: cats", "search", "cats"),
    ("tool_bold", "Action: **search**\nAction Input: cats", "search", "cats"),
    ("no_input_is_empty_string", "Thought: x\nAction: list_files", "list_files", ""),
    ("input_none_is_empty_string", "Action: list_files\nAction Input: None", "list_files", ""),
    (
        "hallucinated_observation_ignored",
        "Thought: x\nAction: search\nAction Input: cats\nObservation: Cats are...\n"
        "Thought: done\nFinal Answer: cats",
        "search",
        "cats",
    ),
    (
        "echoed_observation_before_decision_skipped",
        "Observation: old result\nThought: next\nAction: search\nAction Input: dogs",
        "search",
        "dogs",
    ),
    (
        "action_before_final_wins",
        "Action: search\nAction Input: cats\nFinal Answer: probably cats",
        "search",
        "cats",
    ),
    (
        "answer_marker_ignored_when_action_present",
        "Answer: maybe\nAction: search\nInput: cats",
        "search",
        "cats",
    ),
    (
        "one_line_react",
        "Thought: I need the weather. Action: get_weather Action Input: Paris",
        "get_weather",
        "Paris",
    ),
    (
        "crlf_line_endings",
        "Thought: x\r\nAction: search\r\nAction Input: cats\r\n",
        "search",
        "cats",
    ),
    (
        "whole_reply_fenced",
        "```\nThought: x\nAction: search\nAction Input: cats\n```",
        "search",
        "cats",
    ),
    (
        "think_block_drafts_ignored",
        "<think>Action: delete_everything</think>\nThought: x\nAction: search\nAction Input: cats",
        "search",
        "cats",
    ),
    (
        "explicit_input_wins_over_bracket_template",
        "Action: search[query]\nAction Input: cats",
        "search",
        "cats",
    ),
]


@pytest.mark.parametrize(("reply", "tool", "tool_input"), cases(REACT_ACTIONS))
def test_react_action(reply: str, tool: str, tool_input: dict[str, Any] | str) -> None:
    result = parse_react(reply)
    assert isinstance(result, ReactAction)
    assert (result.tool, result.tool_input) == (tool, tool_input)


REACT_FINALS: list[tuple[Any, ...]] = [
    ("final_answer", "Thought: I know it.\nFinal Answer: Paris", "Paris"),
    ("final_answer_lowercase", "Thought: x\nFinal answer: Paris", "Paris"),
    ("final_answer_bold", "**Final Answer:** Paris", "Paris"),
    ("final_answer_multiline", "Final Answer: Line one.\n\nLine two.", "Line one.\n\nLine two."),
    (
        "final_keeps_input_and_answer_lines",
        "Final Answer: Steps:\nInput: 2\nAnswer: 4",
        "Steps:\nInput: 2\nAnswer: 4",
    ),
    ("answer_marker_without_action", "Thought: easy\nAnswer: 42", "42"),
    ("final_before_action_wins", "Final Answer: 42\nAction: search\nAction Input: x", "42"),
    ("final_then_hallucinated_observation", "Final Answer: 42\nObservation: ok\nThought: hm", "42"),
    ("action_none_then_final", "Thought: x\nAction: None\nFinal Answer: 42", "42"),
    ("action_na_then_final", "Action: N/A\nAction Input: N/A\nFinal Answer: 42", "42"),
    ("finish_bracket", "Thought 3: done\nAction 3: Finish[1,800 to 7,000 ft]", "1,800 to 7,000 ft"),
    ("finish_bracket_bare_line", "Thought: done\nFinish[yes]", "yes"),
    ("action_final_answer_structured", "Action: Final Answer\nAction Input: 42", "42"),
    ("blob_final_answer_action", '{"action": "Final Answer", "action_input": "42"}', "42"),
    ("blob_final_answer_key", '{"thought": "done", "final_answer": "42"}', "42"),
    (
        "blob_final_dict_input",
        '```json\n{"action": "final_answer", "action_input": {"answer": "42"}}\n```',
        "42",
    ),
    ("one_line_final", "Thought: I know. Final Answer: Paris", "Paris"),
    ("whole_reply_fenced_final", "```\nThought: x\nFinal Answer: Paris\n```", "Paris"),
]


@pytest.mark.parametrize(("reply", "answer"), cases(REACT_FINALS))
def test_react_final(reply: str, answer: str) -> None:
    result = parse_react(reply)
    assert isinstance(result, ReactFinal)
    assert result.answer == answer


REACT_THOUGHT_CASES = [
    ("after_marker", "Thought: I need the weather.\nAction: get_weather", "I need the weather."),
    ("text_before_action", "I need the weather.\nAction: get_weather", "I need the weather."),
    ("joined_thoughts", "Thought 1: a\nAction 1: None\nThought 2: b\nFinal Answer: c", "a\nb"),
    (
        "text_before_blob",
        'Let me search.\n```json\n{"action": "search", "action_input": "x"}\n```',
        "Let me search.",
    ),
    (
        "blob_thought_key",
        '{"thought": "from the blob", "action": "search", "action_input": "x"}',
        "from the blob",
    ),
    ("after_skipped_echo", "Observation: old\nThought: new\nAction: search", "new"),
    (
        "think_block_fallback",
        "<think>deep reasoning</think>\nAction: search\nAction Input: x",
        "deep reasoning",
    ),
    ("no_thought", "Action: search\nAction Input: x", ""),
    ("multiline", "Thought: multi\nline thought\nAction: search", "multi\nline thought"),
]


@pytest.mark.parametrize(("reply", "thought"), cases(REACT_THOUGHT_CASES))
def test_react_thought(reply: str, thought: str) -> None:
    assert parse_react(reply).thought == thought


def test_react_results_are_frozen() -> None:
    result = parse_react("Action: search\nAction Input: x")
    with pytest.raises(AttributeError):
        result.tool = "other"  # type: ignore[misc]


REACT_ERROR_CASES = [
    (
        "prose",
        "I think the answer might be Paris, but I'm not sure.",
        "Could not find an Action or a Final Answer.",
    ),
    ("empty", "", "The reply was empty."),
    ("blank", "   \n ", "The reply was empty."),
    (
        "action_none_alone",
        "Thought: nothing to do\nAction: None",
        "'Action: None' was given without a Final Answer",
    ),
    (
        "empty_action",
        "Action:\nAction Input: x",
        "An empty 'Action:' line was given without a Final Answer",
    ),
    ("empty_final", "Thought: done\nFinal Answer:", "The Final Answer was empty."),
    ("empty_finish", "Action: Finish[]", "The Final Answer was empty."),
    (
        "broken_json_blob",
        '{"action": "search", "action_input": "cats"',
        "The JSON action could not be read",
    ),
    (
        "only_observation",
        "Observation: only an echo of a tool result",
        "Could not find an Action or a Final",
    ),
    (
        "input_without_action",
        "Thought: x\nAction Input: y",
        "but no 'Action:' line naming the tool",
    ),
    ("only_think", "<think>Action: search\nAction Input: x</think>", "Could not find an Action"),
]


@pytest.mark.parametrize(("reply", "reason"), cases(REACT_ERROR_CASES))
def test_react_errors_say_what_and_restate_format(reply: str, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_react(reply)
    message = str(info.value)
    assert reason in message
    for line in ("Thought:", "Action:", "Action Input:", "Final Answer:"):
        assert line in message  # the expected format is restated for the model


@pytest.mark.parametrize(("parse", "hint"), [
    (parse_react, "Action:"), (parse_rewoo_plan, "#E1 = Tool[input]"),
    (parse_score, "Score: 5"), (parse_self_ask, "Follow up:"),
])
def test_a_reply_in_no_known_format_is_a_parse_error_that_tells_the_model_the_format(
        parse, hint) -> None:
    """What the paradigms rely on: one exception to catch (never a crash or a made-up result),
    whose message is sent back to the model as the format it should have used."""
    with pytest.raises(ParseError) as info:
        parse("lorem ipsum dolor")
    assert hint in str(info.value)


# ------------------------------------------------------------------------- parse_rewoo_plan

REWOO_PAPER = """\
Plan: Use Google to search for the 2016 Hennessey Performance winner.
#E1 = Google[2016 Hennessey Performance winner]
Plan: Use the LLM to get the name of the winner from the search results.
#E2 = LLM[Who won the 2016 Hennessey Performance given #E1?]
"""


def test_rewoo_paper_format() -> None:
    assert parse_rewoo_plan(REWOO_PAPER) == [
        PlanStep("Use Google to search for the 2016 Hennessey Performance winner.", "#E1",
                 "Google", "2016 Hennessey Performance winner", ()),
        PlanStep("Use the LLM to get the name of the winner from the search results.", "#E2",
                 "LLM", "Who won the 2016 Hennessey Performance given #E1?", ("#E1",)),
    ]  # fmt: skip


REWOO_SINGLE_STEP_CASES = [
    (
        "inline_plan_and_step",
        "Plan: Search for X. #E1 = Search[X]",
        "Search for X.",
        "#E1",
        "Search",
        "X",
    ),
    (
        "wrapped_plan_joined",
        "Plan: Find the\nwinner of the race\nfirst.\n#E1 = Search[winner]",
        "Find the winner of the race first.",
        "#E1",
        "Search",
        "winner",
    ),
    ("parentheses", "#E1 = Search(Python)", "", "#E1", "Search", "Python"),
    ("missing_hash", "E1 = Search[Python]", "", "#E1", "Search", "Python"),
    ("lowercase_var", "#e1 = Search[Python]", "", "#E1", "Search", "Python"),
    ("colon_assignment", "#E1: Search[Python]", "", "#E1", "Search", "Python"),
    (
        "bold_numbered_plan",
        "**Plan 1:** Look it up.\n#E1 = Search[x]",
        "Look it up.",
        "#E1",
        "Search",
        "x",
    ),
    ("step_marker", "Step 1: Look it up.\n#E1 = Search[x]", "Look it up.", "#E1", "Search", "x"),
    (
        "numbered_plan_marker",
        "1. Plan: Look it up.\n#E1 = Search[x]",
        "Look it up.",
        "#E1",
        "Search",
        "x",
    ),
    (
        "nested_brackets",
        "Plan: a\n#E1 = Search[Python [programming language]]",
        "a",
        "#E1",
        "Search",
        "Python [programming language]",
    ),
    (
        "unbalanced_open",
        "Plan: a\n#E1 = LLM[Summarise [the text]",
        "a",
        "#E1",
        "LLM",
        "Summarise [the text",
    ),
    ("unbalanced_close", "Plan: a\n#E1 = Search[a] b]", "a", "#E1", "Search", "a] b"),
    ("quoted_input", 'Plan: a\n#E1 = Search["quoted"]', "a", "#E1", "Search", "quoted"),
    (
        "unclosed_bracket",
        "Plan: a\n#E1 = Search[unclosed input",
        "a",
        "#E1",
        "Search",
        "unclosed input",
    ),
    (
        "multiline_input",
        "Plan: a\n#E1 = LLM[line one\nline two]",
        "a",
        "#E1",
        "LLM",
        "line one\nline two",
    ),
    ("preamble_dropped", "Here is my plan:\n\nPlan: a\n#E1 = Search[x]", "a", "#E1", "Search", "x"),
    ("fenced", "```\nPlan: a\n#E1 = Search[x]\n```", "a", "#E1", "Search", "x"),
    ("two_digit_var", "Plan: a\n#E12 = Search[x]", "a", "#E12", "Search", "x"),
]


@pytest.mark.parametrize(
    ("text", "plan", "var", "tool", "tool_input"), cases(REWOO_SINGLE_STEP_CASES)
)
def test_rewoo_single_step(text: str, plan: str, var: str, tool: str, tool_input: str) -> None:
    [step] = parse_rewoo_plan(text)
    assert (step.plan, step.var, step.tool, step.tool_input) == (plan, var, tool, tool_input)


def test_rewoo_depends_on_whole_tokens_in_order_deduplicated() -> None:
    text = "Plan: a\n#E1 = S[x]\nPlan: b\n#E12 = LLM[Compare #E10, #E1 and #E10 again; #E1x no]"
    assert parse_rewoo_plan(text)[1].depends_on == ("#E10", "#E1")


def test_rewoo_nested_assignment_inside_input_is_not_a_step() -> None:
    steps = parse_rewoo_plan("Plan: a\n#E1 = LLM[explain '#E2 = Search[x]' please]")
    assert [s.var for s in steps] == ["#E1"]


def test_rewoo_unbalanced_input_does_not_swallow_next_step() -> None:
    steps = parse_rewoo_plan("Plan: a\n#E1 = Search[open [bracket\nPlan: b\n#E2 = LLM[y]")
    assert [(s.var, s.tool_input) for s in steps] == [("#E1", "open [bracket"), ("#E2", "y")]


def test_rewoo_duplicate_vars_kept_in_order() -> None:
    steps = parse_rewoo_plan("Plan: a\n#E1 = S[x]\nPlan: b\n#E1 = S[y]")
    assert [(s.var, s.tool_input) for s in steps] == [("#E1", "x"), ("#E1", "y")]


def test_rewoo_plan_lines_between_steps_are_joined_and_trailing_plan_dropped() -> None:
    steps = parse_rewoo_plan("Plan: a\nPlan: b\n#E1 = S[x]\nPlan: Combine everything.")
    assert [s.plan for s in steps] == ["a b"]


def test_rewoo_two_steps_on_one_line() -> None:
    steps = parse_rewoo_plan("Plan: a #E1 = S[x] Plan: b #E2 = T[y]")
    assert [(s.plan, s.tool, s.tool_input) for s in steps] == [("a", "S", "x"), ("b", "T", "y")]


REWOO_ERRORS_CASES = [
    ("prose", "I will search for the answer and then summarise it.", "Could not find any step"),
    (
        "plans_without_steps",
        "Plan: Search for the answer.\nPlan: Summarise it.",
        "Found 'Plan:' lines but no step",
    ),
    ("empty", "", "Could not find any step"),
    ("reference_is_not_a_step", "Plan: use #E1 later", "Found 'Plan:' lines but no step"),
]


@pytest.mark.parametrize(("text", "reason"), cases(REWOO_ERRORS_CASES))
def test_rewoo_errors(text: str, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_rewoo_plan(text)
    assert reason in str(info.value)
    assert "#E1 = <Tool>[<input>]" in str(info.value) and "Plan:" in str(info.value)


RESOLVE_REFS_CASES = [
    ("simple", "Given #E1, answer.", {"#E1": "Paris"}, "Given Paris, answer."),
    ("e10_not_clobbered", "#E1 and #E10", {"#E1": "one", "#E10": "ten"}, "one and ten"),
    ("no_partial_match", "#E10 only", {"#E1": "one"}, "#E10 only"),
    ("single_pass", "#E1 and #E2", {"#E1": "contains #E2", "#E2": "two"}, "contains #E2 and two"),
    ("key_without_hash", "#E1", {"E1": "no hash key"}, "no hash key"),
    ("lowercase_ref", "#e1", {"#E1": "lower"}, "lower"),
    ("unknown_kept", "unknown #E3 stays", {"#E1": "x"}, "unknown #E3 stays"),
    ("word_suffix", "#E1x is not a ref", {"#E1": "x"}, "#E1x is not a ref"),
]


@pytest.mark.parametrize(("text", "evidence", "expected"), cases(RESOLVE_REFS_CASES))
def test_resolve_refs(text: str, evidence: dict[str, str], expected: str) -> None:
    assert resolve_refs(text, evidence) == expected


# --------------------------------------------------------------------------- parse_self_ask

SELF_ASK_PAPER = """\
Question: Who lived longer, Muhammad Ali or Alan Turing?
Are follow up questions needed here: Yes.
Follow up: How old was Muhammad Ali when he died?
Intermediate answer: Muhammad Ali was 74 years old when he died.
Follow up: How old was Alan Turing when he died?
"""


SELF_ASK_CASES = [
    (
        "paper_scratchpad_follow_up",
        SELF_ASK_PAPER,
        FollowUp("How old was Alan Turing when he died?"),
    ),
    (
        "paper_final",
        SELF_ASK_PAPER + "Intermediate answer: 41.\nSo the final answer is: Muhammad Ali",
        SelfAskFinal("Muhammad Ali"),
    ),
    (
        "needed_yes",
        "Are follow up questions needed here: Yes.\nFollow up: Who is X?",
        FollowUp("Who is X?"),
    ),
    (
        "colon_in_question",
        "Follow up: What is the ratio 3:1 used for?",
        FollowUp("What is the ratio 3:1 used for?"),
    ),
    ("no_space_after_colon", "follow up:Who is X?", FollowUp("Who is X?")),
    ("hyphenated", "Follow-up: Who is X?", FollowUp("Who is X?")),
    ("uppercase_spaced_colon", "FOLLOW UP : Who is X?", FollowUp("Who is X?")),
    ("bold", "**Follow up:** Who is X?", FollowUp("Who is X?")),
    ("first_line_only", "Follow up: Who is X?\nI will wait for the answer.", FollowUp("Who is X?")),
    ("last_follow_up", "Follow up: A?\nFollow up: B?", FollowUp("B?")),
    (
        "needed_no_with_final",
        "Are follow up questions needed here: No.\nSo the final answer is: Paris",
        SelfAskFinal("Paris"),
    ),
    ("final_no_space", "So the final answer is:Paris", SelfAskFinal("Paris")),
    ("final_without_colon", "so the final answer is Paris.", SelfAskFinal("Paris.")),
    ("so_the_answer_is", "So the answer is: Paris", SelfAskFinal("Paris")),
    ("final_answer_marker", "Final answer: Paris", SelfAskFinal("Paris")),
    (
        "final_after_unanswered_follow_up",
        "Follow up: A?\nSo the final answer is: Paris",
        SelfAskFinal("Paris"),
    ),
    (
        "follow_up_after_final",
        "So the final answer is: X\nFollow up: Actually, who is Y?",
        FollowUp("Actually, who is Y?"),
    ),
    (
        "final_bounded_by_next_question",
        "So the final answer is: Paris\n\nQuestion: What is next?",
        SelfAskFinal("Paris"),
    ),
    (
        "echoed_stop_marker_is_not_an_answer",
        "Yes.\nFollow up: Who directed Jaws?\nIntermediate answer:",
        FollowUp("Who directed Jaws?"),
    ),
    ("the_final_answer_is", "The final answer is: 42", SelfAskFinal("42")),
    (
        "bold_final",
        "Follow up: A?\nIntermediate Answer: a\nSo the final answer is: **Paris**",
        SelfAskFinal("Paris"),
    ),
]


@pytest.mark.parametrize(("text", "expected"), cases(SELF_ASK_CASES))
def test_self_ask(text: str, expected: FollowUp | SelfAskFinal) -> None:
    assert parse_self_ask(text) == expected


SELF_ASK_ERRORS_CASES = [
    (
        "needed_no_bare_answer",
        "Are follow up questions needed here: No.\nParis.",
        "no follow up questions are needed but gave no final answer line",
    ),
    (
        "needed_yes_no_question",
        "Are follow up questions needed here: Yes.",
        "are needed but asked none",
    ),
    (
        "answered_follow_up",
        "Follow up: A?\nIntermediate answer: a",
        "already has its intermediate answer",
    ),
    ("empty_follow_up", "Follow up:", "has no question"),
    ("empty_final", "So the final answer is:", "followed by no answer"),
    ("prose", "Paris is the capital of France.", "Could not find a 'Follow up:' question"),
    ("empty", "", "Could not find a 'Follow up:' question"),
]


@pytest.mark.parametrize(("text", "reason"), cases(SELF_ASK_ERRORS_CASES))
def test_self_ask_errors(text: str, reason: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_self_ask(text)
    assert reason in str(info.value)
    assert "So the final answer is:" in str(info.value)  # the format is restated


# ---------------------------------------------------------------------- parse_numbered_plan


NUMBERED_PLAN_CASES = [
    ("dot", "1. Search X\n2. Summarise", ["Search X", "Summarise"]),
    ("paren", "1) Search X\n2) Summarise", ["Search X", "Summarise"]),
    ("step_colon", "Step 1: Search X\nStep 2: Summarise", ["Search X", "Summarise"]),
    ("bold_step", "**Step 1:** Search X\n**Step 2.** Summarise", ["Search X", "Summarise"]),
    (
        "heading_step_dash",
        "### Step 1 - Search X\n### Step 2 - Summarise",
        ["Search X", "Summarise"],
    ),
    ("dash_bullets", "- Search X\n- Summarise", ["Search X", "Summarise"]),
    ("star_bullets", "* Search X\n* Summarise", ["Search X", "Summarise"]),
    ("unicode_bullets", "\u2022 Search X\n\u2022 Summarise", ["Search X", "Summarise"]),
    ("json_steps", '{"steps": ["Search X", "Summarise"]}', ["Search X", "Summarise"]),
    ("json_list", '["Search X", "Summarise"]', ["Search X", "Summarise"]),
    (
        "fenced_json",
        'Here it is:\n```json\n{"steps": ["Search X", "Summarise"]}\n```',
        ["Search X", "Summarise"],
    ),
    (
        "json_objects",
        '{"plan": [{"step": "Search X"}, {"description": "Summarise"}]}',
        ["Search X", "Summarise"],
    ),
    ("json_numbered_strings", '["1. Search X", "2. Summarise"]', ["Search X", "Summarise"]),
    (
        "preamble_and_outro",
        "Here is the plan:\n1. Search X\n2. Summarise\n\nLet me know!",
        ["Search X", "Summarise"],
    ),
    ("blank_between", "1. Search X\n\n2. Summarise", ["Search X", "Summarise"]),
    ("empty_item", "1. Search X\n2. \n3. Summarise", ["Search X", "Summarise"]),
    ("duplicates", "1. Search X\n2. search   x\n3. Summarise", ["Search X", "Summarise"]),
    (
        "wrapped_item",
        "1. Search X for\n   the year\n2. Summarise",
        ["Search X for the year", "Summarise"],
    ),
    (
        "sub_bullets_join",
        "1. Search X\n   - in English\n2. Summarise",
        ["Search X in English", "Summarise"],
    ),
    ("bold_text", "1. **Search** X\n2. Summarise", ["Search X", "Summarise"]),
    ("plain_lines", "Plan:\nSearch X\nSummarise\n", ["Search X", "Summarise"]),
    ("crlf", "1. Search X\r\n2. Summarise\r\n", ["Search X", "Summarise"]),
    ("no_space_after_number", "1.Search X\n2)Summarise", ["Search X", "Summarise"]),
    ("decimal_in_step", "1. Convert 3.5 kg\n2. Report", ["Convert 3.5 kg", "Report"]),
]


@pytest.mark.parametrize(("text", "expected"), cases(NUMBERED_PLAN_CASES))
def test_numbered_plan(text: str, expected: list[str]) -> None:
    assert parse_numbered_plan(text) == expected


@pytest.mark.parametrize("text", ["", "   \n\n", '{"steps": []}', "Plan:\n", "1. \n2. "])
def test_numbered_plan_errors(text: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_numbered_plan(text)
    assert "Could not find any plan steps" in str(info.value)
    assert "1. <first step>" in str(info.value)


# ------------------------------------------------------------------------------ parse_score


SCORE_CASES = [
    ("score_fraction", "Score: 7/10", {}, 7.0),
    ("bare", "7", {}, 7.0),
    ("bare_period", "7.", {}, 7.0),
    ("bold", "**8**", {}, 8.0),
    ("rating_decimal", "rating: 6.5", {}, 6.5),
    ("out_of", "I'd give it a 9 out of 10", {}, 9.0),
    ("mt_bench_brackets", "Rating: [[7]]", {}, 7.0),
    ("bold_label", "**Score:** 8", {}, 8.0),
    ("overall_equals", "Overall score = 6", {}, 6.0),
    ("after_reasoning", "The answer is correct and complete.\nScore: 9", {}, 9.0),
    ("thought_label_ignored", "Thought 1: the reasoning holds.\nScore: 8", {}, 8.0),
    ("step_label_ignored", "Step 2 has an error, so I rate it 4", {}, 4.0),
    ("attempt_label_ignored", "Attempt 3 is better. **6/10**", {}, 6.0),
    ("step_inside_label", "Score for Step 2: 7", {}, 7.0),
    ("range_in_parens_ignored", "Score (0-10): 3", {}, 3.0),
    ("scale_phrase_ignored", "On a scale of 1 to 10, I'd give this a 6", {}, 6.0),
    ("other_denominator_rescaled", "Score: 4/5", {}, 8.0),
    ("rescaled_to_unit", "Score: 8/10", {"low": 0, "high": 1}, 0.8),
    ("unit_scale", "0.75", {"low": 0, "high": 1}, 0.75),
    ("percent", "Confidence: 80%", {"low": 0, "high": 1}, 0.8),
    ("negative_range", "Score: -2", {"low": -5, "high": 5}, -2.0),
    ("last_label_wins", "Accuracy score: 6. Style score: 8. Final score: 7", {}, 7.0),
    ("list_numbers_ignored", "1. The answer is right.\n2. It is concise.\nOverall: 9", {}, 9.0),
    ("scored_out_of", "Scored 5 out of 10.", {}, 5.0),
    ("one_to_five", "Rating: 3", {"low": 1, "high": 5}, 3.0),
]


@pytest.mark.parametrize(("text", "kwargs", "expected"), cases(SCORE_CASES))
def test_score(text: str, kwargs: dict[str, float], expected: float) -> None:
    assert parse_score(text, **kwargs) == pytest.approx(expected)


SCORE_ERRORS_CASES = [
    ("above_high", "Score: 12", {}, "The score 12 is outside the range 0 to 10."),
    ("below_low", "Score: 0", {"low": 1, "high": 10}, "The score 0 is outside the range 1 to 10."),
    ("fraction_above", "11/10", {}, "The score 11/10 is outside the range 0 to 10."),
    (
        "rescaled_above",
        "Score: 1/10",
        {"low": 1, "high": 5},
        "The score 1/10 (= 0.5) is outside the range 1 to 5",
    ),
    ("thought_label_only", "Thought 1: this looks fine", {}, "Could not find a score."),
    ("step_labels_only", "Step 2: check. Attempt 3: done.", {}, "Could not find a score."),
    ("no_number", "Excellent work!", {}, "Could not find a score."),
    ("empty", "", {}, "Could not find a score."),
    ("not_applicable", "Score: N/A", {}, "Could not find a score."),
]


@pytest.mark.parametrize(("text", "kwargs", "reason"), cases(SCORE_ERRORS_CASES))
def test_score_errors(text: str, kwargs: dict[str, float], reason: str) -> None:
    with pytest.raises(ParseError) as info:
        parse_score(text, **kwargs)
    assert reason in str(info.value)
    assert "Reply with a single score from" in str(info.value)


def test_score_bad_range_is_a_programming_error() -> None:
    with pytest.raises(ValueError, match="low < high"):
        parse_score("5", low=10, high=0)


def test_react_quoted_answer_object_in_thought_is_not_final() -> None:
    result = parse_react('Thought: the tool gave {"answer": "x"}\nAction: search\nAction Input: y')
    assert isinstance(result, ReactAction) and result.tool == "search"


def test_react_many_braces_stay_linear(monkeypatch) -> None:
    # A reply full of unbalanced braces must not make the JSON scan quadratic: every brace is
    # tried as JSON (which gives up within a few characters), but only a fixed few also as a
    # Python literal, which reads on to the end of the text each time.
    tries: list[bool] = []  # one per brace tried: as a literal too?
    real = common.load_value

    def counted(text, start=0, *, literal=True):
        tries.append(literal)
        return real(text, start, literal=literal)

    monkeypatch.setattr(common, "load_value", counted)
    for reply, braces in (("Thought: " + "{ " * 5000 + "\nFinal Answer: ok", 5000),
                          ("{'a" * 3000 + "\nAnswer: ok", 3000)):
        tries.clear()
        assert parse_react(reply).answer == "ok"  # type: ignore[union-attr]
        assert len(tries) >= braces  # each brace was looked at
        assert sum(tries) <= 50  # read to the end: a fixed number of times, not once a brace
