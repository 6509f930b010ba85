"""The web console (`/console`) in a real browser: Debian's Chromium driven headless by
Playwright, against a real `mast serve` (SQLite and Postgres) that a test can restart on the
same port and data. The page is a client of the public API, so these tests drive it like a
user and check what it shows against what the SDK sees."""

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request
import uuid

import anthropic
import pytest
from playwright.sync_api import expect, sync_playwright

from conftest import BACKENDS, MAST_BIN, WEATHER_TOOL, free_port, fresh_postgres, run

# Generous: a loaded CI machine is slow; the assertions wait on conditions, never on time.
expect.set_options(timeout=15_000)
CHROMIUM = os.environ.get("MAST_CHROMIUM", "/usr/bin/chromium")
# Where the light and dark screenshots go (a temp dir unless the caller names one).
SHOTS = os.environ.get("MAST_CONSOLE_SCREENSHOTS") or tempfile.mkdtemp(prefix="mast-console-shots-")


class Server:
    """A `mast serve` process that can be stopped and started again on the same port and data."""

    def __init__(self, backend, messages_api):
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.data_dir = tempfile.mkdtemp(prefix="mast-console-")
        self.env = dict(os.environ, ANTHROPIC_BASE_URL=messages_api, ANTHROPIC_API_KEY="test", MAST_LOG="warn")
        self.env.pop("DATABASE_URL", None)
        if backend == "postgres":
            self.env["DATABASE_URL"] = fresh_postgres()
        self.proc = None
        self.start()

    def start(self):
        self.proc = subprocess.Popen([os.environ.get("MAST_BIN", "target/debug/mast"), "serve", "--listen",
                                      f"127.0.0.1:{self.port}", "--data-dir", self.data_dir], env=self.env)
        deadline = time.time() + 30
        while True:
            try:
                with urllib.request.urlopen(self.base + "/healthz", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            if time.time() > deadline or self.proc.poll() is not None:
                raise RuntimeError("mast did not start")
            time.sleep(0.05)

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=20)


@pytest.fixture(scope="module", params=BACKENDS)
def srv(request, messages_api):
    s = Server(request.param, messages_api)
    yield s
    s.stop()
    shutil.rmtree(s.data_dir, ignore_errors=True)


@pytest.fixture(scope="module")
def browser():
    # No skip: without Chromium the suite fails (scripts/test installs it).
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"])
        yield b
        b.close()


@pytest.fixture
def sdk(srv):
    return anthropic.Anthropic(base_url=srv.base, api_key="console-test", _strict_response_validation=True, max_retries=0)


@pytest.fixture
def env_id(sdk):
    return sdk.beta.environments.create(name="console-" + uuid.uuid4().hex[:8]).id


def new_page(browser, srv, scheme="light", viewport=None):
    ctx = browser.new_context(base_url=srv.base, color_scheme=scheme, viewport=viewport or {"width": 1280, "height": 860})
    page = ctx.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" and "Content Security Policy" in m.text else None)
    page.errors = errors
    return page


def open_page(browser, srv, scheme="light", viewport=None):
    """The console on the sessions list. The suite's servers run open (loopback, no key), so
    the list comes without a key prompt."""
    page = new_page(browser, srv, scheme, viewport)
    page.goto("/console/")
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible()
    assert page.locator("#api-key").count() == 0
    return page


def create_key(server):
    """Creates an API key in a SQLite server's store (the server is open no more)."""
    made = subprocess.run([MAST_BIN, "keys", "create", "--data-dir", server.data_dir], env=server.env,
                          capture_output=True, text=True, check=True)
    return made.stdout.strip()


def idle_after(sdk, sid, events):
    """Sends `events` and returns the session's next `session.status_idle`."""
    with sdk.beta.sessions.events.stream(sid) as st:
        sdk.beta.sessions.events.send(sid, events=events)
        for ev in st:
            if ev.type == "session.status_idle":
                return ev
    raise AssertionError("the stream ended before the session went idle")


def events_of(page, type_):
    return page.locator(f'#transcript li[data-type="{type_}"]')


def scripted(sdk, name, **extra):
    return sdk.beta.agents.create(name=name, model="mast-scripted", **extra)


