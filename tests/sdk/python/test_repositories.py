"""`github_repository` session resources through the official SDK with strict validation,
against a real git server on loopback (git_server.py): clones of the default branch, of a
branch and of a commit into the workspace, where `bash` and the file tools reach them; a
wrong token, a missing repository, branch or commit and a refused one as the documented
`session.error` types; token rotation; deletion; the environment's network rules. No token
ever shows up in a response, an event, the server's log, the store or the working copy."""

import json
import os
import shutil
import tempfile
import uuid

import anthropic
import pytest

from conftest import BACKENDS, free_port, fresh_postgres, results, text_of, start_mast
from conftest import run as run_script
from git_server import GitServer

TOKEN = "ghp_" + uuid.uuid4().hex + "E2E"
NEW_TOKEN = "ghp_" + uuid.uuid4().hex + "E2E"
WRONG_TOKEN = "ghp_" + uuid.uuid4().hex + "E2E"
SECRETS = (TOKEN, NEW_TOKEN, WRONG_TOKEN)


@pytest.fixture(scope="module")
def gitsrv():
    g = GitServer({TOKEN, NEW_TOKEN})
    yield g
    g.close()
    shutil.rmtree(g.root, ignore_errors=True)


@pytest.fixture(scope="module", params=BACKENDS)
def server(request):
    """A server of this module's own: the git server's loopback address allowed (the operator
    setting, not a weakened default), logs to a file for the final search."""
    port = free_port()
    env = dict(os.environ, MAST_LOG="debug", MAST_ALLOW_PRIVATE_HOSTS="127.0.0.1")
    for k in ("DATABASE_URL", "MAST_SECRET_KEY", "MAST_SECRET_KEY_FILE", "MAST_ALLOW_PRIVATE_NETWORK"):
        env.pop(k, None)
    if request.param == "postgres":
        env["DATABASE_URL"] = fresh_postgres()
    root = tempfile.mkdtemp(prefix="mast-py-repos-")
    # Sandbox users pass through to their workspaces.
    os.chmod(root, 0o711)
    data_dir = os.path.join(root, "data")
    log_path = os.path.join(root, "server.log")
    log = open(log_path, "wb")
    proc, base = start_mast(data_dir, env, port, stdout=log, stderr=log)
    info = {"base": base, "data_dir": data_dir, "log": log_path, "bodies": []}
    yield info
    proc.terminate()
    proc.wait(timeout=15)
    log.close()
    # Nothing the server wrote (its log, the store, the workspaces) holds a token in the clear.
    for dirpath, _, names in os.walk(root):
        for n in names:
            path = os.path.join(dirpath, n)
            if os.path.islink(path) or not os.path.isfile(path):
                continue
            with open(path, "rb") as f:
                data = f.read()
            for s in SECRETS:
                assert s.encode() not in data, f"a token is in {path}"
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def client(server):
    def keep(response):
        if "text/event-stream" not in response.headers.get("content-type", ""):
            response.read()
            server["bodies"].append(response.text)
    import httpx2 as httpx
    http = httpx.Client(event_hooks={"response": [keep]})
    c = anthropic.Anthropic(base_url=server["base"], api_key="sdk-test", _strict_response_validation=True,
                            max_retries=0, http_client=http)
    yield c
    for body in server["bodies"]:
        for s in SECRETS:
            assert s not in body


@pytest.fixture
def environment(client):
    return client.beta.environments.create(name="env-" + uuid.uuid4().hex[:8],
                                           config={"type": "cloud", "networking": {"type": "unrestricted"}})


@pytest.fixture
def agent(client):
    return client.beta.agents.create(name="coder", model="mast-scripted", tools=[{"type": "agent_toolset_20260401"}])


def run(client, sid: str, script: list[str]) -> list:
    def no_secret(ev):
        for s in SECRETS:
            assert s not in ev.to_json()
    return run_script(client, sid, script, check=no_secret)


def errors(seen) -> list:
    return [e.error for e in seen if e.type == "session.error"]



def bash(command: str) -> str:
    return "call bash " + json.dumps({"command": command})


