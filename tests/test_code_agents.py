"""Agents declared in Python (agentlab.code_agents): a module defining agents is imported and
its agents called like functions, sync and async, on the scripted model (tests/fake_openai.py
over real HTTP). Each call is a recorded run with its steps; typed answers are built, a bad
shape is asked again; a session remembers a window of turns; discovery makes read-only admin
rows that chat, compare and evals offer like any agent."""

from __future__ import annotations

import dataclasses
import sys
from types import SimpleNamespace

import pytest
from asgiref.sync import sync_to_async
from django.apps import apps

from agentlab.chat.models import Conversation
from agentlab.code_agents import AgentOutputError, AgentRunFailed, RunningLoopError
from agentlab.code_agents.declaration import REGISTRY
from agentlab.code_agents.rows import DeclarationError, discover, sync_all
from agentlab.models import Agent, ModelProfile
from tests.factories import scripted_profile
from tests.fake_openai import Reply
from tests.sample_agents import agents as sample
from traces.models import Run

pytestmark = pytest.mark.django_db(transaction=True)

TRIP = '{"city": "Rome", "days": 2, "highlights": ["Colosseum", "Trastevere"]}'


@pytest.fixture
def scripted(fake_llm):
    """The "Scripted" profile the sample agents name, on the scripted server."""
    scripted_profile(fake_llm.base_url)
    return fake_llm


def said(request: dict, role: str) -> list[str]:
    return [m["content"] for m in request["messages"] if m["role"] == role]


def test_a_declaration_is_read_from_its_function():
    d = sample.travel_advisor.declaration
    assert d.name == "travel_advisor" and d.paradigm == "react" and d.memory == 2
    assert d.system_prompt == ("You advise travellers. Check the weather before recommending "
                               "anything.")
    assert d.tools == ("get_weather", "packing_tip") and d.limits == {"max_steps": 8}
    line = sample.travel_advisor.__wrapped__.__code__.co_firstlineno
    assert d.code_ref == f"tests/sample_agents/agents.py:{line}"
    assert d.user_message("Is Paris nice?") == "Is Paris nice?"
    trip = sample.plan_trip.declaration
    assert trip.user_message("Rome") == "Plan 3 days in Rome."
    assert trip.output.schema["required"] == ["city", "days", "highlights"]
    assert "JSON schema" in trip.system_prompt and '"highlights"' in trip.system_prompt
    with pytest.raises(TypeError):
        trip.user_message()  # as calling plan_trip() without its city would


def test_a_sync_call_runs_the_agent_and_records_the_run_with_its_steps(scripted):
    scripted.script(Reply(tool_calls=[("get_weather", '{"city": "Paris"}')]),
                    Reply(text="Paris is sunny: go."))
    assert sample.travel_advisor("Is Paris nice?") == "Paris is sunny: go."

    run = Run.objects.get()
    row = Agent.objects.get(name="travel_advisor")
    assert run.agent == row and run.user.username == "code" and run.status == "succeeded"
    assert run.input == "Is Paris nice?" and run.final_answer == "Paris is sunny: go."
    assert list(run.steps.values_list("kind", flat=True)) == ["llm", "tool", "llm", "final"]
    assert run.steps.get(kind="tool").name == "get_weather"
    first = scripted.requests[0]
    assert "You advise travellers." in said(first, "system")[0]
    assert said(first, "user") == ["Is Paris nice?"]
    assert {t["function"]["name"] for t in first["tools"]} == {"get_weather", "packing_tip"}


def test_a_tool_defined_next_to_the_agent_runs(scripted, user):
    scripted.script(Reply(tool_calls=[("packing_tip", '{"city": "Oslo"}')]),
                    Reply(text="Pack an umbrella."))
    result = sample.travel_advisor.as_user(user).run("What do I pack for Oslo?")
    assert result.value == "Pack an umbrella." and result.run_ids == (result.run_id,)
    tool = Run.objects.get(pk=result.run_id).steps.get(kind="tool")
    assert tool.status == "ok" and "Take an umbrella to Oslo." in tool.text
    assert Run.objects.get(pk=result.run_id).user == user


async def test_the_async_form_and_a_clear_error_for_the_sync_form_inside_a_loop(scripted):
    scripted.script(Reply(text="Yes."))
    assert await sample.travel_advisor.acall("Is Paris nice?") == "Yes."
    with pytest.raises(RunningLoopError, match=r"await travel_advisor\.acall"):
        sample.travel_advisor("Is Rome nice?")
    assert await Run.objects.acount() == 1


