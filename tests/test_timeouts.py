"""Issue 38: one time-out, one status. A model call that runs out of time (the profile's
timeout_s, 60 s by default) ends the run as the run's own clock (total_timeout_s, also 60 s on
the default agents) does: "timed_out", counted in one dashboard column."""

from __future__ import annotations

import pytest

from agentlab.llm.errors import LLMTimeout
from agentlab.runtime.limits import Limits
from agentlab.runtime.loop import execute
from tests.runtime_pieces import Scripted
from tests.scripted_model import ScriptedModel, make_context


async def test_a_model_call_that_times_out_ends_the_run_as_timed_out() -> None:
    async def body(ctx, task):
        raise LLMTimeout("no answer within 60 s from Scripted")

    ctx, sink = make_context(ScriptedModel([]), limits=Limits(total_timeout_s=60))
    outcome = await execute(Scripted(body), ctx, "q")
    assert outcome.status == "timed_out"
    assert outcome.error == "no answer within 60 s from Scripted"
    assert sink.statuses[-1][0] == "timed_out"


async def test_the_runs_own_clock_gives_the_same_status() -> None:
    import asyncio

    async def body(ctx, task):
        await asyncio.sleep(5)

    ctx, _sink = make_context(ScriptedModel([]), limits=Limits(total_timeout_s=0.2))
    assert (await execute(Scripted(body), ctx, "q")).status == "timed_out"


@pytest.mark.django_db
def test_both_time_outs_are_one_dashboard_column_said_as_timed_out(client, user):
    from traces.models import Run

    Run.objects.create(user=user, agent_name="A", paradigm="react", input="q",
                       status="timed_out", error="no answer within 60 s from Scripted")
    Run.objects.create(user=user, agent_name="A", paradigm="react", input="q",
                       status="timed_out", error="timed out after 60 s")
    client.force_login(user)
    html = client.get("/dashboard/").content.decode()
    cell = html[html.index('data-col="timed_out"'):]
    assert cell[:cell.index("</td>")].endswith(">2</a>")
    assert 'data-col="failed"><' not in html.replace('data-col="failed">0<', "")
    page = client.get("/runs/").content.decode()
    assert page.count(">timed out</span>") == 2 and "stopped by its time limit" not in page