def test_shell_is_static_with_strict_headers(srv):
    with urllib.request.urlopen(srv.base + "/console/") as r:
        assert r.headers["content-type"].startswith("text/html")
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "connect-src 'self'" in csp and "frame-ancestors 'none'" in csp
        assert "unsafe-inline" not in csp
        assert r.headers["x-content-type-options"] == "nosniff"
        assert r.headers["cache-control"] == "no-cache"
        etag = r.headers["etag"]
        # An icon of its own, inline, so the tab is told apart and no /favicon.ico 404s.
        page = r.read().decode()
        assert '<link rel="icon" href="data:image/svg+xml,' in page and "img-src 'self' data:" in csp
    req = urllib.request.Request(srv.base + "/console/", headers={"if-none-match": etag})
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(req)
    assert e.value.code == 304
    with urllib.request.urlopen(srv.base + "/console/app.js") as r:
        assert r.headers["content-type"].startswith("text/javascript")


def test_the_api_reference_renders_under_its_own_policy(browser, srv):
    """`/docs` is framed by nobody and runs only this server's Redoc bundle; the page still
    renders the reference with no policy violation."""
    with urllib.request.urlopen(srv.base + "/docs") as r:
        csp = r.headers["content-security-policy"]
        assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp and "default-src 'none'" in csp
        assert r.headers["x-frame-options"] == "DENY" and r.headers["x-content-type-options"] == "nosniff"
    ctx = browser.new_context(base_url=srv.base)
    page = ctx.new_page()
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.goto("/docs")
    expect(page.get_by_role("menuitem", name="agents")).to_be_visible()
    expect(page.get_by_role("heading", name="Mast").first).to_be_visible()
    # Its own script, styles, search worker and the OpenAPI document load; what the policy
    # keeps out is the bundle's "powered by" logo from its vendor's site.
    blocked = [e for e in errors if "Content Security Policy" in e and "cdn.redoc.ly" not in e]
    assert not blocked, errors
    ctx.close()


