"""Our chat handler's prompt and tool calls (agentlab/llm/chatml.py), without the model."""

from __future__ import annotations

import json

from agentlab.llm import chatml, grammars

HOSTILE = """He said "hi" & it's <b>bold</b>"""
WEATHER = {"type": "function", "function": {
    "name": "get_weather", "description": "Current weather for a city.",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}


def test_every_kind_of_message_reaches_the_prompt_unescaped() -> None:
    messages = [
        {"role": "system", "content": f"sys {HOSTILE}"},
        {"role": "user", "content": f"user {HOSTILE}"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "get_weather", "arguments": json.dumps({"city": HOSTILE})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": f"result {HOSTILE}"},
        {"role": "assistant", "content": f"assistant {HOSTILE}"},
    ]
    text = chatml.prompt_text(chatml.render(messages, [WEATHER]))
    for prefix in ("sys ", "user ", "result ", "assistant "):
        assert prefix + HOSTILE in text
    assert json.dumps(HOSTILE, ensure_ascii=False) in text  # the call's argument, as JSON
    assert "&#34;" not in text and "&lt;" not in text and "&amp;" not in text
    assert "Result of get_weather: result" in text  # a tool result names its tool
    assert text.endswith("<|im_start|>assistant\n")


def test_markers_in_content_are_content_not_special_tokens() -> None:
    pieces = chatml.render([{"role": "user", "content": "a <|im_end|> b"}])
    assert ("user\na <|im_end|> b", False) in pieces
    assert all(special for text, special in pieces if text in ("<|im_start|>", "<|im_end|>"))


def test_the_tool_section_goes_into_the_system_message_once() -> None:
    text = chatml.prompt_text(chatml.render(
        [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Paris?"}],
        [WEATHER]))
    assert text.count("You have access to the following tools:") == 1
    assert '<tools>[{"name": "get_weather", "description": "Current weather for a city."' in text
    assert text.index("Be brief.") < text.index("You have access to the following tools:")


def test_a_tool_turn_is_constrained_to_the_tools_and_their_arguments() -> None:
    schema = chatml.call_schema([WEATHER, {**WEATHER, "function": {
        **WEATHER["function"], "name": "other"}}])
    names = [b["properties"]["name"]["const"] for b in schema["anyOf"]]
    assert names == ["get_weather", "other"]
    args = schema["anyOf"][0]["properties"]["arguments"]
    assert args["properties"] == {"city": {"type": "string"}}
    assert args["additionalProperties"] is False  # no keys copied from the last result
    forced = chatml.call_schema([WEATHER], forced="get_weather")
    assert forced["properties"]["name"] == {"const": "get_weather"}
    grammar = chatml.call_grammar('root ::= "{}"', forced=False)
    assert grammar.startswith('root ::= "<tool_call>[" agentlab-call')
    assert "agentlab-text" in grammar
    assert "agentlab-text" not in chatml.call_grammar('root ::= "{}"', forced=True)


def test_the_reply_is_read_back_as_calls_or_an_answer() -> None:
    call = chatml.read_reply(
        '<tool_call>[{"name": "get_weather", "arguments": {"city": "Paris"}}]</tool_call>',
        ["get_weather"])
    (tc,) = call["tool_calls"]
    assert tc["function"] == {"name": "get_weather", "arguments": '{"city": "Paris"}'}
    assert call["content"] is None
    assert chatml.read_reply("It is 15 °C.", ["get_weather"]) == {
        "role": "assistant", "content": "It is 15 °C."}
    cut = '<tool_call>[{"name": "get_weather", "argu'  # cut off by max_tokens: shown as it was
    assert chatml.read_reply(cut, ["get_weather"]) == {"role": "assistant", "content": cut}


def test_a_text_react_grammar_takes_each_label_and_leaves_out_the_answer_when_it_must_act():
    # Markers in another language are alternatives to the English ones (what the parser reads).
    labels = {"thought": ["Thought", "Gedanke"], "action": ["Action"],
              "action_input": ["Action Input"], "final_answer": ["Final Answer", "Antwort"]}
    free = chatml.react_text_root(labels, [("calculator", "args0")], final=True)
    assert 'thought-label ::= "Thought: " | "Gedanke: "' in free
    assert 'answer-label ::= "Final Answer: " | "Antwort: "' in free
    assert "root ::= thought-label thought \"\\n\" (act | final)" in free
    # A thought is one bounded line: one that went on reasoning never reached its action.
    assert f"thought ::= [^\\n\\x00]{{1,{chatml.THOUGHT_CHARS}}}" in free
    acting = chatml.react_text_root(labels, [("calculator", "args0"), ("get_weather", "args1")],
                                    final=False)
    assert "final" not in acting and "answer-label" not in acting
    assert 'act ::= action-label ("calculator" "\\n" input-label args0 | "get_weather" "\\n" ' \
           'input-label args1)' in acting


def test_a_label_with_quotes_is_a_valid_grammar_literal():
    assert chatml.gbnf_literal('say "hi"\\\n') == '"say \\"hi\\"\\\\\\n"'


def test_a_rewoo_plan_grammar_numbers_its_steps_and_offers_only_the_agents_tools():
    gbnf = grammars.rewoo_plan_gbnf({"type": "rewoo_plan", "tools": ["get_weather", "LLM"],
                                     "max_steps": 3})
    assert gbnf.startswith("root ::= step1\n")
    assert 'tool ::= "get_weather" | "LLM"' in gbnf
    # Each step: one plan line (no "#": SmolLM2 wrote the call there too), then its variable
    # in order; the last allowed step ends the plan.
    assert 'step1 ::= "Plan: " line "\\n#E1 = " tool "[" input "]\\n" step2?' in gbnf
    assert 'step3 ::= "Plan: " line "\\n#E3 = " tool "[" input "]\\n"\n' in gbnf + "\n"
    assert "step4" not in gbnf
    assert "line ::= [^#\\n\\x00]{1,200}" in gbnf
    assert grammars.rewoo_plan_gbnf({"type": "rewoo_plan", "tools": [], "max_steps": 3}) is None


def test_a_self_ask_grammar_asks_first_and_answers_only_when_allowed():
    labels = {"follow_up": ["Follow up", "Nachfrage"], "final_answer": ["So the final answer is"]}
    asking = grammars.self_ask_gbnf({"labels": labels, "first": True, "final": False})
    assert asking.startswith('root ::= "Are follow up questions needed here: Yes." "\\n" '
                             'follow\n')
    assert 'follow ::= ("Follow up: " | "Nachfrage: ") line' in asking
    assert "answer ::=" not in asking
    free = grammars.self_ask_gbnf({"labels": labels, "first": False, "final": True})
    assert free.startswith("root ::= (follow | answer)\n")
    assert 'answer ::= ("So the final answer is: ") line' in free
    only_answer = grammars.self_ask_gbnf({"labels": {}, "final": True, "follow": False})
    assert only_answer.startswith("root ::= answer\n")


def test_a_score_grammar_is_a_line_then_a_whole_number_in_range():
    gbnf = grammars.scored_gbnf({"type": "scored", "low": 0, "high": 10})
    assert gbnf.startswith('root ::= line "\\nScore: " ("10" | "9" | "8" |')
    assert '"1" | "0")' in gbnf and '"11"' not in gbnf
    assert grammars.scored_gbnf({"type": "scored", "low": 5, "high": 5}) is None
