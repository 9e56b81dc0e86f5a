"""How the gateway reads a request (pure): which earlier reply a conversation continues, and
what a client may send. No database, no server."""

from __future__ import annotations

import pytest

from agentlab.gateway.grouping import (
    conversation_keys,
    normal,
    prefix_keys,
    reply_key,
    tool_results,
    trace_id,
    turn_key,
)
from agentlab.gateway.protocol import GatewayError, parse_chat

ASKED = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather?"}]
REPLY = {"role": "assistant", "content": None, "tool_calls": [
    {"id": "call_1", "type": "function",
     "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]}


def test_a_request_continues_the_reply_it_extends_however_the_client_wrote_it_down():
    key = turn_key(ASKED, REPLY)
    resent = {"role": "assistant", "content": "", "refusal": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": '{ "city":"Paris" }'}}]}
    later = [{"role": "system", "content": [{"type": "text", "text": "Be brief."}]},
             {"role": "user", "content": "Weather?"}, resent,
             {"role": "tool", "tool_call_id": "call_1", "content": "sunny"}]
    assert prefix_keys(later)[0] == (3, key)
    assert tool_results(later) == [(3, "call_1", "sunny")]


def test_what_a_reply_said_is_part_of_its_key():
    other = {**REPLY, "tool_calls": [{**REPLY["tool_calls"][0], "id": "call_2"}]}
    assert turn_key(ASKED, REPLY) != turn_key(ASKED, other)
    assert normal(REPLY) != normal({**REPLY, "content": "Let me look."})


def test_the_longest_continued_prefix_comes_first():
    talk = [*ASKED, {"role": "assistant", "content": "Sunny."},
            {"role": "user", "content": "And tomorrow?"},
            {"role": "assistant", "content": "Rain."}, {"role": "user", "content": "Thanks"}]
    assert [end for end, _ in prefix_keys(talk)] == [5, 3]


def test_one_pass_gives_the_keys_a_request_continues_and_the_one_its_reply_leaves():
    talk = [*ASKED, {"role": "assistant", "content": "Sunny."},
            {"role": "user", "content": "And tomorrow?"}]
    prefixes, whole = conversation_keys(talk)
    assert prefixes == prefix_keys(talk)
    reply = {"role": "assistant", "content": "Rain."}
    assert reply_key(whole, reply) == turn_key(talk, reply)
    assert prefix_keys([*talk, reply])[0] == (5, reply_key(whole, reply))


def test_an_edited_request_is_keyed_by_what_it_says_now():
    chat = parse_chat({"model": "m", "messages": ASKED})
    chat.keys = conversation_keys(chat.messages)
    edited = chat.with_fields({"messages": [*ASKED, {"role": "user", "content": "Now?"}],
                               "temperature": 0.5})
    assert edited.keys is None and edited.temperature == 0.5 and edited.model == "m"


@pytest.mark.parametrize(("header", "found"), [
    ("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
     "4bf92f3577b34da6a3ce929d0e0e4736"),
    ("00-00000000000000000000000000000000-00f067aa0ba902b7-01", None),  # invalid: all zero
    ("not a traceparent", None), (None, None)])
def test_a_traceparent_gives_its_trace_id(header, found):
    assert trace_id(header) == found


@pytest.mark.parametrize(("body", "says"), [
    ([], "JSON object"),
    ({"messages": [{"role": "user", "content": "x"}]}, "'model' is required"),
    ({"model": "m", "messages": []}, "non-empty list"),
    ({"model": "m", "messages": [{"role": "robot"}]}, "messages[0]"),
    ({"model": "m", "messages": [{"role": "user"}], "temperature": "hot"}, "'temperature'"),
    ({"model": "m", "messages": [{"role": "user"}], "max_tokens": 0}, "'max_tokens'"),
    ({"model": "m", "messages": [{"role": "user"}], "frobnicate": True}, "frobnicate"),
])
def test_a_request_that_makes_no_sense_is_refused_naming_what(body, says):
    with pytest.raises(GatewayError, match=None) as refused:
        parse_chat(body)
    assert says in refused.value.message and refused.value.status == 400


def test_parameters_the_profile_does_not_own_pass_through():
    chat = parse_chat({"model": "m", "messages": [{"role": "user", "content": "x"}],
                       "seed": 7, "top_p": 0.5, "stop": "END", "max_completion_tokens": 20,
                       "stream": True, "stream_options": {"include_usage": True}})
    assert chat.extra == {"seed": 7, "top_p": 0.5}
    assert (chat.stop, chat.max_tokens, chat.stream, chat.include_usage) == (["END"], 20, True,
                                                                              True)
    assert chat.recorded()["params"] == {"seed": 7, "top_p": 0.5}