def test_a_page_on_another_site_cannot_drive_an_open_server(browser, srv, sdk):
    """A server without keys is driven by nothing a page on another origin sends: a
    `text/plain` fetch (no preflight), a form post, a multipart form. The attacker's page is
    served from another port (another origin) of this machine."""
    import http.server
    import threading

    hooks_before = len(sdk.get("/v1/mast/hooks", cast_to=object)["data"])
    target = srv.base + "/v1/mast/hooks"
    body = json.dumps({"event": "pre_tool_use", "url": "http://127.0.0.1:9/attacker"})
    page_html = f"""<!doctype html><body>
<form id="f" method="post" action="{target}" enctype="text/plain" target="sink">
<input name='{{"event": "pre_tool_use", "url": "http://127.0.0.1:9/form", "x": "' value='"}}'></form>
<form id="m" method="post" action="{target}" enctype="multipart/form-data" target="sink">
<input name="event" value="pre_tool_use"></form>
<iframe name="sink"></iframe>
<script>
window.done = Promise.allSettled([
  fetch({json.dumps(target)}, {{method: "POST", mode: "no-cors", body: {json.dumps(body)}}}),
  fetch({json.dumps(target)}, {{method: "POST", mode: "no-cors", headers: {{"content-type": "text/plain"}}, body: {json.dumps(body)}}}),
  fetch({json.dumps(target)}, {{method: "POST", mode: "no-cors", body: new Blob([{json.dumps(body)}])}}),
]).then(() => {{ document.getElementById("f").submit(); document.getElementById("m").submit(); return "sent"; }});
</script></body>"""

    class Page(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            data = page_html.encode()
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    site = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    threading.Thread(target=site.serve_forever, daemon=True).start()
    try:
        ctx = browser.new_context()
        page = ctx.new_page()
        page.goto(f"http://127.0.0.1:{site.server_address[1]}/")
        assert page.evaluate("window.done") == "sent"
        # Both forms have been answered (the iframe loads each answer) before counting.
        page.wait_for_load_state("networkidle")
        ctx.close()
    finally:
        site.shutdown()
    assert len(sdk.get("/v1/mast/hooks", cast_to=object)["data"]) == hooks_before


def test_downloads_are_never_pages_of_this_origin(srv, sdk):
    """A file uploaded as `text/html` downloads as an attachment, never sniffed, and under a
    policy that would run nothing were a browser to open it anyway."""
    f = sdk.beta.files.upload(file=("page.html", b"<script>alert(document.domain)</script>", "text/html"))
    with urllib.request.urlopen(f"{srv.base}/v1/files/{f.id}/content") as r:
        assert r.headers["content-disposition"].startswith("attachment")
        assert r.headers["x-content-type-options"] == "nosniff"
        assert "sandbox" in r.headers["content-security-policy"]


def test_sign_in_create_session_answer_a_custom_tool(browser, srv, sdk, env_id):
    agent = scripted(sdk, "weather-" + uuid.uuid4().hex[:6], tools=[WEATHER_TOOL])
    page = open_page(browser, srv)
    page.locator("#new-session summary").click()
    page.locator("#new-agent").select_option(agent.id)
    page.locator("#new-env").select_option(env_id)
    page.get_by_label("Title").fill("Paris weather")
    page.get_by_role("button", name="Create session").click()
    expect(page.locator("#conn")).to_have_text("live")
    sid = page.url.split("#/sessions/")[1]
    assert sdk.beta.sessions.retrieve(sid).agent.id == agent.id

    page.get_by_label("Message").fill('call get_weather {"city":"Paris"}\n---\nsay It is {{result}} in Paris.')
    page.get_by_label("Message").press("Control+Enter")
    call = events_of(page, "agent.custom_tool_use")
    expect(call).to_contain_text("get_weather")
    expect(call).to_contain_text('"city": "Paris"')
    # HTML in a result shows as text, not markup.
    call.get_by_label("Result for get_weather").fill("sunny <b>and</b> <img src=x onerror=\"window.__pwned=1\">")
    call.get_by_role("button", name="Send result").click()
    final = events_of(page, "agent.message").last
    expect(final).to_contain_text('It is sunny <b>and</b> <img src=x onerror="window.__pwned=1"> in Paris.')
    expect(page.locator("#session-status")).to_have_text("idle")
    assert page.locator("#transcript b, #transcript img").count() == 0
    assert page.evaluate("window.__pwned") is None
    expect(call.locator(".actions")).to_be_empty()
    # Every event the API has is on the page exactly once, in order.
    ids = [e.id for e in sdk.beta.sessions.events.list(sid, limit=1000)]
    shown = page.locator("#transcript li[data-id]").evaluate_all("ns => ns.map(n => n.dataset.id)")
    shown_ids = [i for i in shown if i]
    assert [i for i in ids if i in set(shown_ids)] == shown_ids and len(set(shown_ids)) == len(shown_ids)
    assert set(ids) - set(shown_ids) <= {e.id for e in sdk.beta.sessions.events.list(sid, limit=1000) if e.type == "span.model_request_start"}
    with page.expect_download() as dl:
        page.get_by_role("button", name="Download JSON").click()
    saved = json.loads(open(dl.value.path()).read())
    assert [e["id"] for e in saved] == ids
    assert page.errors == []
    page.context.close()


def test_a_script_in_a_message_shows_as_text(browser, srv, sdk, env_id):
    sess = sdk.beta.sessions.create(agent=scripted(sdk, "echo").id, environment_id=env_id)
    page = open_page(browser, srv)
    page.goto(f"/console/#/sessions/{sess.id}")
    expect(page.locator("#conn")).to_have_text("live")
    html = '<script>window.__pwned=1</script><img src=x onerror="window.__pwned=2">'
    sdk.beta.sessions.events.send(sess.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "say " + html}]}])
    expect(events_of(page, "agent.message").locator(".text")).to_have_text(html)
    expect(events_of(page, "user.message")).to_contain_text("say " + html)
    assert page.locator("#transcript script, #transcript img").count() == 0
    assert page.evaluate("window.__pwned") is None
    page.context.close()


