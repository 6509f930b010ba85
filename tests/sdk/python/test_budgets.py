"""Cost, budgets, termination and the turn limit through the official SDK (strict response
validation), on SQLite and Postgres: list cost exact to the cent from the model's reported
usage and the price table, a budget reached mid-delegation then raised and resumed, a
session terminated by a model that no longer exists, and a turn stopped at `MAST_MAX_TURNS`."""

import json
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anthropic
import pytest

from conftest import sse

# Dollars per million tokens for the scripted model, so its sessions have a list cost.
SCRIPTED_PRICE = {"input": "1000", "output": "2000"}
MAX_TURNS = 4
SERVER_ENV = {
    "MAST_PRICES": json.dumps({"mast-scripted": SCRIPTED_PRICE}),
    "MAST_MAX_TURNS": str(MAX_TURNS),
    # The usage reported below (270,000 tokens a request) would pass the 200,000-token
    # window's compaction threshold: a 1M window keeps these turns free of summarisations.
    "MAST_CONTEXT_WINDOWS": json.dumps({"claude-sonnet-4-6": 1_000_000, "claude-sonnet-4-5": 1_000_000}),
}

# What the Messages API below reports for every request: cache writes split by lifetime.
USAGE = {"input_tokens": 100_000, "cache_creation_input_tokens": 50_000,
         "cache_creation": {"ephemeral_5m_input_tokens": 40_000, "ephemeral_1h_input_tokens": 10_000},
         "cache_read_input_tokens": 100_000}
OUTPUT_TOKENS = 20_000
# claude-sonnet-4-6's list prices in nanodollars per token: input, output, 5m and 1h cache
# writes, cache reads ($3, $15, $3.75, $6, $0.30 per million tokens), at any prompt size.
SONNET = {"input": 3_000, "output": 15_000, "5m": 3_750, "1h": 6_000, "read": 300}
# claude-sonnet-4-5's prices for a prompt over 200,000 tokens, as every request below has:
# $6, $22.50, $7.50, $12, $0.60 per million tokens.
SONNET_45_LONG = {"input": 6_000, "output": 22_500, "5m": 7_500, "1h": 12_000, "read": 600}
GONE = "claude-gone"


class Messages(BaseHTTPRequestHandler):
    """A Messages API that lists two models, answers each request with one sentence and the
    usage above, and no longer serves `claude-gone`."""

    def log_message(self, *args):
        pass

    def reply(self, status, body, content_type="application/json"):
        self.send_response(status)
        self.send_header("content-type", content_type)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        models = [{"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
                  for m in ("claude-sonnet-4-6", "claude-sonnet-4-5", GONE)]
        self.reply(200, json.dumps({"data": models, "has_more": False, "first_id": None, "last_id": None}).encode())

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if body["model"] == GONE:
            err = {"type": "error", "error": {"type": "not_found_error", "message": f"model: {GONE}"}}
            return self.reply(404, json.dumps(err).encode())
        frames = [
            sse("message_start", {"type": "message_start", "message": {
                "id": "msg_b", "type": "message", "role": "assistant", "content": [], "model": body["model"],
                "stop_reason": None, "usage": dict(USAGE, output_tokens=1)}}),
            sse("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            sse("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Noted."}}),
            sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
            sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": OUTPUT_TOKENS}}),
            sse("message_stop", {"type": "message_stop"}),
        ]
        self.reply(200, b"".join(frames), "text/event-stream")


@pytest.fixture(scope="module")
def messages_api():
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), Messages)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture
def env(client):
    return client.beta.environments.create(name="budget-" + uuid.uuid4().hex[:8])


def budget(cents):
    return {"type": "limit", "max_list_cost": {"amount": str(cents), "currency": "USD"}}


def cents(nanos):
    """Nanodollars to cents, half up, as the server rounds."""
    return (nanos + 5_000_000) // 10_000_000


def runtime_nanos(active_seconds):
    """$0.08 per hour of activity."""
    return round(active_seconds * 1_000_000) * 80_000_000 // 3_600_000_000


