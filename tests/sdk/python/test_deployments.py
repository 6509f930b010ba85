"""Deployments and deployment runs through the official SDK with strict validation, on both
stores: CRUD, validation, list filters and pagination, schedules firing (the server's test
clock reads a cron's minute field as seconds, so `*/2 * * * *` fires every two seconds),
pause and unpause, a firing that cannot start (an archived vault: a run with the error, the
deployment paused by it), `sessions.list(deployment_id=…)`, and two replicas on one Postgres
firing each slot exactly once."""

import json
import time
import uuid

import anthropic
import pytest

from conftest import PG_ADMIN, fresh_postgres
from test_files import Mast

# A price for the scripted model, so a deployment may carry a budget.
SERVER_ENV = {"MAST_TEST_CRON_SECONDS": "1",
              "MAST_PRICES": json.dumps({"mast-scripted": {"input": "1000", "output": "2000"}})}

HELLO = [{"type": "user.message", "content": [{"type": "text", "text": "say hi"}]}]


def wait_for(what, cond, timeout=30.0):
    """Polls `cond` until it returns something truthy; fails naming `what` after `timeout`."""
    deadline = time.time() + timeout
    while True:
        got = cond()
        if got:
            return got
        if time.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


def runs_of(client, dep_id, **kw):
    return list(client.beta.deployment_runs.list(deployment_id=dep_id, limit=1000, **kw))


@pytest.fixture
def agent(client):
    return client.beta.agents.create(name="dep-" + uuid.uuid4().hex[:6], model="mast-scripted")


def test_crud_validation_filters_and_pages(client, agent, environment):
    d = client.beta.deployments.create(
        name="nightly", agent=agent.id, environment_id=environment.id, initial_events=HELLO,
        description="d", metadata={"team": "infra"},
        schedule={"type": "cron", "expression": "0 9 * * 1-5", "timezone": "America/Los_Angeles"},
        budget={"type": "limit", "max_list_cost": {"amount": "500", "currency": "USD"}})
    assert d.id.startswith("depl_") and d.status == "active" and d.paused_reason is None
    assert d.agent.id == agent.id and d.agent.version == agent.version
    assert d.schedule.expression == "0 9 * * 1-5" and d.schedule.last_run_at is None
    assert len(d.schedule.upcoming_runs_at) == 5
    assert d.budget.max_list_cost.amount == "500"
    assert client.beta.deployments.retrieve(d.id).name == "nightly"

    # Bad input is a 400 naming the problem, and creates nothing.
    before = len(list(client.beta.deployments.list(limit=100)))
    for bad in [
        dict(schedule={"type": "cron", "expression": "@daily", "timezone": "UTC"}),
        dict(schedule={"type": "cron", "expression": "0 9 * * *", "timezone": "Mars/Olympus"}),
        dict(schedule={"type": "cron", "expression": "0 0 9 * * *", "timezone": "UTC"}),
        dict(initial_events=[]),
        dict(initial_events=[{"type": "system.message", "content": [{"type": "text", "text": "x"}]}]),
        dict(agent={"type": "agent", "id": agent.id}),
        dict(metadata={f"k{i}": "v" for i in range(17)}),
        dict(vault_ids=["vlt_nope"]),
    ]:
        args = dict(name="bad", agent=agent.id, environment_id=environment.id, initial_events=HELLO)
        args.update(bad)
        with pytest.raises((anthropic.BadRequestError, anthropic.NotFoundError)):
            client.beta.deployments.create(**args)
    assert len(list(client.beta.deployments.list(limit=100))) == before

    # Update: tri-state fields, a metadata patch, the schedule cleared.
    u = client.beta.deployments.update(d.id, description=None, metadata={"team": None, "x": "1"}, schedule=None, name="renamed")
    assert u.description is None and u.metadata == {"x": "1"} and u.schedule is None and u.name == "renamed"
    with pytest.raises(anthropic.BadRequestError):
        client.beta.deployments.update(d.id, name=None)

    # Pause and unpause.
    p = client.beta.deployments.pause(d.id)
    assert p.status == "paused" and p.paused_reason.type == "manual"
    assert [x.id for x in client.beta.deployments.list(status="paused")] == [d.id]
    assert d.id not in [x.id for x in client.beta.deployments.list(status="active")]
    a = client.beta.deployments.unpause(d.id)
    assert a.status == "active" and a.paused_reason is None

    # Pagination, newest first, and the agent filter.
    others = [client.beta.deployments.create(name=f"p{i}", agent=agent.id, environment_id=environment.id,
                                            initial_events=HELLO) for i in range(3)]
    page = client.beta.deployments.list(agent_id=agent.id, limit=2)
    assert [x.id for x in page.data] == [others[2].id, others[1].id]
    assert [x.id for x in page.get_next_page().data] == [others[0].id, d.id]
    assert list(client.beta.deployments.list(agent_id="agent_nope")) == []

    # Archive: gone from the default list, still retrievable, takes no changes.
    ar = client.beta.deployments.archive(d.id)
    assert ar.archived_at is not None and ar.status == "active"
    assert d.id not in [x.id for x in client.beta.deployments.list(limit=100)]
    assert d.id in [x.id for x in client.beta.deployments.list(include_archived=True, limit=100)]
    with pytest.raises(anthropic.BadRequestError):
        client.beta.deployments.update(d.id, name="again")
    with pytest.raises(anthropic.BadRequestError):
        client.beta.deployments.run(d.id)
    with pytest.raises(anthropic.BadRequestError):
        client.beta.deployments.list(status="paused", include_archived=True)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.deployments.retrieve("depl_nope")
    with pytest.raises(anthropic.NotFoundError):
        client.beta.deployment_runs.retrieve("drun_nope")


