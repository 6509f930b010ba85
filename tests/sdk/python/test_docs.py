"""The examples of docs/ that test_readme.py does not run, run as written against a real
server (variables a page takes from an earlier step, such as `$AGENT`, are made first), and
the check that every shell and Python example of the README and docs/ is run by a test or
marked `<!-- not run: why -->`."""

import os
import json
import sys

import pytest

import test_readme
from docs_examples import ROOT, blocks, unclaimed
from test_mcp import McpProcess
from test_readme import DEFAULT, bash, events, until

# The budget example needs a priced model; the MCP and vault examples reach MCP servers on
# loopback.
SERVER_ENV = {"MAST_PRICES": json.dumps({"mast-scripted": {"input": "1", "output": "2"}}),
              "MAST_ALLOW_PRIVATE_NETWORK": "1"}

FILES_PY = blocks("docs/files-and-resources.md", "## Files", "python")
RESOURCES = blocks("docs/files-and-resources.md", "## Session resources", "sh")
OUTPUTS_SH = blocks("docs/files-and-resources.md", "### Session outputs", "sh")
OUTPUTS_PY = blocks("docs/files-and-resources.md", "### Session outputs", "python")
MEMORY_IN_SESSIONS = blocks("docs/memory.md", "## Memory stores in sessions", "sh")
BUDGETS = blocks("docs/budgets-outcomes-compaction.md", "## Cost and budgets", "sh")
OUTCOMES = blocks("docs/budgets-outcomes-compaction.md", "## Outcomes", "sh")
DEPLOYMENTS = blocks("docs/deployments.md", "# Deployments", "sh")
FORK = blocks("docs/fork.md", "# Session fork (beyond the upstream API)", "python")
MCP = blocks("docs/mcp.md", "# MCP servers", "sh")
VAULTS = blocks("docs/vaults.md", "# Vaults", "sh")
SKILLS = blocks("docs/skills-and-packages.md", "## Skills", "sh")
CLI_SESSION = blocks("docs/configuration.md", "### Sessions from the command line", "sh")
TYPESCRIPT = blocks("README.md", "### With the TypeScript SDK", "js")
TS_DIR = ROOT / "tests" / "sdk" / "typescript"

H = "H='-H anthropic-beta:managed-agents-2026-04-01 -H content-type:application/json'\n"


def here(code: str, server: str) -> str:
    return code.replace(f"B={DEFAULT}", f"B={server}")


def python(code: str, cwd) -> str:
    import subprocess
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=cwd)
    assert out.returncode == 0, out.stderr
    return out.stdout


def client_code(server: str) -> str:
    return f"import anthropic\nclient = anthropic.Anthropic(base_url={server!r}, api_key='docs')\n"


@pytest.fixture
def agent(client):
    return client.beta.agents.create(name="docs", model="mast-scripted", tools=[
        {"type": "agent_toolset_20260401", "default_config": {"permission_policy": {"type": "always_allow"}}}]).id


def prelude(server, agent, environment) -> str:
    return f"B={server}\nAGENT={agent}\nENV={environment.id}\n"


def idle(server, session):
    until("the turn's end", lambda: any(e["type"] == "session.status_idle" for e in events(server, session)), 60)


def test_files_python(server, tmp_path):
    (tmp_path / "report.csv").write_text("city,temp\nParis,21\n")
    python(client_code(server) + FILES_PY[0], tmp_path)
    assert (tmp_path / "copy.csv").read_text() == "city,temp\nParis,21\n"


def test_session_resources(server, agent, environment, tmp_path):
    (tmp_path / "report.csv").write_text("city,temp\nParis,21\n")
    out = bash(prelude(server, agent, environment) + here(RESOURCES[0], server), cwd=tmp_path)
    mounts = [line.split()[1] for line in out.splitlines() if line.startswith("sesrsc_")]
    assert len(mounts) == 2 and mounts[0].startswith("/mnt/session/uploads/file_"), out
    assert mounts[1] == "/mnt/data/report.csv", out


