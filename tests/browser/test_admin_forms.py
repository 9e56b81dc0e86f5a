"""The admin as a newcomer meets it, in real Chromium: an agent's paradigm is a choice, its
parameters a form generated from the paradigm's schema (only the chosen paradigm's shown, with
defaults and help), checked on save; the Tools list says that tools are defined in code and
how one is added."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from agentlab.models import Agent, ModelProfile
from tests.browser_fixtures import log_in

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def admin_page(browser_page, live_url, staff):
    log_in(browser_page, live_url, "root", "pw-root-123")
    return browser_page


def test_an_agents_paradigm_and_parameters_are_a_form(admin_page, live_url):
    page = admin_page
    ModelProfile.objects.create(name="Local", model="m")
    page.goto(f"{live_url}/admin/agentlab/agent/add/")
    paradigm = page.locator("select#id_paradigm")
    expect(paradigm.locator("option[value=reflexion]")).to_have_text("Reflexion (reflexion)")
    paradigm.select_option("reflexion")
    reflexion = page.locator("fieldset.paradigm-reflexion")
    expect(reflexion).to_be_visible()
    expect(page.locator("fieldset.paradigm-react")).to_be_hidden()
    attempts = page.locator("#id_param__reflexion__max_attempts")
    expect(attempts).to_have_value("3")  # the schema's default
    expect(reflexion).to_contain_text("Score (1-10) an attempt needs to pass.")
    expect(page.locator("#id_param__reflexion__evaluator option")).to_have_text(
        ["llm", "contains", "regex"])
    expect(page.locator("textarea[name=params]")).to_have_count(0)  # no raw JSON box

    page.fill("#id_name", "Checked agent")
    page.select_option("#id_model_profile", label="Local")
    page.select_option("#id_param__reflexion__evaluator", "contains")  # needs "expected"
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".errornote, .errorlist").first).to_be_visible()
    expect(page.locator("body")).to_contain_text("expected")
    assert not Agent.objects.filter(name="Checked agent").exists()

    page.fill("#id_param__reflexion__expected", "Paris")
    page.fill("#id_param__reflexion__max_attempts", "2")
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.locator(".messagelist .success")).to_be_visible()
    agent = Agent.objects.get(name="Checked agent")
    assert agent.paradigm == "reflexion"
    assert agent.params["max_attempts"] == 2 and agent.params["expected"] == "Paris"
    assert agent.params["memory_size"] == 3  # left blank: the default

    page.goto(f"{live_url}/admin/agentlab/agent/{agent.pk}/change/")
    expect(page.locator("#id_param__reflexion__max_attempts")).to_have_value("2")
    assert page.js_errors == []


def test_the_tools_list_says_tools_are_defined_in_code(admin_page, live_url):
    page = admin_page
    page.goto(f"{live_url}/admin/agentlab/tool/")
    note = page.locator("#tools-defined-in-code")
    expect(note).to_contain_text("Tools are defined in Python code")
    expect(note).to_contain_text("docs/TOOLS.md")
    expect(page.locator(".object-tools a.addlink")).to_have_count(0)
    assert page.js_errors == []