def test_branch_commit_and_default_clones_land_in_the_workspace(client, environment, agent, gitsrv):
    repo = gitsrv.make_repo(f"o/proj-{uuid.uuid4().hex[:6]}.git")
    gitsrv.seen_tokens.clear()
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id, resources=[
        {"type": "github_repository", "url": repo["url"], "authorization_token": TOKEN},
        {"type": "github_repository", "url": repo["url"], "authorization_token": TOKEN,
         "checkout": {"type": "branch", "name": "feature"}, "mount_path": "/workspace/src/feat"},
        {"type": "github_repository", "url": repo["url"], "authorization_token": TOKEN,
         "checkout": {"type": "commit", "sha": repo["first"][:10]}, "mount_path": "/workspace/old"},
    ])
    default, feat, old = sess.resources
    name = repo["url"].rsplit("/", 1)[1].removesuffix(".git")
    assert default.type == "github_repository" and default.id.startswith("sesrsc_")
    assert default.mount_path == f"/workspace/{name}" and default.checkout is None
    assert default.url == repo["url"]
    assert feat.checkout.type == "branch" and feat.checkout.name == "feature"
    assert old.checkout.type == "commit" and old.checkout.sha == repo["first"][:10]
    got = client.beta.sessions.resources.retrieve(feat.id, session_id=sess.id)
    assert got.type == "github_repository" and got.mount_path == "/workspace/src/feat"
    assert [r.id for r in client.beta.sessions.resources.list(sess.id)] == [default.id, feat.id, old.id]

    seen = run(client, sess.id, [
        bash(f"cat {default.mount_path}/README; git -C {default.mount_path} rev-parse HEAD; "
             "cat /workspace/src/feat/feature.txt; git -C /workspace/old rev-parse HEAD; cat /workspace/old/README; "
             f"cat {default.mount_path}/.git/config"),
        "call read " + json.dumps({"file_path": f"{default.mount_path}/README"}),
        "call edit " + json.dumps({"file_path": "/workspace/old/README", "old_string": "first", "new_string": "edited"}),
        bash("cat /workspace/old/README; git -C /workspace/old status --short"),
        "say done",
    ])
    assert errors(seen) == []
    out, read, edit, after = results(seen)
    text = text_of(out)
    assert not out.is_error, text
    assert "second version" in text and repo["second"] in text
    assert "on the feature branch" in text
    assert repo["first"] in text and "first version" in text
    assert "authorization" not in text.lower() and "extraheader" not in text.lower()
    assert not read.is_error and "second version" in text_of(read)
    assert not edit.is_error, text_of(edit)
    assert "edited version" in text_of(after) and "M README" in text_of(after)
    assert set(gitsrv.seen_tokens) == {TOKEN}

    # A later turn keeps the agent's working copy as it left it (no clone over it).
    seen = run(client, sess.id, [bash("cat /workspace/old/README"), "say done"])
    assert "edited version" in text_of(results(seen)[0])

    # Deleting a resource takes its working copy away from the next tool call on.
    client.beta.sessions.resources.delete(feat.id, session_id=sess.id)
    seen = run(client, sess.id, [bash("ls /workspace /workspace/src"), "say done"])
    listing = text_of(results(seen)[0])
    assert name in listing and "old" in listing and "feat" not in listing
    assert [r.id for r in client.beta.sessions.retrieve(sess.id).resources] == [default.id, old.id]


