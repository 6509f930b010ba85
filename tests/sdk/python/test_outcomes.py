"""Outcomes through the official SDK with strict response validation, on
SQLite and Postgres: an outcome satisfied on its second iteration after a `needs_revision`
whose feedback reaches the agent's model, the iteration budget running out, interrupts while
the agent works and while the grader grades, an outcome among `initial_events`, a file
rubric, and bad input refused without changing anything.

The scripted model plays both sides: the outcome's description is the agent's script, and
the rubric's `grade <result> <explanation>` lines are the grader's verdicts, one per
iteration (`grade sleep <ms>` slows the grader down)."""

import io
import json
import time

import anthropic
import pytest

# Quick heartbeats, so a slow grader shows several `span.outcome_evaluation_ongoing`; a price
# for the scripted model, so its sessions can have a budget.
SERVER_ENV = {"MAST_OUTCOME_HEARTBEAT_MS": "200",
              "MAST_PRICES": json.dumps({"mast-scripted": {"input": "1000", "output": "2000"}})}


def scripted_session(client, environment, **kw):
    agent = client.beta.agents.create(name="outcomes", model="mast-scripted")
    return client.beta.sessions.create(agent=agent.id, environment_id=environment.id, **kw)


def outcome(description, rubric, **kw):
    return {"type": "user.define_outcome", "description": description,
            "rubric": {"type": "text", "content": rubric}, **kw}


def until_idle(client, sid, events, on_event=None):
    """Sends `events` and returns the session's events up to its next `session.status_idle`
    (and the echo of what was sent)."""
    seen = []
    with client.beta.sessions.events.stream(sid) as st:
        echo = client.beta.sessions.events.send(sid, events=events)
        for ev in st:
            seen.append(ev)
            if on_event is not None:
                on_event(ev)
            if ev.type == "session.status_idle":
                break
    return echo, seen


def texts(seen):
    return [e.content[0].text for e in seen if e.type == "agent.message"]


def test_satisfied_on_the_second_iteration_after_a_revision(client, environment):
    sess = scripted_session(client, environment)
    rubric = "- has a conclusion\ngrade needs_revision Add a conclusion section.\ngrade satisfied All criteria met."
    echo, seen = until_idle(client, sess.id, [outcome("say Draft one.", rubric)])
    sent = echo.data[0]
    assert sent.type == "user.define_outcome" and sent.outcome_id.startswith("outc_")
    assert sent.processed_at is not None
    assert sent.rubric.type == "text" and sent.rubric.content == rubric
    assert sent.max_iterations == 3

    kinds = [e.type for e in seen]
    starts = [e for e in seen if e.type == "span.outcome_evaluation_start"]
    ends = [e for e in seen if e.type == "span.outcome_evaluation_end"]
    assert [s.iteration for s in starts] == [0, 1]
    assert [(e.iteration, e.result) for e in ends] == [(0, "needs_revision"), (1, "satisfied")]
    assert [e.outcome_evaluation_start_id for e in ends] == [s.id for s in starts]
    assert all(e.outcome_id == sent.outcome_id for e in starts + ends)
    assert ends[0].explanation == "Add a conclusion section."
    assert ends[1].explanation == "All criteria met."
    # The session stayed running between the iterations: one idle, at the end.
    assert kinds.count("session.status_idle") == 1 and seen[-1].stop_reason.type == "end_turn"
    # The agent's first iteration, then its revision: the grader's feedback was the newest
    # user text of its second model request (the scripted model echoes it).
    said = texts(seen)
    assert said[0] == "Draft one."
    assert "Add a conclusion section." in said[1] and said[1].startswith("You said: ")
    assert kinds.index("span.outcome_evaluation_end") < kinds.index("span.model_request_start", kinds.index("span.outcome_evaluation_end"))

    after = client.beta.sessions.retrieve(sess.id)
    assert after.status == "idle"
    [ev] = after.outcome_evaluations
    assert (ev.outcome_id, ev.result, ev.iteration) == (sent.outcome_id, "satisfied", 1)
    assert ev.explanation == "All criteria met." and ev.description == "say Draft one."
    assert ev.completed_at is not None
    # The grader's spend is the session's too: its usage adds up with the agent's requests.
    agent_in = sum(e.model_usage.input_tokens for e in seen if e.type == "span.model_request_end")
    grader_in = sum(e.usage.input_tokens for e in ends)
    assert grader_in > 0
    assert after.usage.input_tokens == agent_in + grader_in
    # The log holds what the stream showed.
    listed = [e.id for e in client.beta.sessions.events.list(sess.id, limit=1000)]
    assert [e.id for e in seen] == listed


