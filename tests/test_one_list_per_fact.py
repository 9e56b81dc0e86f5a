"""One list per fact (traces/schema.py): the run statuses and the run totals are defined once,
and every place that repeats them for a run carries each of them."""

from __future__ import annotations

import pytest
from asgiref.sync import sync_to_async

from agentlab.live.consumers import run_state
from agentlab.runs import recorder
from agentlab.runtime.limits import Totals
from tests.instrumented import json_bytes
from tests.otel_fixtures import make_plan_run
from traces.bundle import export_bundle
from traces.display import labels
from traces.models import Run
from traces.otel.importer import import_file
from traces.otel.spans import run_info
from traces.otlp import export_otlp
from traces.schema import FINISHED_STATUSES, RUN_STATUSES, RUN_TOTALS

# The runtime's own timings: what the model and the tools took of the wall time, and the wait
# for a busy model's turn. They travel with the run's last status (bench figures) but a run does
# not keep them.
TIMINGS = {"model_ms", "tool_ms", "queued_ms"}


def test_the_pages_have_words_for_exactly_the_run_statuses():
    assert set(labels.STATUS_WORDS) == set(labels.STATUS_HELP) == set(RUN_STATUSES)


def test_the_runtime_counts_exactly_the_run_totals():
    assert set(Totals().as_dict()) == set(RUN_TOTALS) | TIMINGS


@pytest.mark.parametrize("name", RUN_TOTALS)
def test_a_run_keeps_each_total_in_a_column_of_its_name(name):
    field = Run._meta.get_field(name)
    assert field.concrete and field.column == name


@pytest.mark.django_db(transaction=True)
async def test_every_copy_of_a_runs_totals_carries_each_of_them(user):
    """The status write stores each total the runtime sends; the socket's state, a bundle and
    an OTLP root span each carry all of them."""
    counted = {name: n for n, name in enumerate(RUN_TOTALS, start=1)}  # all different, none 0
    run = await Run.objects.acreate(user=user, input="q", status="running")
    await sync_to_async(recorder.save_status)(
        run.pk, "succeeded", {"answer": "a", "totals": Totals(**counted).as_dict()})
    run = await Run.objects.aget(pk=run.pk)
    assert {name: getattr(run, name) for name in RUN_TOTALS} == counted
    assert (await run_state(run.pk))["totals"] == counted
    assert (await sync_to_async(run_info)(run)).totals == counted
    bundle = await sync_to_async(export_bundle)(run)
    assert bundle["run"]["totals"] == counted


@pytest.mark.django_db
@pytest.mark.parametrize("status", FINISHED_STATUSES)
def test_an_otlp_export_comes_back_with_its_finished_status(status, user, other_user):
    run = make_plan_run(user)
    Run.objects.filter(pk=run.pk).update(status=status)
    run.refresh_from_db()
    steps = [s.to_record() for s in run.steps.order_by("seq")]
    (copy,) = import_file(json_bytes(export_otlp(run, steps)), user=other_user)
    assert copy.status == status