def test_allow_and_deny_pending_confirmations(browser, srv, sdk, env_id):
    agent = scripted(sdk, "asker", tools=[{"type": "agent_toolset_20260401",
                                          "configs": [{"name": "bash", "permission_policy": {"type": "always_ask"}}]}])
    sess = sdk.beta.sessions.create(agent=agent.id, environment_id=env_id)
    page = open_page(browser, srv)
    page.goto(f"/console/#/sessions/{sess.id}")
    expect(page.locator("#conn")).to_have_text("live")
    page.get_by_label("Message").fill("call bash " + json.dumps({"command": "echo allowed-ran"})
                                      + "\n---\ncall bash " + json.dumps({"command": "echo never"}) + "\n---\nsay last: {{result}}")
    page.get_by_role("button", name="Send", exact=True).click()
    first = events_of(page, "agent.tool_use").first
    expect(first.locator(".pending-label")).to_have_text("Needs your confirmation")
    first.get_by_role("button", name="Allow").click()
    expect(events_of(page, "agent.tool_result").first).to_contain_text("allowed-ran")
    second = events_of(page, "agent.tool_use").nth(1)
    second.get_by_label("Deny message").fill("not <i>this</i> one")
    second.get_by_role("button", name="Deny").click()
    expect(events_of(page, "user.tool_confirmation").nth(1)).to_contain_text("not <i>this</i> one")
    expect(events_of(page, "agent.message").last).to_contain_text("last:")
    expect(page.locator("#session-status")).to_have_text("idle")
    kinds = [(e.type, getattr(e, "result", None)) for e in sdk.beta.sessions.events.list(sess.id) if e.type == "user.tool_confirmation"]
    assert kinds == [("user.tool_confirmation", "allow"), ("user.tool_confirmation", "deny")]
    page.context.close()


def test_interrupt_a_slow_turn(browser, srv, sdk, env_id):
    sess = sdk.beta.sessions.create(agent=scripted(sdk, "slow").id, environment_id=env_id)
    page = open_page(browser, srv)
    page.goto(f"/console/#/sessions/{sess.id}")
    expect(page.locator("#conn")).to_have_text("live")
    # Many words spread over a minute: the first fragments stream at once.
    page.get_by_label("Message").fill("sleep 60000\nsay " + "word " * 600)
    page.get_by_label("Message").press("Control+Enter")
    expect(page.locator("#session-status")).to_have_text("running")
    # The streaming preview appears in place before the message is complete.
    expect(page.locator("#transcript li.preview .text")).to_contain_text("word word")
    page.locator("#transcript").click()
    page.keyboard.press("Escape")
    expect(events_of(page, "user.interrupt")).to_have_count(1)
    expect(page.locator("#session-status")).to_have_text("idle")
    expect(page.locator("#transcript li.preview")).to_have_count(0)
    assert sdk.beta.sessions.retrieve(sess.id).status == "idle"
    assert not [e for e in sdk.beta.sessions.events.list(sess.id) if e.type == "agent.message"]
    page.context.close()


# The transcript's width as a share of the session page's.
TRANSCRIPT_SHARE = """() => document.querySelector(".scroller").getBoundingClientRect().width
  / document.querySelector(".session-body").getBoundingClientRect().width"""


def test_open_a_delegate_thread(browser, srv, sdk, env_id):
    analyst = scripted(sdk, "analyst")
    coord = scripted(sdk, "lead", multiagent={"type": "coordinator", "agents": [analyst.id]})
    sess = sdk.beta.sessions.create(agent=coord.id, environment_id=env_id)
    page = open_page(browser, srv)
    page.goto(f"/console/#/sessions/{sess.id}")
    expect(page.locator("#conn")).to_have_text("live")
    page.get_by_label("Message").fill("call send_to_agent " + json.dumps({"agent": "analyst", "message": "say numbers look fine"})
                                      + "\n---\nsay summary: {{result}}")
    page.get_by_label("Message").press("Control+Enter")
    expect(events_of(page, "agent.message").last).to_contain_text("summary:")
    expect(events_of(page, "session.thread_created")).to_contain_text("analyst")
    expect(page.locator("#threads li")).to_have_count(2)
    # The thread list is a narrow column beside the transcript, which keeps most of the width.
    assert page.evaluate(TRANSCRIPT_SHARE) >= 0.7
    page.locator("#threads").get_by_role("link", name="analyst").click()
    expect(page).to_have_url(re.compile(r"/threads/sthr_"))
    expect(page.locator("#conn")).to_have_text("live")
    expect(events_of(page, "agent.message")).to_contain_text("numbers look fine")
    expect(page.locator(".session-head .title")).to_contain_text("analyst")
    expect(page.locator("#threads li")).to_have_count(2)
    assert page.evaluate(TRANSCRIPT_SHARE) >= 0.7
    page.context.close()