def test_max_iterations_reached_then_one_acknowledgement_turn(client, environment):
    sess = scripted_session(client, environment)
    rubric = "grade needs_revision Still no tests."
    _, seen = until_idle(client, sess.id, [outcome("say Work.", rubric, max_iterations=2)])
    ends = [e for e in seen if e.type == "span.outcome_evaluation_end"]
    assert [(e.iteration, e.result) for e in ends] == [(0, "needs_revision"), (1, "max_iterations_reached")]
    # After the last verdict: one acknowledgement turn, no further evaluation, then idle.
    tail = [e.type for e in seen[seen.index(ends[-1]) + 1:]]
    assert tail.count("span.model_request_start") == 1
    assert "span.outcome_evaluation_start" not in tail
    assert tail[-1] == "session.status_idle"
    assert "no more evaluation cycles" in texts(seen)[-1]
    [ev] = client.beta.sessions.retrieve(sess.id).outcome_evaluations
    assert (ev.result, ev.iteration, ev.explanation) == ("max_iterations_reached", 1, "Still no tests.")


def test_interrupts_end_the_outcome_and_the_next_one_chains(client, environment):
    sess = scripted_session(client, environment)

    # While the agent works: no evaluation had started, so the start id is empty.
    def stop_at_request(ev):
        if ev.type == "span.model_request_start":
            client.beta.sessions.events.send(sess.id, events=[{"type": "user.interrupt"}])

    _, seen = until_idle(client, sess.id, [outcome("sleep 5000\nsay Slow work.", "grade satisfied ok")], stop_at_request)
    [end] = [e for e in seen if e.type == "span.outcome_evaluation_end"]
    assert (end.result, end.outcome_evaluation_start_id, end.iteration) == ("interrupted", "", 0)
    assert seen[-1].stop_reason.type == "end_turn"
    first = client.beta.sessions.retrieve(sess.id).outcome_evaluations
    assert [e.result for e in first] == ["interrupted"]

    # While the grader grades: heartbeats, the session shows it evaluating, then the
    # interrupt ends it with the start's id. A new outcome chains after the terminal one.
    beats, shown = [], []

    def stop_while_grading(ev):
        if ev.type == "span.outcome_evaluation_ongoing":
            beats.append(ev)
            if len(beats) == 2:
                shown.append(client.beta.sessions.retrieve(sess.id).outcome_evaluations[-1].result)
                client.beta.sessions.events.send(sess.id, events=[{"type": "user.interrupt"}])

    _, seen = until_idle(client, sess.id, [outcome("say Done.", "grade sleep 20000\ngrade satisfied ok")], stop_while_grading)
    [start] = [e for e in seen if e.type == "span.outcome_evaluation_start"]
    [end] = [e for e in seen if e.type == "span.outcome_evaluation_end"]
    assert (end.result, end.outcome_evaluation_start_id) == ("interrupted", start.id)
    assert all(b.outcome_id == start.outcome_id and b.iteration == 0 for b in beats)
    assert shown == ["evaluating"]
    both = client.beta.sessions.retrieve(sess.id)
    assert [e.result for e in both.outcome_evaluations] == ["interrupted", "interrupted"]
    assert both.status == "idle"


def wait_idle(client, sid, timeout=30):
    deadline = time.time() + timeout
    while True:
        s = client.beta.sessions.retrieve(sid)
        if s.status == "idle":
            return s
        assert time.time() < deadline, f"session still {s.status}"
        time.sleep(0.05)


def test_define_outcome_in_initial_events(client, environment):
    sess = scripted_session(client, environment, initial_events=[
        {"type": "user.message", "content": [{"type": "text", "text": "context first"}]},
        outcome("say From the start.", "grade satisfied Done from the start.")])
    assert sess.status == "running"
    done = wait_idle(client, sess.id)
    [ev] = done.outcome_evaluations
    assert (ev.result, ev.explanation) == ("satisfied", "Done from the start.")
    listed = list(client.beta.sessions.events.list(sess.id, limit=1000))
    [defined] = [e for e in listed if e.type == "user.define_outcome"]
    assert defined.outcome_id == ev.outcome_id and defined.max_iterations == 3
    assert [e.result for e in listed if e.type == "span.outcome_evaluation_end"] == ["satisfied"]
    # At most one outcome among the initial events.
    with pytest.raises(anthropic.BadRequestError) as e:
        scripted_session(client, environment, initial_events=[outcome("a", "b"), outcome("c", "d")])
    assert "at most one outcome" in e.value.message


def test_a_file_rubric_is_resolved_to_its_text(client, environment):
    text = "- cites a source\ngrade satisfied Cited, per the file rubric."
    f = client.beta.files.upload(file=("rubric.md", io.BytesIO(text.encode()), "text/markdown"))
    sess = scripted_session(client, environment)
    echo, seen = until_idle(client, sess.id, [{"type": "user.define_outcome", "description": "say See [1].",
                                               "rubric": {"type": "file", "file_id": f.id}}])
    assert echo.data[0].rubric.type == "text" and echo.data[0].rubric.content == text
    [end] = [e for e in seen if e.type == "span.outcome_evaluation_end"]
    assert (end.result, end.explanation) == ("satisfied", "Cited, per the file rubric.")

    binary = client.beta.files.upload(file=("blob.bin", io.BytesIO(b"\xff\xfe\x00\x01"), "application/octet-stream"))
    for file_id, why in ((binary.id, "not UTF-8 text"), ("file_missing", "not found")):
        with pytest.raises(anthropic.BadRequestError) as e:
            client.beta.sessions.events.send(sess.id, events=[{"type": "user.define_outcome", "description": "d",
                                                               "rubric": {"type": "file", "file_id": file_id}}])
        assert why in e.value.message and "rubric.file_id" in e.value.message
    assert len(client.beta.sessions.retrieve(sess.id).outcome_evaluations) == 1