def request_nanos(price):
    """What one request's USAGE and OUTPUT_TOKENS cost at `price`."""
    return (USAGE["input_tokens"] * price["input"] + OUTPUT_TOKENS * price["output"]
            + 40_000 * price["5m"] + 10_000 * price["1h"] + USAGE["cache_read_input_tokens"] * price["read"])


def scripted_nanos(events):
    """What the scripted model's requests in `events` cost at SCRIPTED_PRICE."""
    ends = [e for e in events if e.type == "span.model_request_end" and not e.is_error]
    assert ends, "no model request was made"
    return sum(e.model_usage.input_tokens * 1_000_000 + e.model_usage.output_tokens * 2_000_000 for e in ends)


def until_idle(stream, seen):
    for ev in stream:
        seen.append(ev)
        if ev.type in ("session.status_idle", "session.status_terminated"):
            return ev
    raise AssertionError("the stream ended before the session stopped")


def say(client, sid, text):
    """Sends a message and returns the events streamed until the session stops."""
    seen = []
    with client.beta.sessions.events.stream(sid) as st:
        client.beta.sessions.events.send(sid, events=[{"type": "user.message", "content": [{"type": "text", "text": text}]}])
        until_idle(st, seen)
    return seen


def test_list_cost_is_exact_and_a_budget_stops_then_resumes(client, env):
    agent = client.beta.agents.create(name="priced", model="claude-sonnet-4-6")
    sess = client.beta.sessions.create(agent=agent.id, environment_id=env.id, budget=budget(100))
    assert sess.budget.max_list_cost.amount == "100" and sess.budget.type == "limit"
    assert sess.usage.list_cost.amount == "0" and sess.usage.list_cost.currency == "USD"
    per_request = request_nanos(SONNET)
    assert per_request == 840_000_000  # 84 cents: under the cap

    first = say(client, sess.id, "one")
    assert first[-1].stop_reason.type == "end_turn"
    # The second request starts under the cap and crosses it; it completes.
    second = say(client, sess.id, "two")
    assert second[-1].stop_reason.type == "end_turn"
    # The third is gated: no model request, a usage snapshot, then idle at the budget.
    third = say(client, sess.id, "three")
    types = [e.type for e in third]
    assert "span.model_request_start" not in types
    assert types[-2:] == ["session.usage", "session.status_idle"], types
    assert third[-1].stop_reason.type == "budget_reached"
    usage_event = third[-2]
    assert usage_event.budget.max_list_cost.amount == "100"

    s = client.beta.sessions.retrieve(sess.id)
    assert s.status == "idle"
    assert s.usage.cache_creation.ephemeral_5m_input_tokens == 80_000
    assert s.usage.cache_creation.ephemeral_1h_input_tokens == 20_000
    assert s.usage.input_tokens == 200_000 and s.usage.output_tokens == 2 * OUTPUT_TOKENS
    expected = cents(2 * per_request + runtime_nanos(s.usage.active_seconds))
    assert s.usage.list_cost.amount == str(expected) == "168"
    assert usage_event.usage.list_cost.amount == "168"

    # A cap at or under what was consumed is not a raise; a budget-less session gets none.
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.sessions.update(sess.id, budget=budget(168))
    assert e.value.body["error"]["details"]["error_code"] == "budget_not_raised"
    assert client.beta.sessions.retrieve(sess.id).budget.max_list_cost.amount == "100"

    # Raising it resumes the stopped turn by itself: the queued "three" gets its answer.
    seen = []
    with client.beta.sessions.events.stream(sess.id) as st:
        raised = client.beta.sessions.update(sess.id, budget=budget(300))
        assert raised.budget.max_list_cost.amount == "300"
        until_idle(st, seen)
    types = [e.type for e in seen]
    assert types[:2] == ["session.updated", "session.status_running"], types
    assert seen[0].budget.max_list_cost.amount == "300"
    assert seen[-1].stop_reason.type == "end_turn"
    assert [e for e in seen if e.type == "agent.message"][-1].content[0].text == "Noted."
    s = client.beta.sessions.retrieve(sess.id)
    assert s.usage.list_cost.amount == str(cents(3 * per_request + runtime_nanos(s.usage.active_seconds)))

    # Removing it is one-way.
    seen = []
    with client.beta.sessions.events.stream(sess.id) as st:
        assert client.beta.sessions.update(sess.id, budget=None).budget is None
        seen.append(next(iter(st)))
    assert seen[0].type == "session.updated" and seen[0].budget is None
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.sessions.update(sess.id, budget=budget(1000))
    assert e.value.body["error"]["details"]["error_code"] == "budget_create_only"