def test_a_workflow_run_shows_its_phases_threads_and_end(browser, srv, sdk, env_id):
    lead = scripted(sdk, "lead", multiagent={"type": "multiagent_20261001", "subagents": {"type": "disabled"},
                                             "workflows": {"type": "enabled"}})
    sess = sdk.beta.sessions.create(agent=lead.id, environment_id=env_id)
    plan = {"name": "Read and merge", "agents": {"reader": {"system": "Read."}}, "inputs": {"docs": ["a", "b"]},
            "phases": [{"name": "Read the documents", "steps": [{"map": {"over": "docs", "as": "doc", "use": "reader",
                                                                          "prompt": "say Read {{doc}}.", "save": "notes"}}]}],
            "result": "{{notes}}"}
    page = open_page(browser, srv)
    page.goto(f"/console/#/sessions/{sess.id}")
    expect(page.locator("#conn")).to_have_text("live")
    page.get_by_label("Message").fill("call ant__start_workflow_run " + json.dumps(plan) + "\n---\nsay started")
    page.get_by_label("Message").press("Control+Enter")
    expect(events_of(page, "workflow_run.status_ended")).to_contain_text("completed")
    expect(events_of(page, "workflow_run.created")).to_contain_text("Read and merge")
    expect(events_of(page, "workflow_run.created").locator(".phases li")).to_have_text(["Read the documents"])
    expect(events_of(page, "workflow_run.phase_started")).to_contain_text('phase "Read the documents" started')
    expect(events_of(page, "session.thread_created")).to_have_count(2)
    expect(events_of(page, "session.thread_created").first).to_contain_text('Run "Read and merge": reader started')
    # The agent's turn on the run's end shows the result.
    expect(events_of(page, "agent.message").last).to_contain_text("Read b.")
    page.context.close()


def test_survives_a_server_restart_mid_stream(browser, srv, sdk, env_id):
    sess = sdk.beta.sessions.create(agent=scripted(sdk, "restart").id, environment_id=env_id)
    page = open_page(browser, srv)
    page.goto(f"/console/#/sessions/{sess.id}")
    expect(page.locator("#conn")).to_have_text("live")
    sdk.beta.sessions.events.send(sess.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "say before"}]}])
    expect(events_of(page, "agent.message")).to_have_count(1)
    expect(page.locator("#session-status")).to_have_text("idle")
    srv.stop()
    expect(page.locator("#conn")).to_have_text("reconnecting…")
    srv.start()
    # Sent as soon as the server is back: the page may not have reconnected yet, so these
    # events can only come from the history it re-reads — none missing, none twice.
    sdk.beta.sessions.events.send(sess.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "say after"}]}])
    expect(events_of(page, "agent.message")).to_have_count(2, timeout=20000)
    expect(events_of(page, "agent.message").last).to_contain_text("after")
    expect(page.locator("#conn")).to_have_text("live")
    want = [e.id for e in sdk.beta.sessions.events.list(sess.id, limit=1000) if e.type != "span.model_request_start"]
    expect(page.locator("#transcript li[data-id]")).to_have_count(len(want))
    shown = page.locator("#transcript li[data-id]").evaluate_all("ns => ns.map(n => n.dataset.id)")
    assert sorted(shown) == sorted(want)
    page.context.close()