def test_a_typed_answer_is_built_and_a_bad_shape_is_asked_again(scripted):
    scripted.script(Reply(text="Rome is lovely in spring!"),
                    Reply(text=f"Here it is:\n```json\n{TRIP}\n```"))
    result = sample.plan_trip.run("Rome", days=2)
    assert result.value == sample.Trip("Rome", 2, ["Colosseum", "Trastevere"])
    assert dataclasses.is_dataclass(result.value)
    first, second = Run.objects.order_by("pk")
    assert result.run_ids == (first.pk, second.pk) and result.run_id == second.pk
    assert first.input == second.input == "Plan 2 days in Rome."
    assert "JSON schema" in said(scripted.requests[0], "system")[0]
    # The retry shows the model its answer and what was wrong with it.
    retry = scripted.requests[1]["messages"]
    assert [m["content"] for m in retry if m["role"] == "assistant"] == [
        "Rome is lovely in spring!"]
    assert "the answer is not JSON" in said(scripted.requests[1], "user")[1]


def test_an_answer_that_never_fits_raises_with_every_run_and_the_last_error(scripted):
    scripted.script(Reply(text='{"city": "Rome"}'), Reply(text='{"city": "Rome", "days": "two"}'))
    with pytest.raises(AgentOutputError) as caught:
        sample.plan_trip("Rome")
    runs = list(Run.objects.order_by("pk").values_list("pk", flat=True))
    assert caught.value.run_ids == tuple(runs) and len(runs) == 2  # retries=1
    assert caught.value.run_id == runs[-1] and caught.value.answer == '{"city": "Rome", ' \
                                                                      '"days": "two"}'
    assert "days: 'two' is not of type 'integer'" in caught.value.error
    assert "'days' is a required property" in said(scripted.requests[1], "user")[1]


def test_a_session_remembers_its_last_turns_only(scripted, user, client):
    scripted.script("One.", "Two.", "Three.", "Four.")
    alice = sample.travel_advisor.session("alice", user=user)
    for question in ["Q1", "Q2", "Q3", "Q4"]:
        alice(question)
    # memory=2: the fourth question comes with turns 2 and 3, not 1.
    assert [m["content"] for m in scripted.requests[3]["messages"] if m["role"] != "system"
            ] == ["Q2", "Two.", "Q3", "Three.", "Q4"]
    assert said(scripted.requests[1], "user") == ["Q1", "Q2"]
    conversation = Conversation.objects.get(title="alice", user=user)
    assert conversation.turns.count() == 4 and conversation.agent.name == "travel_advisor"
    client.force_login(user)  # the session is a conversation its owner sees in Chat
    assert "alice" in client.get("/chat/").content.decode()
    assert "Three." in client.get(f"/chat/{conversation.pk}/").content.decode()
    scripted.script("Fresh.")
    sample.travel_advisor.session("bob", user=user)("Q5")  # another session starts empty
    assert said(scripted.last_request, "user") == ["Q5"]


def test_a_run_that_fails_raises_with_its_run(fake_llm):
    profile = scripted_profile("http://127.0.0.1:9/v1")
    assert profile.name == "Scripted"
    with pytest.raises(AgentRunFailed) as caught:
        sample.travel_advisor("Is Paris nice?")
    run = Run.objects.get()
    assert caught.value.run_id == run.pk and caught.value.status == "failed" == run.status
    assert "cannot reach" in caught.value.error


def test_discovery_makes_read_only_rows_the_admin_says_are_code(scripted, client, staff,
                                                                 monkeypatch):
    app = SimpleNamespace(name="tests.sample_agents", module=sys.modules["tests.sample_agents"])
    with monkeypatch.context() as installed:  # tests.sample_agents as the only installed app
        installed.setattr(apps, "get_app_configs", lambda: [app])
        installed.delitem(sys.modules, "tests.sample_agents.agents")
        REGISTRY.pop("travel_advisor")
        discover()  # imports tests/sample_agents/agents.py as it imports an installed app's
    assert "travel_advisor" in REGISTRY and "tests.sample_agents.agents" in sys.modules
    assert {"travel_advisor", "Trip planner"} <= set(sync_all()[0])
    row = Agent.objects.get(name="travel_advisor")
    assert row.code_ref == REGISTRY["travel_advisor"].code_ref
    assert set(row.tools.values_list("name", flat=True)) == {"get_weather", "packing_tip"}

    client.force_login(staff)
    page = client.get(f"/admin/agentlab/agent/{row.pk}/change/").content.decode()
    assert f"Defined in code at {row.code_ref}" in page
    assert 'name="_save"' not in page and "You advise travellers." in page
    assert f"in code at {row.code_ref}" in client.get("/admin/agentlab/agent/").content.decode()
    refused = client.post(f"/admin/agentlab/agent/{row.pk}/change/",
                          {"name": "renamed", "paradigm": "react"})
    assert refused.status_code == 403
    assert client.post(f"/admin/agentlab/agent/{row.pk}/delete/",
                       {"post": "yes"}).status_code == 403
    client.post("/admin/agentlab/agent/", {"action": "delete_selected", "post": "yes",
                                           "_selected_action": [row.pk]})
    row.refresh_from_db()
    assert row.name == "travel_advisor"


def test_a_code_agent_is_offered_by_chat_compare_and_evals(scripted, client, user):
    sync_all()
    client.force_login(user)
    for page in ("/chat/", "/compare/", "/evals/"):
        assert "Trip planner" in client.get(page).content.decode(), page