def test_session_outputs(server, client, agent, environment, tmp_path):
    sess = client.beta.sessions.create(agent=agent, environment_id=environment.id)
    client.beta.sessions.events.send(sess.id, events=[{"type": "user.message", "content": [{"type": "text", "text":
        'call bash {"command": "echo Done > /mnt/session/outputs/report.md"}\n---\nsay Written.'}]}])
    idle(server, sess.id)
    (out_file,) = client.beta.files.list(scope_id=sess.id)
    out = bash(f"B={server}\nSID={sess.id}\nOUT={out_file.id}\n" + OUTPUTS_SH[0], cwd=tmp_path)
    assert f"{out_file.id} report.md 5" in out, out
    assert (tmp_path / "report.md").read_text() == "Done\n"
    (tmp_path / "report.md").unlink()
    python(client_code(server) + f"session = client.beta.sessions.retrieve({sess.id!r})\n" + OUTPUTS_PY[0], tmp_path)
    assert (tmp_path / "report.md").read_text() == "Done\n"


def test_memory_stores_in_sessions(server, agent, environment):
    store = bash(f"B={server}\n" + """curl -s $B/v1/memory_stores -H 'anthropic-beta: agent-memory-2026-07-22' \\
      -H 'content-type: application/json' -d '{"name": "Team Notes"}' | jq -r .id""").strip()
    out = bash(prelude(server, agent, environment) + f"H='anthropic-beta: agent-memory-2026-07-22'\nSTORE={store}\n"
               + MEMORY_IN_SESSIONS[0])
    lines = out.splitlines()
    assert json.loads(lines[0]) == {"memory_store_id": store, "access": "read_write", "name": "Team Notes",
                                    "mount_path": "/mnt/memory/team-notes"}, out
    assert lines[-1].startswith("sesn_"), out


def test_budgets(server, agent, environment):
    out = bash(prelude(server, agent, environment) + BUDGETS[0])
    raised, end = json.JSONDecoder().raw_decode(out)  # curl prints the answers without newlines
    removed = json.loads(out[end:])
    assert raised["budget"]["max_list_cost"]["amount"] == "1000", out
    assert removed["budget"] is None, out


def test_outcomes(server, client, agent, environment):
    sess = client.beta.sessions.create(agent=agent, environment_id=environment.id)
    out = bash(f"B={server}\nSID={sess.id}\n" + OUTCOMES[0])
    assert json.loads(out)["data"][0]["type"] == "user.define_outcome", out
    until("the outcome's evaluation", lambda: any(e["type"] == "span.outcome_evaluation_end"
                                                 for e in events(server, sess.id)), 60)


def test_deployments(server, agent, environment):
    out = bash(prelude(server, agent, environment) + H + DEPLOYMENTS[0])
    run = json.JSONDecoder().raw_decode(out)[0]
    assert run["type"] == "deployment_run" and run["error"] is None and run["session_id"], out
    assert out.rstrip().splitlines()[-3:-1] == ['"paused"', "null"], out  # paused, then manual-only
    assert out.rstrip().splitlines()[-1].startswith('"20'), out  # archived_at


def test_fork(server, client, agent, environment):
    sess = client.beta.sessions.create(agent=agent, environment_id=environment.id)
    client.beta.sessions.events.send(sess.id, events=[{"type": "user.message", "content": [{"type": "text", "text": "hello"}]}])
    idle(server, sess.id)
    event_id = events(server, sess.id)[-1]["id"]
    out = python(client_code(server) + f"session = client.beta.sessions.retrieve({sess.id!r})\nevent_id = {event_id!r}\n"
                 + FORK[0], None)
    assert f"'mast.forked_from_session': '{sess.id}'" in out, out