def test_a_5000_event_session_stays_responsive(browser, srv, sdk, env_id):
    sess = sdk.beta.sessions.create(agent=scripted(sdk, "bulk").id, environment_id=env_id)
    # Many queued user messages per request; the agent folds them into few turns.
    with sdk.beta.sessions.events.stream(sess.id) as st:
        for batch in range(50):
            sdk.beta.sessions.events.send(sess.id, events=[
                {"type": "user.message", "content": [{"type": "text", "text": f"say m{batch}-{i}"}]} for i in range(100)])
        for ev in st:
            if ev.type == "session.status_idle" and sdk.beta.sessions.retrieve(sess.id).status == "idle":
                break
    listed = list(sdk.beta.sessions.events.list(sess.id, limit=1000))
    assert len(listed) >= 5000
    # A model request's start shows no row, so it is not counted as an earlier row either.
    rows = len([e for e in listed if e.type != "span.model_request_start"])
    page = open_page(browser, srv)
    page.goto(f"/console/#/sessions/{sess.id}")
    expect(page.locator("#conn")).to_have_text("live", timeout=30000)
    expect(events_of(page, "user.message").last).to_contain_text("say m49-99")
    # Windowed: only the newest rows are in the DOM.
    assert page.locator("#transcript li").count() <= 400
    more = page.get_by_role("button", name="Show earlier")
    expect(more).to_be_visible()
    before = page.locator("#transcript li").count()
    expect(more).to_have_text(f"Show earlier ({rows - before} more)")
    t0 = time.time()
    more.click()
    expect(page.locator("#transcript li")).not_to_have_count(before, timeout=5000)
    page.get_by_label("Message").fill("still responsive")
    expect(page.get_by_label("Message")).to_have_value("still responsive", timeout=5000)
    assert time.time() - t0 < 10, "a click on a 5,000-event page answers quickly (loose bound)"
    page.context.close()


@pytest.fixture
def own_server(messages_api):
    """A SQLite server of the test's own, for a test that creates a key (which closes open mode
    for good)."""
    s = Server("sqlite", messages_api)
    yield s
    s.stop()
    shutil.rmtree(s.data_dir, ignore_errors=True)


def test_open_mode_needs_no_key_until_one_is_created(browser, own_server):
    page = open_page(browser, own_server)
    expect(page.locator("#open-mode")).to_be_visible()
    expect(page.get_by_role("button", name="Sign out")).to_be_hidden()
    assert page.evaluate("sessionStorage.length") == 0
    page.get_by_role("link", name="Agents").click()
    expect(page.get_by_role("heading", name="Agents")).to_be_visible()
    page.get_by_role("link", name="Sessions").click()
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible()
    # A key created while the list is open ends open mode: its next poll asks for the key.
    key = create_key(own_server)
    message = page.locator(".signin .err")
    expect(message).to_have_text("This server now requires an API key: one has been created.")
    page.get_by_label("API key").fill("not-" + key)
    page.get_by_role("button", name="Sign in").click()
    expect(message).to_have_text("The API key was rejected.")
    expect(page.get_by_label("API key")).to_be_focused()
    page.get_by_label("API key").fill(key)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Sessions")).to_be_visible()
    expect(page.get_by_role("button", name="Sign out")).to_be_visible()
    expect(page.locator("#open-mode")).to_be_hidden()
    # A new tab on the keyed server asks at once.
    fresh = new_page(browser, own_server)
    fresh.goto("/console/")
    expect(fresh.get_by_role("heading", name="Sign in")).to_be_visible()
    expect(fresh.locator(".signin .err")).to_be_hidden()
    assert page.errors == [] and fresh.errors == []
    fresh.context.close()
    page.context.close()