def test_clone_failures_are_session_errors_and_rotation_fixes_a_token(client, environment, agent, gitsrv):
    repo = gitsrv.make_repo(f"o/p-{uuid.uuid4().hex[:6]}.git")
    forbidden = gitsrv.make_repo(f"forbidden/s-{uuid.uuid4().hex[:6]}.git")
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id, resources=[
        {"type": "github_repository", "url": repo["url"], "authorization_token": WRONG_TOKEN, "mount_path": "/workspace/a"},
        {"type": "github_repository", "url": f"{gitsrv.base}/o/missing.git", "authorization_token": TOKEN},
        {"type": "github_repository", "url": repo["url"], "authorization_token": TOKEN, "mount_path": "/workspace/b",
         "checkout": {"type": "branch", "name": "nope"}},
        {"type": "github_repository", "url": repo["url"], "authorization_token": TOKEN, "mount_path": "/workspace/c",
         "checkout": {"type": "commit", "sha": "0123456789abcdef"}},
        {"type": "github_repository", "url": forbidden["url"], "authorization_token": TOKEN},
    ])
    first = sess.resources[0]
    seen = run(client, sess.id, [bash("ls -A /workspace"), "say done"])
    errs = errors(seen)
    assert [e.type for e in errs] == [
        "repository_authentication_error", "repository_not_found_error", "repository_checkout_error",
        "repository_checkout_error", "repository_forbidden_error"]
    assert all(e.retry_status.type == "retrying" for e in errs)
    assert errs[0].repository_url == repo["url"] and "could not be cloned" in errs[0].message
    # The turn went on without them.
    (ls,) = results(seen)
    assert not ls.is_error and not {"a", "b", "c", "missing", forbidden["url"].rsplit("/", 1)[1][:-4]} & set(text_of(ls).split())
    assert seen[-1].type == "session.status_idle" and seen[-1].stop_reason.type == "end_turn"

    rotated = client.beta.sessions.resources.update(first.id, session_id=sess.id, authorization_token=NEW_TOKEN)
    assert rotated.id == first.id and rotated.type == "github_repository"
    assert rotated.updated_at > first.updated_at
    gitsrv.seen_tokens.clear()
    seen = run(client, sess.id, [bash("cat /workspace/a/README"), "say done"])
    assert [e.type for e in errors(seen)] == [
        "repository_not_found_error", "repository_checkout_error", "repository_checkout_error",
        "repository_forbidden_error"]
    assert "second version" in text_of(results(seen)[0])
    assert NEW_TOKEN in gitsrv.seen_tokens and WRONG_TOKEN not in gitsrv.seen_tokens


def test_the_environments_network_rules_apply_to_clones(client, agent, gitsrv):
    repo = gitsrv.make_repo(f"o/n-{uuid.uuid4().hex[:6]}.git")
    closed = client.beta.environments.create(name="closed-" + uuid.uuid4().hex[:8], config={
        "type": "cloud", "networking": {"type": "limited", "allowed_hosts": ["example.com"]}})
    sess = client.beta.sessions.create(agent=agent.id, environment_id=closed.id, resources=[
        {"type": "github_repository", "url": repo["url"], "authorization_token": TOKEN}])
    seen = run(client, sess.id, [bash("ls -A /workspace"), "say done"])
    (err,) = errors(seen)
    assert err.type == "repository_clone_error" and "allowed_hosts" in err.message
    assert err.repository_url == repo["url"]
    # The host was never asked.
    name = repo["url"].split("/", 3)[3]
    assert not any(p.startswith("/" + name) for p in gitsrv.paths)
    assert results(seen)[0].is_error is False