def test_manual_run_starts_a_session_listed_by_deployment(client, agent, environment):
    d = client.beta.deployments.create(name="manual", agent=agent.id, environment_id=environment.id, initial_events=HELLO)
    r = client.beta.deployments.run(d.id)
    assert r.trigger_context.type == "manual" and r.error is None and r.session_id
    assert client.beta.deployment_runs.retrieve(r.id).session_id == r.session_id
    s = client.beta.sessions.retrieve(r.session_id)
    assert s.deployment_id == d.id
    assert [x.id for x in client.beta.sessions.list(deployment_id=d.id)] == [r.session_id]
    assert list(client.beta.sessions.list(deployment_id="depl_nope")) == []
    # The initial events started a turn that the scripted model answers.
    wait_for("the session's turn", lambda: client.beta.sessions.retrieve(r.session_id).status == "idle"
             and any(e.type == "agent.message" for e in client.beta.sessions.events.list(r.session_id)))
    assert runs_of(client, d.id, trigger_type="manual")[0].id == r.id
    assert runs_of(client, d.id, trigger_type="schedule") == []
    assert runs_of(client, d.id, has_error=True) == []
    assert list(client.beta.deployment_runs.list(deployment_id="depl_nope")) == []
    # A manual run never records a last scheduled run.
    assert client.beta.deployments.retrieve(d.id).schedule is None
    client.beta.deployments.archive(d.id)



def test_a_deployment_can_start_an_outcome(client, agent, environment):
    # The scripted model reads the outcome's description as its script and the rubric's
    # `grade` lines as the grader's verdicts.
    outcome = {"type": "user.define_outcome", "description": "say Report written.",
               "rubric": {"type": "text", "content": "grade satisfied Report is complete."}, "max_iterations": 2}
    d = client.beta.deployments.create(name="graded", agent=agent.id, environment_id=environment.id,
                                       initial_events=[outcome])
    assert d.initial_events[0].type == "user.define_outcome"
    r = client.beta.deployments.run(d.id)
    assert r.error is None and r.session_id
    done = wait_for("the graded session", lambda: (s := client.beta.sessions.retrieve(r.session_id)).status == "idle"
                    and s.outcome_evaluations and s.outcome_evaluations[0].result == "satisfied" and s)
    assert done.outcome_evaluations[0].explanation == "Report is complete."
    # Two outcomes cannot start one session: refused when the deployment is saved.
    with pytest.raises(anthropic.BadRequestError):
        client.beta.deployments.create(name="two", agent=agent.id, environment_id=environment.id,
                                       initial_events=[outcome, outcome])
    client.beta.deployments.archive(d.id)