def test_sessions_waiting_on_the_user_are_marked_and_filtered(browser, srv, sdk, env_id):
    agent = scripted(sdk, "waiter", tools=[WEATHER_TOOL])
    tag = uuid.uuid4().hex[:6]
    waits = sdk.beta.sessions.create(agent=agent.id, environment_id=env_id, title=f"Waits {tag}")
    done = sdk.beta.sessions.create(agent=agent.id, environment_id=env_id, title=f"Done {tag}")
    stop = idle_after(sdk, waits.id, [{"type": "user.message", "content": [
        {"type": "text", "text": 'call get_weather {"city":"Paris"}\n---\nsay It is {{result}}.'}]}]).stop_reason
    assert stop.type == "requires_action"
    assert run(sdk, done.id, ["say hello"])[-1].stop_reason.type == "end_turn"

    page = open_page(browser, srv)
    rows = page.locator("#sessions tr")
    waiting_row = rows.filter(has=page.get_by_role("link", name=f"Waits {tag}"))
    done_row = rows.filter(has=page.get_by_role("link", name=f"Done {tag}"))
    # A text marker beside the status, so a screen reader reads it with the row.
    expect(waiting_row.get_by_role("cell").nth(2)).to_have_text(re.compile(r"^idle\s+waiting on you$"))
    expect(done_row.get_by_role("cell").nth(2)).to_have_text("idle")
    assert waiting_row.locator(".waiting").get_attribute("aria-hidden") is None

    page.get_by_label("Status").select_option(label="waiting on you")
    expect(page.locator("#waiting-note")).to_be_visible()
    expect(done_row).to_have_count(0)
    expect(waiting_row).to_have_count(1)
    # Only sessions that wait are left (other tests' sessions included).
    expect(page.locator("#sessions tr:not(:has(.waiting))")).to_have_count(0)

    # Answered, it leaves the filtered list on a later poll.
    idle = idle_after(sdk, waits.id, [{"type": "user.custom_tool_result", "custom_tool_use_id": stop.event_ids[0],
                                       "content": [{"type": "text", "text": "sunny"}]}])
    assert idle.stop_reason.type == "end_turn"
    expect(waiting_row).to_have_count(0)
    page.get_by_label("Status").select_option(label="any status")
    expect(page.locator("#waiting-note")).to_be_hidden()
    expect(waiting_row.get_by_role("cell").nth(2)).to_have_text("idle")
    assert page.errors == []
    page.context.close()


# Elements of the page that overflow the viewport, and text squeezed to a word per line: for
# every element with three or more words of its own text, its lines (the distinct tops of its
# text's line boxes) must be fewer than its words.
LAYOUT_PROBLEMS = """() => {
  const out = [];
  const w = document.documentElement.clientWidth;
  if (document.documentElement.scrollWidth > innerWidth) out.push(`page scrolls sideways: ${document.documentElement.scrollWidth} > ${innerWidth}`);
  const name = (e) => e.tagName.toLowerCase() + (e.id ? "#" + e.id : "") + (e.className && typeof e.className === "string" ? "." + e.className.trim().split(/\\s+/).join(".") : "");
  for (const e of document.querySelectorAll("#view *, header.top *")) {
    const r = e.getBoundingClientRect();
    if (!r.width) continue;
    if (r.right > w + 1 || r.left < -1) out.push(`${name(e)} spans ${Math.round(r.left)}..${Math.round(r.right)} of ${w}`);
    const texts = [...e.childNodes].filter((n) => n.nodeType === 3 && n.textContent.trim());
    const words = texts.map((n) => n.textContent.trim().split(/\\s+/).length).reduce((a, b) => a + b, 0);
    if (words < 3) continue;
    const tops = [];
    for (const n of texts) {
      const range = document.createRange();
      range.selectNodeContents(n);
      for (const b of range.getClientRects()) if (b.width && !tops.some((t) => Math.abs(t - b.top) < 4)) tops.push(b.top);
    }
    if (tops.length >= words) out.push(`${name(e)}: ${words} words on ${tops.length} lines: ${e.textContent.trim().slice(0, 60)}`);
  }
  return out;
}"""


@pytest.mark.parametrize("width,height", [(390, 844), (360, 740)])
def test_phone_widths_keep_columns_readable(browser, srv, sdk, env_id, width, height):
    agent = scripted(sdk, "phone-agent-with-a-long-name", tools=[WEATHER_TOOL])
    titled = sdk.beta.sessions.create(agent=agent.id, environment_id=env_id, title="The weather in Paris, on a phone")
    untitled = sdk.beta.sessions.create(agent=agent.id, environment_id=env_id)
    run(sdk, titled.id, ["say " + "A long answer with many words to wrap over lines. " * 6])
    assert idle_after(sdk, untitled.id, [{"type": "user.message", "content": [
        {"type": "text", "text": 'call get_weather {"city":"Paris"}'}]}]).stop_reason.type == "requires_action"

    page = open_page(browser, srv, viewport={"width": width, "height": height})
    expect(page.locator(f'#sessions a[href="#/sessions/{titled.id}"]')).to_have_text("The weather in Paris, on a phone")
    # An untitled session shows its id, one long word.
    expect(page.get_by_role("link", name=untitled.id)).to_be_visible()
    expect(page.locator("#sessions .waiting").first).to_be_visible()
    assert page.evaluate(LAYOUT_PROBLEMS) == []

    page.goto(f"/console/#/sessions/{titled.id}")
    expect(page.locator("#conn")).to_have_text("live")
    expect(events_of(page, "agent.message")).to_contain_text("many words")
    expect(page.locator("#usage")).to_contain_text("tokens in")
    assert page.evaluate(LAYOUT_PROBLEMS) == []

    page.goto(f"/console/#/sessions/{untitled.id}")
    expect(page.locator("#conn")).to_have_text("live")
    expect(events_of(page, "agent.custom_tool_use").locator(".pending-label")).to_have_text("Waiting for your result")
    assert page.evaluate(LAYOUT_PROBLEMS) == []
    assert page.errors == []
    page.context.close()