def test_mcp(server):
    mcp = McpProcess("open")
    try:
        code = here(MCP[0], server).replace("MCP_URL=https://mcp.example.com/mcp", f"MCP_URL={mcp.url}")
        code = code.replace("TOOL=search_docs", "TOOL=ping")
        out = bash(code + '\necho "SESSION=$SESSION"')
        session = out.split("SESSION=")[-1].strip()
        said = until("the answer", lambda: [e for e in events(server, session) if e["type"] == "agent.message"], 60)
    finally:
        mcp.kill()
    (use,) = [e for e in events(server, session) if e["type"] == "agent.mcp_tool_use"]
    assert (use["name"], use["mcp_server_name"], use["evaluated_permission"]) == ("ping", "docs", "allow")
    assert said[-1]["content"][0]["text"].startswith("The server said: "), said


def test_vaults(server):
    mcp = McpProcess("secure")
    try:
        code = here(VAULTS[0], server).replace("MCP_URL=https://mcp.example.com/mcp", f"MCP_URL={mcp.url}")
        code = code.replace("TOKEN=my-token", "TOKEN=secret-token").replace("TOOL=search_docs", "TOOL=whoami")
        out = bash(code + '\necho "SESSION=$SESSION"')
        session = out.split("SESSION=")[-1].strip()
        said = until("the answer", lambda: [e for e in events(server, session) if e["type"] == "agent.message"], 60)
    finally:
        mcp.kill()
    lines = out.splitlines()
    assert lines[0] == "valid", out
    assert lines[1].startswith('["vlt_'), out
    assert lines[2] == "user.message", out
    (result,) = [e for e in events(server, session) if e["type"] == "agent.mcp_tool_result"]
    assert not result["is_error"], result
    assert "secret-token" not in json.dumps(events(server, session))
    assert said[-1]["content"][0]["text"].startswith("The server said: "), said


def test_skills(server, tmp_path):
    (tmp_path / "invoice-parser" / "scripts").mkdir(parents=True)
    (tmp_path / "invoice-parser" / "SKILL.md").write_text(
        "---\nname: invoice-parser\ndescription: Reads invoices.\n---\nRun scripts/run.sh on the invoice.\n")
    (tmp_path / "invoice-parser" / "scripts" / "run.sh").write_text("#!/bin/sh\necho parsed\n")
    out = bash(f"B={server}\n" + H + SKILLS[0] + '\necho "AGENT=$AGENT"', cwd=tmp_path)
    assert out.rstrip().splitlines()[-1].startswith("AGENT=agent_"), out
    import zipfile
    assert "invoice-parser/SKILL.md" in zipfile.ZipFile(tmp_path / "skill.zip").namelist()


def test_cli_session(server, environment, tmp_path):
    from conftest import MAST_BIN
    path = os.path.dirname(os.path.abspath(MAST_BIN))
    out = bash(f'export PATH="{path}:$PATH" MAST_URL={server}\nENV={environment.name}\n' + CLI_SESSION[0],
               cwd=tmp_path)
    assert "idle (requires_action: sevt_" in out, out
    assert "WAITING ON YOU (1 call)" in out, out
    assert "  agent     It is sunny in Paris." in out, out
    assert out.rstrip().endswith("  status    idle (end_turn)"), out


def test_typescript_quickstart(server):
    import subprocess
    if not (TS_DIR / "node_modules" / "@anthropic-ai" / "sdk").exists():
        # scripts/test installs them first; a run that requires every test fails instead.
        why = "the TypeScript suite's packages are not installed (npm ci in tests/sdk/typescript)"
        if os.environ.get("MAST_REQUIRE_ALL_TESTS") == "1":
            pytest.fail(why)
        pytest.skip(why)
    code = TYPESCRIPT[0].replace(DEFAULT, server)
    for _ in range(2):  # environment names carry the time, so it runs again as it is
        out = subprocess.run(["node", "--input-type=module", "-e", code], capture_output=True, text=True,
                             timeout=60, cwd=TS_DIR)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "It is sunny in Paris.", out.stdout


def test_every_example_is_run_or_marked_not_run():
    assert test_readme  # its examples are claimed when it is imported
    missing = [f"{b.page}:{b.line} ({b.lang}, under {b.heading!r})" for b in unclaimed()]
    assert not missing, "examples neither run by a test nor marked <!-- not run: why -->:\n" + "\n".join(missing)
