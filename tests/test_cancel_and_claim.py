"""A cancelled experiment and a worker claiming one of its queued runs at the same moment:
exactly one of them has the run. The database alone decides (a row lock and the run's
start), so this runs on SQLite as well as on PostgreSQL; no worker process is needed, the
claim is the worker job's own function."""

from __future__ import annotations

import pytest
from asgiref.sync import async_to_sync

from agentlab.evals import on_workers, pairs
from agentlab.evals import runner as evals
from agentlab.evals.models import Case, Result, Suite
from agentlab.workers import job
from tests.factories import make_agents, scripted_profile
from traces.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


def queued_pairs(user) -> tuple[int, list[Run]]:
    """An experiment on the workers with two pairs running, each with its queued run."""
    agents = make_agents(scripted_profile("http://127.0.0.1:9/v1"), 1)
    suite = Suite.objects.create(name="Arithmetic")
    for position, question in enumerate(["3 + 4?", "6 * 7?"], 1):
        Case.objects.create(suite=suite, position=position, question=question, expected="7",
                            scorer="numeric")
    experiment = evals.create_experiment(user, suite, agents, concurrency=2)
    pairs.begin(experiment.pk, worker="engine:web")
    filled = on_workers._fill(experiment.pk)  # saved and claimed, not yet handed to the engine
    assert len(filled.runs) == 2
    return experiment.pk, filled.runs


def test_a_run_a_worker_has_claimed_is_not_marked_cancelled_as_if_it_never_ran(user) -> None:
    experiment_id, (claimed, waiting) = queued_pairs(user)
    run, previous = async_to_sync(job.claim)(claimed.pk)
    assert previous is None and run.status == "queued" and run.started_at is not None

    on_workers.cancel_runs(experiment_id)

    # The claimed run is the worker's: it goes on (a cancel reaches it as a control); its pair
    # is settled when it ends, not here.
    run.refresh_from_db()
    assert run.status == "queued" and run.error == ""
    assert Result.objects.get(run=run).status == "running"
    # The run no worker had is cancelled, with its pair; a late claim finds it over.
    waiting.refresh_from_db()
    assert waiting.status == "cancelled" and waiting.error == "cancelled with the experiment"
    result = Result.objects.get(run=waiting)
    assert (result.status, result.error) == ("cancelled", "cancelled before it ran")
    assert async_to_sync(job.claim)(waiting.pk) is None