def test_a_short_session_has_no_show_earlier(browser, srv, sdk, env_id):
    sess = sdk.beta.sessions.create(agent=scripted(sdk, "short").id, environment_id=env_id)
    run(sdk, sess.id, ["say hi"])
    page = open_page(browser, srv)
    page.goto(f"/console/#/sessions/{sess.id}")
    expect(page.locator("#conn")).to_have_text("live")
    expect(events_of(page, "agent.message")).to_have_text(re.compile("hi"))
    expect(page.locator("#show-earlier")).to_be_hidden()
    expect(page.get_by_role("button", name=re.compile("Show earlier"))).to_have_count(0)
    page.context.close()


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_screenshots(browser, srv, sdk, env_id, scheme):
    agent = scripted(sdk, "weather-bot", tools=[WEATHER_TOOL], system="You report the weather.")
    sdk.beta.agents.update(agent.id, version=agent.version, system="You report the weather, briefly.")
    sess = sdk.beta.sessions.create(agent=agent.id, environment_id=env_id, title="Weather in Paris")
    page = open_page(browser, srv, scheme)
    page.goto(f"/console/#/sessions/{sess.id}")
    expect(page.locator("#conn")).to_have_text("live")
    page.get_by_label("Message").fill('think\ncall get_weather {"city":"Paris"}\n---\nsay It is {{result}} in Paris.')
    page.get_by_label("Message").press("Control+Enter")
    call = events_of(page, "agent.custom_tool_use")
    call.get_by_label("Result for get_weather").fill("sunny, 21 °C")
    page.screenshot(path=os.path.join(SHOTS, f"session-pending-{scheme}.png"))
    call.get_by_role("button", name="Send result").click()
    expect(events_of(page, "agent.message").last).to_contain_text("It is sunny")
    # The header's figures come from a retrieve that may have started before the last usage
    # event; the picture waits for them to agree.
    expect(events_of(page, "session.status_idle").last).to_contain_text("end turn")
    u = [e for e in sdk.beta.sessions.events.list(sess.id, limit=1000) if e.type == "session.usage"][-1].usage
    expect(page.locator("#usage")).to_contain_text(f"tokens in {u.input_tokens} / out {u.output_tokens}")
    page.screenshot(path=os.path.join(SHOTS, f"session-{scheme}.png"))
    rome = sdk.beta.sessions.create(agent=agent.id, environment_id=env_id, title="Weather in Rome")
    idle_after(sdk, rome.id, [{"type": "user.message", "content": [{"type": "text", "text": 'call get_weather {"city":"Rome"}'}]}])
    page.goto("/console/#/sessions")
    expect(page.locator("#sessions")).to_contain_text("Weather in Paris")
    expect(page.locator("#sessions tr", has_text="Weather in Rome").first.locator(".waiting")).to_be_visible()
    page.screenshot(path=os.path.join(SHOTS, f"sessions-{scheme}.png"))
    page.goto(f"/console/#/agents/{agent.id}")
    expect(page.locator("#diff")).to_contain_text("+ You report the weather, briefly.")
    page.screenshot(path=os.path.join(SHOTS, f"agent-diff-{scheme}.png"))
    page.set_viewport_size({"width": 390, "height": 800})
    page.goto(f"/console/#/sessions/{sess.id}")
    expect(events_of(page, "agent.message").last).to_be_visible()
    page.screenshot(path=os.path.join(SHOTS, f"session-phone-{scheme}.png"))
    assert page.errors == []
    page.context.close()