def test_bad_repository_resources_are_refused(client, environment, agent, gitsrv):
    for res, code in [
        ({"type": "github_repository", "url": "git@github.com:o/r.git", "authorization_token": TOKEN}, None),
        ({"type": "github_repository", "url": "file:///etc", "authorization_token": TOKEN}, None),
        ({"type": "github_repository", "url": f"https://x:{TOKEN}@example.com/o/r"}, None),
        ({"type": "github_repository", "url": "https://example.com/o/r", "mount_path": "/mnt/r"}, None),
        ({"type": "github_repository", "url": "https://example.com/o/r", "authorization_token": TOKEN,
          "checkout": {"type": "tag", "name": "v1"}}, None),
        ({"type": "github_repository", "url": "https://example.com/o/r", "token": TOKEN}, "unknown_field"),
    ]:
        with pytest.raises(anthropic.BadRequestError) as e:
            client.beta.sessions.create(agent=agent.id, environment_id=environment.id, resources=[res])
        assert e.value.error_code == code, res
    # Two repositories cannot share (or nest) a working copy.
    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.create(agent=agent.id, environment_id=environment.id, resources=[
            {"type": "github_repository", "url": "https://example.com/a/r"},
            {"type": "github_repository", "url": "https://example.com/b/r.git"}])
    # Self-hosted workers run their own tools; the SDK's worker clones nothing.
    sh = client.beta.environments.create(name="sh-" + uuid.uuid4().hex[:8], config={"type": "self_hosted"})
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.sessions.create(agent=agent.id, environment_id=sh.id, resources=[
            {"type": "github_repository", "url": "https://example.com/o/r", "authorization_token": TOKEN}])
    assert e.value.error_code == "unsupported_feature"
    # Added later (the REST form; SDK 2.10's `add` types only files), and the update rules.
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    added = client.post(f"/v1/sessions/{sess.id}/resources", cast_to=object, body={
        "type": "github_repository", "url": "https://example.com/o/r.git", "authorization_token": TOKEN},
        options={"headers": {"anthropic-beta": "managed-agents-2026-04-01"}})
    assert added["type"] == "github_repository" and added["mount_path"] == "/workspace/r"
    assert "authorization_token" not in added
    with pytest.raises(anthropic.BadRequestError):
        client.beta.sessions.resources.update(added["id"], session_id=sess.id, authorization_token="bad\ntoken")
    with pytest.raises(anthropic.NotFoundError):
        client.beta.sessions.resources.update("sesrsc_missing", session_id=sess.id, authorization_token=NEW_TOKEN)


def test_a_url_git_would_read_differently_never_reaches_git(client, environment, agent, gitsrv):
    """`http://1.1.1.1\\@127.0.0.1:PORT/x.git` is host 1.1.1.1 to the address check and
    127.0.0.1 to git, which would send the token there: refused at creation, on either path,
    and the git server is never asked."""
    repo = gitsrv.make_repo(f"o/amb-{uuid.uuid4().hex[:6]}.git")
    port = gitsrv.base.rsplit(":", 1)[1]
    name = repo["url"].split("/", 3)[3]
    gitsrv.seen_tokens.clear()
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    for url in [f"http://1.1.1.1\\@127.0.0.1:{port}/{name}", f"http://1.1.1.1@127.0.0.1:{port}/{name}",
                f"http://127.0.0.1:{port}/{name} ", f"http://127.0.0.1:{port}\t/{name}"]:
        res = {"type": "github_repository", "url": url, "authorization_token": TOKEN}
        with pytest.raises(anthropic.BadRequestError):
            client.beta.sessions.create(agent=agent.id, environment_id=environment.id, resources=[res])
        with pytest.raises(anthropic.BadRequestError):
            client.post(f"/v1/sessions/{sess.id}/resources", cast_to=object, body=res,
                        options={"headers": {"anthropic-beta": "managed-agents-2026-04-01"}})
    assert not gitsrv.seen_tokens
    assert not any(p.startswith("/" + name) for p in gitsrv.paths)


def test_a_refused_address_reads_like_a_closed_port(client, environment, agent, gitsrv):
    """The session cannot map addresses and ports with clones: an address the guard refuses
    (127.0.0.2, loopback, not among the allowed private hosts) and a closed port on an allowed
    address give the same error."""
    closed = free_port()
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id, resources=[
        {"type": "github_repository", "url": f"http://127.0.0.2:{closed}/o/a.git", "mount_path": "/workspace/a"},
        {"type": "github_repository", "url": f"http://127.0.0.1:{closed}/o/b.git", "mount_path": "/workspace/b"}])
    seen = run(client, sess.id, [bash("ls -A /workspace"), "say done"])
    refused, closed_port = errors(seen)
    assert refused.type == closed_port.type == "repository_clone_error"
    # After the repository and its mount path, which differ, the two read the same.
    why = [e.message.split(": ", 1)[1].replace(host, "H")
           for e, host in [(refused, "127.0.0.2"), (closed_port, "127.0.0.1")]]
    assert why[0] == why[1], why