def test_a_long_prompt_is_priced_in_its_models_upper_band(client, env):
    # 250,000 prompt tokens (input, cache writes and reads): over claude-sonnet-4-5's
    # 200,000, so every token of the request is at the long-context prices.
    agent = client.beta.agents.create(name="long-prompt", model="claude-sonnet-4-5")
    sess = client.beta.sessions.create(agent=agent.id, environment_id=env.id, budget=budget(1000))
    assert say(client, sess.id, "one")[-1].stop_reason.type == "end_turn"
    s = client.beta.sessions.retrieve(sess.id)
    assert request_nanos(SONNET_45_LONG) == 1_530_000_000
    expected = cents(request_nanos(SONNET_45_LONG) + runtime_nanos(s.usage.active_seconds))
    assert s.usage.list_cost.amount == str(expected) == "153"


def test_a_budget_needs_a_price_for_every_model(client, env):
    unpriced = client.beta.agents.create(name="unpriced", model=GONE)
    lead = client.beta.agents.create(name="lead", model="mast-scripted",
                                     multiagent={"type": "coordinator", "agents": [unpriced.id]})
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.sessions.create(agent=lead.id, environment_id=env.id, budget=budget(100))
    assert e.value.body["error"]["details"]["error_code"] == "model_not_budgetable"
    assert GONE in e.value.message
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.sessions.create(agent=lead.id, environment_id=env.id,
                                    budget={"type": "limit", "max_list_cost": {"amount": "1.50", "currency": "USD"}})
    assert "whole cents" in e.value.message
    # Without a budget the same session is fine, and a scripted-only one has a cost; one
    # running an unpriced model has none to show.
    client.beta.sessions.create(agent=lead.id, environment_id=env.id)
    assert client.beta.sessions.create(agent=unpriced.id, environment_id=env.id).usage.list_cost is None
    plain = client.beta.agents.create(name="plain", model="mast-scripted")
    s = client.beta.sessions.create(agent=plain.id, environment_id=env.id, budget=budget(100))
    assert s.usage.list_cost.amount == "0"
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.sessions.update(client.beta.sessions.create(agent=plain.id, environment_id=env.id).id, budget=budget(5))
    assert e.value.body["error"]["details"]["error_code"] == "budget_create_only"


def send(agent, message):
    return "call send_to_agent " + json.dumps({"agent": agent, "message": message})