def test_schedule_fires_pauses_and_resumes(client, agent, environment):
    d = client.beta.deployments.create(
        name="every-2s", agent=agent.id, environment_id=environment.id, initial_events=HELLO,
        schedule={"type": "cron", "expression": "*/2 * * * *", "timezone": "Europe/Paris"})
    try:
        runs = wait_for("two scheduled runs", lambda: (lambda r: r if len(r) >= 2 else None)(
            runs_of(client, d.id, trigger_type="schedule")))
        slots = [r.trigger_context.scheduled_at for r in runs]
        assert len(set(slots)) == len(slots), "one run per slot"
        assert all(s.second % 2 == 0 and s.microsecond == 0 for s in slots)
        assert all(r.session_id and r.error is None for r in runs)
        sessions = {s.id for s in client.beta.sessions.list(deployment_id=d.id, limit=100)}
        assert {r.session_id for r in runs} <= sessions
        assert client.beta.deployments.retrieve(d.id).schedule.last_run_at is not None

        p = client.beta.deployments.pause(d.id)
        assert p.schedule.upcoming_runs_at, "a paused schedule still shows what it would do"
        settled = len(runs_of(client, d.id))
        time.sleep(4)  # two slots pass while paused: proving an absence takes the time
        assert len(runs_of(client, d.id)) == settled, "a paused deployment does not fire"

        client.beta.deployments.unpause(d.id)
        wait_for("a run after unpausing", lambda: len(runs_of(client, d.id)) > settled)
    finally:
        client.beta.deployments.archive(d.id)
    assert client.beta.deployments.retrieve(d.id).schedule.upcoming_runs_at == []


def test_a_firing_that_cannot_start_records_the_error_and_pauses(client, agent, environment):
    vault = client.beta.vaults.create(display_name="v-" + uuid.uuid4().hex[:6])
    d = client.beta.deployments.create(name="vaulted", agent=agent.id, environment_id=environment.id,
                                       initial_events=HELLO, vault_ids=[vault.id])
    client.beta.vaults.archive(vault.id)

    # On demand: a 200 with the run's error; a manual run does not pause.
    r = client.beta.deployments.run(d.id)
    assert r.session_id is None and r.error.type == "vault_archived_error" and vault.id in r.error.message
    assert client.beta.deployments.retrieve(d.id).status == "active"

    # Scheduled: the run's error pauses the deployment with the SDK's paused reason.
    client.beta.deployments.update(d.id, schedule={"type": "cron", "expression": "* * * * *", "timezone": "UTC"})
    paused = wait_for("the auto-pause", lambda: (lambda x: x if x.status == "paused" else None)(
        client.beta.deployments.retrieve(d.id)))
    assert paused.paused_reason.type == "error"
    assert paused.paused_reason.error.type == "vault_archived_error"
    failed = runs_of(client, d.id, has_error=True, trigger_type="schedule")
    assert len(failed) == 1 and failed[0].error.type == "vault_archived_error"
    assert runs_of(client, d.id, has_error=False) == []
    assert list(client.beta.sessions.list(deployment_id=d.id)) == []
    # Fixing the definition and unpausing lets it start sessions again.
    client.beta.deployments.update(d.id, vault_ids=[])
    client.beta.deployments.unpause(d.id)
    wait_for("a successful run", lambda: runs_of(client, d.id, has_error=False))
    client.beta.deployments.archive(d.id)


@pytest.mark.skipif(not PG_ADMIN, reason="Postgres: set MAST_TEST_DATABASE_URL")
def test_two_replicas_fire_each_slot_exactly_once(messages_api):
    url = fresh_postgres()
    env = dict(SERVER_ENV, ANTHROPIC_BASE_URL=messages_api, ANTHROPIC_API_KEY="test")
    a = Mast("postgres", env, database_url=url)
    b = Mast("postgres", env, database_url=url)
    try:
        c = a.client
        agent = c.beta.agents.create(name="replicated", model="mast-scripted")
        environment = c.beta.environments.create(name="e-" + uuid.uuid4().hex[:6],
                                                 config={"type": "cloud", "networking": {"type": "unrestricted"}})
        d = c.beta.deployments.create(name="every-second", agent=agent.id, environment_id=environment.id,
                                      initial_events=HELLO,
                                      schedule={"type": "cron", "expression": "* * * * *", "timezone": "UTC"})
        wait_for("six scheduled runs", lambda: len(runs_of(c, d.id)) >= 6)
        c.beta.deployments.pause(d.id)

        def settled():
            # A firing claimed just before the pause may still be recording its run.
            runs = runs_of(b.client, d.id)
            sessions = sorted(s.id for s in b.client.beta.sessions.list(deployment_id=d.id, limit=100))
            return runs if sessions == sorted(r.session_id for r in runs) else None

        # Both replicas see the same runs; each slot has one run and one session.
        runs = wait_for("every session to have its run", settled)
        slots = [r.trigger_context.scheduled_at for r in runs]
        assert len(set(slots)) == len(slots), "a slot fired twice"
        assert all(r.session_id and r.error is None for r in runs)
    finally:
        a.stop()
        b.stop()