def test_bad_outcomes_are_refused_and_change_nothing(client, environment):
    sess = scripted_session(client, environment)
    before = [e.id for e in client.beta.sessions.events.list(sess.id)]
    bad = [
        (outcome("d", "x" * 262_145), "at most 262144"),
        (outcome("d", "r", max_iterations=0), "between 1 and 20"),
        (outcome("d", "r", max_iterations=21), "between 1 and 20"),
        ({"type": "user.define_outcome", "description": "d"}, "rubric"),
        ({"type": "user.define_outcome", "description": "d", "rubric": {"type": "url", "url": "x"}}, "rubric"),
    ]
    for ev, why in bad:
        with pytest.raises(anthropic.BadRequestError) as e:
            client.beta.sessions.events.send(sess.id, events=[ev])
        assert e.value.body["error"]["type"] == "invalid_request_error"
        assert why in e.value.message, e.value.message
    after = client.beta.sessions.retrieve(sess.id)
    assert after.outcome_evaluations == [] and after.status == "idle"
    assert [e.id for e in client.beta.sessions.events.list(sess.id)] == before

    # A second outcome while one is active is a conflict, and leaves the first alone.
    conflicts = []

    def second(ev):
        if ev.type == "span.model_request_start" and not conflicts:
            with pytest.raises(anthropic.ConflictError) as e:
                client.beta.sessions.events.send(sess.id, events=[outcome("again", "r")])
            conflicts.append(e.value)
            assert len(client.beta.sessions.retrieve(sess.id).outcome_evaluations) == 1

    _, seen = until_idle(client, sess.id, [outcome("sleep 300\nsay First.", "grade satisfied ok")], second)
    assert "only one outcome is active" in conflicts[0].message
    assert [e.type for e in seen].count("user.define_outcome") == 1
    [ev] = client.beta.sessions.retrieve(sess.id).outcome_evaluations
    assert ev.result == "satisfied"
    # Two in one batch: the second is refused and neither is recorded.
    with pytest.raises(anthropic.ConflictError):
        client.beta.sessions.events.send(sess.id, events=[outcome("a", "r"), outcome("b", "r")])
    assert len(client.beta.sessions.retrieve(sess.id).outcome_evaluations) == 1


def test_an_unreadable_verdict_fails_the_outcome(client, environment):
    sess = scripted_session(client, environment)
    _, seen = until_idle(client, sess.id, [outcome("say Done.", "grade raw Looks fine to me!")])
    [end] = [e for e in seen if e.type == "span.outcome_evaluation_end"]
    assert end.result == "failed"
    assert "could not be read as a verdict" in end.explanation and "Looks fine to me!" in end.explanation
    assert seen[-1].type == "session.status_idle" and seen[-1].stop_reason.type == "end_turn"
    [ev] = client.beta.sessions.retrieve(sess.id).outcome_evaluations
    assert ev.result == "failed" and ev.completed_at is not None


def budget(cents):
    return {"type": "limit", "max_list_cost": {"amount": str(cents), "currency": "USD"}}


def test_the_budget_gate_holds_the_grader_until_it_is_raised(client, environment):
    # The agent's first request crosses a one-cent cap (a request that crosses completes);
    # the grader's request is then gated: the session idles at the budget mid-evaluation.
    sess = scripted_session(client, environment, budget=budget(1))
    _, seen = until_idle(client, sess.id, [outcome("say Done.", "grade satisfied Fine.")])
    kinds = [e.type for e in seen]
    assert seen[-1].stop_reason.type == "budget_reached"
    assert "span.outcome_evaluation_start" in kinds and "span.outcome_evaluation_end" not in kinds
    assert kinds.count("span.model_request_start") == 1
    held = client.beta.sessions.retrieve(sess.id)
    assert [e.result for e in held.outcome_evaluations] == ["evaluating"]
    spent = held.usage.input_tokens

    # Raising it resumes the evaluation by itself; the grader's tokens are the session's.
    seen = []
    with client.beta.sessions.events.stream(sess.id) as st:
        client.beta.sessions.update(sess.id, budget=budget(100_000))
        for ev in st:
            seen.append(ev)
            if ev.type == "session.status_idle":
                break
    [end] = [e for e in seen if e.type == "span.outcome_evaluation_end"]
    assert (end.result, end.explanation) == ("satisfied", "Fine.")
    assert seen[-1].stop_reason.type == "end_turn"
    done = client.beta.sessions.retrieve(sess.id)
    assert done.usage.input_tokens == spent + end.usage.input_tokens
    assert [e.result for e in done.outcome_evaluations] == ["satisfied"]
    assert int(done.usage.list_cost.amount) > int(held.usage.list_cost.amount)