def test_a_name_taken_in_the_admin_is_refused_with_both_places(scripted):
    Agent.objects.create(name="travel_advisor", paradigm="react",
                         model_profile=ModelProfile.objects.get())
    with pytest.raises(DeclarationError, match="made in the admin"):
        sample.travel_advisor("hi")
    assert not Run.objects.exists()


async def test_a_code_run_shows_replays_and_diffs_like_any_run(scripted, user, client):
    from agentlab.forks.plans import plan_replay
    from agentlab.runs.execution import execute_run

    scripted.script(Reply(tool_calls=[("get_weather", '{"city": "Paris"}')]),
                    Reply(text="Paris is sunny: go."))
    result = await sample.travel_advisor.as_user(user).arun("Is Paris nice?")
    source = await Run.objects.aget(pk=result.run_id)
    plan = await sync_to_async(plan_replay)(source, user, tools="recorded")
    await execute_run(plan.run, prepare=plan.prepare)
    replay = await Run.objects.aget(pk=plan.run.pk)
    assert replay.status == "succeeded" and replay.final_answer == "Paris is sunny: go."
    assert len(scripted.requests) == 2  # the replay was served from the record
    assert "first_divergence" not in replay.agent_snapshot

    await sync_to_async(client.force_login)(user)
    trace = (await sync_to_async(client.get)(f"/runs/{source.pk}/")).content.decode()
    assert "travel_advisor" in trace and "get_weather" in trace
    diff = await sync_to_async(client.get)(f"/runs/diff/?a={source.pk}&b={replay.pk}")
    assert diff.status_code == 200


def test_a_tool_only_code_agents_use_and_this_process_lacks_is_a_warning(scripted):
    from django.core.checks import run_checks

    from agentlab.models import Tool

    profile = ModelProfile.objects.get()
    script_tool, orphan = Tool.objects.create(name="scripts_own_tool"), Tool.objects.create(
        name="vanished_tool")
    coded = Agent.objects.create(name="From a script", paradigm="react", model_profile=profile,
                                 code_ref="scripts/mine.py:3")
    coded.tools.set([script_tool, orphan])
    Agent.objects.create(name="Admin's", paradigm="react", model_profile=profile).tools.set(
        [orphan])
    found = {(m.id, m.obj.name) for m in run_checks() if m.id in ("agentlab.W002",
                                                                  "agentlab.E002")}
    assert found == {("agentlab.W002", "scripts_own_tool"), ("agentlab.E002", "vanished_tool")}


def test_a_code_agent_is_evaluated_like_any_agent(scripted, staff):
    import io

    from django.core.management import call_command

    from agentlab.evals.models import Case, Result, Suite

    sync_all()
    suite = Suite.objects.create(name="Weather")
    Case.objects.create(suite=suite, position=1, question="Is Paris sunny?", expected="sunny",
                        scorer="contains")
    scripted.script("Yes, it is sunny.")
    out = io.StringIO()
    call_command("run_experiment", "Weather", "travel_advisor", stdout=out)
    result = Result.objects.get()
    assert result.passed and result.agent.code_ref and result.run.agent == result.agent
    assert "travel_advisor · case 1 · passed" in out.getvalue()


def test_a_declaration_that_cannot_be_an_agent_is_refused_where_it_is_written():
    from agentlab.code_agents import agent

    with pytest.raises(TypeError, match="at least one parameter"):
        @agent
        def nothing_asked() -> str:
            """You answer."""
    with pytest.raises(TypeError, match="system message"):
        @agent
        def no_docstring(question: str) -> str: ...
    with pytest.raises(TypeError, match="unknown options: max_stepz"):
        agent(max_stepz=3)(lambda question: question)
    with pytest.raises(ValueError, match="two agents are named 'travel_advisor'"):
        @agent(name="travel_advisor")
        def impostor(question: str) -> str:
            """You pretend."""
    bare = agent(lambda question: None, system="You echo.", name="Bare lambda")
    assert bare.declaration.model == "embedded" and bare.declaration.paradigm == "react"
    REGISTRY.pop("Bare lambda")


def test_pydantic_models_typed_dicts_and_lists_are_read_from_json_answers():
    from typing import TypedDict

    from pydantic import BaseModel

    from agentlab.code_agents.output import ShapeError, output_type

    class City(BaseModel):
        name: str
        population: int

    class Pair(TypedDict):
        a: int
        b: int

    assert output_type(City).parse('Sure: {"name": "Oslo", "population": 700000}') == City(
        name="Oslo", population=700000)
    assert output_type(Pair).parse('{"a": 1, "b": 2}') == {"a": 1, "b": 2}
    assert output_type(list[int]).parse("```\n[1, 2, 3]\n```") == [1, 2, 3]
    assert output_type(str).parse("plain words") == "plain words"
    with pytest.raises(ShapeError, match="population: 'many' is not of type 'integer'"):
        output_type(City).parse('{"name": "Oslo", "population": "many"}')
    with pytest.raises(ShapeError, match="not JSON"):
        output_type(list[int]).parse("one, two")