def test_a_budget_reached_mid_delegation_is_raised_and_resumed(client, env):
    analyst = client.beta.agents.create(name="analyst", model="mast-scripted")
    lead = client.beta.agents.create(name="lead", model="mast-scripted",
                                     multiagent={"type": "coordinator", "agents": [analyst.id]})
    # A one-cent cap: the coordinator's first request crosses it, so the delegate's first
    # request is gated.
    sess = client.beta.sessions.create(agent=lead.id, environment_id=env.id, budget=budget(1))
    seen = say(client, sess.id, "\n".join([send("analyst", "call nosuch {}\n---\nsay analysed"), "---", "say lead: {{result}}"]))
    types = [e.type for e in seen]
    assert "session.thread_created" in types
    child_idle = [e for e in seen if e.type == "session.thread_status_idle"]
    assert len(child_idle) == 1 and child_idle[0].stop_reason.type == "budget_reached"
    assert child_idle[0].agent_name == "analyst"
    # The documented order: each thread idles at the budget, then usage, then the session.
    assert types.index("session.thread_status_idle") < types.index("session.usage") < types.index("session.status_idle")
    assert seen[-1].stop_reason.type == "budget_reached"
    assert types.count("agent.thread_message_received") == 0, "the delegate has not answered"
    child_id = child_idle[0].session_thread_id
    child = client.beta.sessions.threads.retrieve(child_id, session_id=sess.id)
    assert child.status == "idle"
    assert not [e for e in client.beta.sessions.threads.events.list(child_id, session_id=sess.id)
                if e.type == "span.model_request_start"], "the delegate's request was gated"
    spent = int(client.beta.sessions.retrieve(sess.id).usage.list_cost.amount)
    assert spent >= 1

    seen = []
    with client.beta.sessions.events.stream(sess.id) as st:
        client.beta.sessions.update(sess.id, budget=budget(spent + 1000))
        until_idle(st, seen)
    types = [e.type for e in seen]
    assert types[:3] == ["session.updated", "session.status_running", "session.thread_status_running"], types
    assert seen[-1].stop_reason.type == "end_turn"
    assert [e for e in seen if e.type == "agent.message"][-1].content[0].text == "lead: analysed"

    # Exact to the cent: every thread's reported usage at the configured price, plus runtime.
    s = client.beta.sessions.retrieve(sess.id)
    primary_events = list(client.beta.sessions.events.list(sess.id, limit=1000))
    child_events = list(client.beta.sessions.threads.events.list(child_id, session_id=sess.id, limit=1000))
    token_nanos = scripted_nanos(primary_events) + scripted_nanos(child_events)
    assert s.usage.list_cost.amount == str(cents(token_nanos + runtime_nanos(s.usage.active_seconds)))
    child = client.beta.sessions.threads.retrieve(child_id, session_id=sess.id)
    assert child.usage.list_cost.amount == str(cents(scripted_nanos(child_events) + runtime_nanos(child.usage.active_seconds)))


def test_a_session_whose_model_is_gone_terminates(client, env):
    agent = client.beta.agents.create(name="retired", model=GONE)
    sess = client.beta.sessions.create(agent=agent.id, environment_id=env.id)
    seen = say(client, sess.id, "hello")
    errors = [e for e in seen if e.type == "session.error"]
    assert len(errors) == 1 and errors[0].error.retry_status.type == "terminal"
    assert GONE in errors[0].error.message
    assert seen[-1].type == "session.status_terminated"
    assert "session.status_idle" not in [e.type for e in seen]
    # Still readable and listable; new input is refused; it can be deleted.
    s = client.beta.sessions.retrieve(sess.id)
    assert s.status == "terminated"
    assert sess.id in [x.id for x in client.beta.sessions.list(statuses=["terminated"])]
    assert [e.type for e in client.beta.sessions.events.list(sess.id)][-1] == "session.status_terminated"
    with pytest.raises(anthropic.ConflictError) as e:
        client.beta.sessions.events.send(sess.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "again"}]}])
    assert "terminated" in e.value.message
    assert client.beta.sessions.retrieve(sess.id).status == "terminated"
    client.beta.sessions.delete(sess.id)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.sessions.retrieve(sess.id)


def test_a_turn_stops_at_the_turn_limit(client, env):
    agent = client.beta.agents.create(name="looper", model="mast-scripted")
    sess = client.beta.sessions.create(agent=agent.id, environment_id=env.id)
    seen = say(client, sess.id, "\n---\n".join(["call nosuch {}"] * (MAX_TURNS + 2)))
    assert [e.type for e in seen].count("span.model_request_start") == MAX_TURNS
    errors = [e for e in seen if e.type == "session.error"]
    assert len(errors) == 1 and errors[0].error.type == "tool_use_limit_reached_error"
    assert errors[0].error.retry_status.type == "exhausted"
    assert str(MAX_TURNS) in errors[0].error.message
    assert seen[-1].stop_reason.type == "retries_exhausted"
    # The next message starts a new turn.
    again = say(client, sess.id, "say still here")
    assert again[-1].stop_reason.type == "end_turn"
    assert [e for e in again if e.type == "agent.message"][-1].content[0].text == "still here"
