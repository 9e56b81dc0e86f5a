"""The LLM playground: a recorded llm step edited and run again against a model profile (the
scripted OpenAI-compatible server), the new reply shown beside the recorded one."""

from __future__ import annotations

import json

import pytest
from django.urls import reverse
from django.utils import timezone

from agentlab.models import ModelProfile
from tests.fake_openai import Fail, Reply
from traces.models import Run, Step

pytestmark = pytest.mark.django_db(transaction=True)

MESSAGES = [{"role": "system", "content": "You add numbers."},
            {"role": "user", "content": "What is 2+2?"}]


@pytest.fixture
def profile(fake_llm):
    return ModelProfile.objects.create(name="Scripted", base_url=fake_llm.base_url,
                                       model="scripted-model", retries=0)


@pytest.fixture
def llm_step(user, profile):
    run = Run.objects.create(user=user, input="What is 2+2?", status="succeeded")
    now = timezone.now()
    step = Step.objects.create(
        run=run, seq=1, kind="llm", name="scripted-model", started_at=now,
        input={"messages": MESSAGES, "tools": None, "tool_choice": None, "response_format": None,
               "stop": None, "temperature": 0.2, "max_tokens": None},
        output={"text": "It is five.", "tool_calls": [], "model": "scripted-model",
                "usage": {"prompt_tokens": 12, "completion_tokens": 3}},
        text="It is five.", meta={"profile": "Scripted"})
    Step.objects.create(run=run, seq=2, kind="final", text="It is five.", started_at=now)
    return step


def url(step: Step, seq: int | None = None) -> str:
    return reverse("step_playground", args=[step.run_id, seq or step.seq])


def test_the_page_shows_the_recorded_request_as_editable_json(client, user, llm_step):
    client.force_login(user)
    page = client.get(url(llm_step))
    assert page.status_code == 200
    html = page.content.decode()
    assert "You add numbers." in html and "It is five." in html
    assert '<option value="Scripted" selected>' in html
    assert "&quot;temperature&quot;: 0.2" in html


def test_an_edited_request_runs_again_and_shows_both_replies(client, user, llm_step, fake_llm):
    client.force_login(user)
    fake_llm.script(Reply(text="It is four.", usage=(20, 4)))
    edited = [MESSAGES[0], {"role": "user", "content": "What is 2+2? Think first."}]
    page = client.post(url(llm_step), {"messages": json.dumps(edited),
                                       "params": '{"temperature": 0}', "profile": "Scripted"})
    html = page.content.decode()
    assert page.status_code == 200 and "It is four." in html and "It is five." in html
    assert "20 in / 4 out" in html
    sent = fake_llm.last_request
    assert sent["messages"][-1]["content"] == "What is 2+2? Think first."
    assert sent["temperature"] == 0
    assert Run.objects.count() == 1  # the playground records no run


@pytest.mark.parametrize(("messages", "params", "error"), [
    ("[{oops", "{}", "messages: not valid JSON (Expecting property name enclosed in double "
                     "quotes: line 1 column 3 (char 2))"),
    ('{"role": "user"}', "{}", "messages: must be a JSON list"),
    ('[{"content": "hi"}]', "{}", "every message must be an object with a &quot;role&quot;"),
    (json.dumps(MESSAGES), '{"temprature": 1}', "parameters: unknown key(s) temprature"),
    (json.dumps(MESSAGES), "[1]", "parameters: must be a JSON object"),
])
def test_bad_input_is_explained_on_the_page(client, user, llm_step, fake_llm, messages, params,
                                            error):
    client.force_login(user)
    page = client.post(url(llm_step), {"messages": messages, "params": params,
                                       "profile": "Scripted"})
    assert page.status_code == 400 and error in page.content.decode()
    assert fake_llm.requests == []
    assert messages.replace('"', "&quot;") in page.content.decode()  # the input is kept


def test_a_failing_endpoint_is_explained_on_the_page(client, user, llm_step, fake_llm):
    client.force_login(user)
    fake_llm.script(Fail.unknown_model("scripted-model"))
    page = client.post(url(llm_step), {"messages": json.dumps(MESSAGES), "params": "{}",
                                       "profile": "Scripted"})
    assert page.status_code == 400
    assert "the model call failed: unknown model" in page.content.decode()


def test_an_unknown_profile_is_refused(client, user, llm_step):
    client.force_login(user)
    page = client.post(url(llm_step), {"messages": json.dumps(MESSAGES), "params": "{}",
                                       "profile": "Nope"})
    assert page.status_code == 400 and "model profile: choose one of Scripted" in \
        page.content.decode()


def test_only_llm_steps_of_visible_runs_open(client, user, other_user, llm_step):
    client.force_login(user)
    assert client.get(url(llm_step, 2)).status_code == 404  # the final step
    assert client.get(url(llm_step, 9)).status_code == 404
    client.force_login(other_user)
    assert client.get(url(llm_step)).status_code == 404
    assert client.post(url(llm_step), {"messages": "[]"}).status_code == 404
