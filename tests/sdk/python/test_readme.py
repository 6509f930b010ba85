"""The README's examples, and the manual's that ran from the README before it was split into
docs/, run as written against a real server: the curl quickstart, the Python one twice in a row
(a newcomer runs it again; it must not trip over its own names), the multiagent example, the
self-hosted walk-through with its worker, the Files and the memory stores examples. The other
examples of docs/ run in test_docs.py."""

import json
import os
import re
import subprocess
import sys
import time
import urllib.request

from docs_examples import ROOT, blocks

DEFAULT = "http://127.0.0.1:8080"

# Extracted at import, so that test_docs.py's check sees which blocks these tests run.
CURL = blocks("README.md", "### With curl", "sh")
PYTHON = blocks("README.md", "### With the Python SDK", "python")
MULTIAGENT = blocks("docs/multiagent.md", "# Multiagent sessions", "sh")
SELF_HOSTED = blocks("docs/self-hosted-workers.md", "# Self-hosted workers", "sh")
FILES = blocks("docs/files-and-resources.md", "## Files", "sh")
MEMORY = blocks("docs/memory.md", "# Memory stores", "sh")


def events(server: str, session: str) -> list[dict]:
    with urllib.request.urlopen(f"{server}/v1/sessions/{session}/events?limit=1000") as r:
        return json.load(r)["data"]


def until(what: str, check, secs: float = 20):
    deadline = time.time() + secs
    while time.time() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_curl_quickstart(server):
    first, answer = CURL
    first = first.replace(f"B={DEFAULT}", f"B={server}")
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", first + '\necho "SESSION=$SESSION"'],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    session = re.search(r"SESSION=(sesn_\w+)", out.stdout).group(1)
    assert f"target/release/mast sessions tail --from-start --url {server} {session}" in out.stdout
    until("the tool call", lambda: any(e["type"] == "session.status_idle" for e in events(server, session)))
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", f"B={server}\nSESSION={session}\n{answer}"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    said = until("the answer", lambda: [e for e in events(server, session) if e["type"] == "agent.message"])
    assert said[-1]["content"][0]["text"] == "It is sunny in Paris."


def test_python_quickstart_twice(server):
    (code,) = PYTHON
    code = code.replace(DEFAULT, server)
    weather = []
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "It is sunny in Paris.", out.stdout
        weather.append(agents_named(server, "weather"))
    # The second run reuses what the first made, as a newcomer running it again expects.
    assert weather[0] == weather[1] and len(weather[0]) >= 1, weather


def agents_named(server: str, name: str) -> list[str]:
    with urllib.request.urlopen(f"{server}/v1/agents?limit=100") as r:
        return [a["id"] for a in json.load(r)["data"] if a["name"] == name]


def bash(script: str, cwd=None) -> str:
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", script], capture_output=True, text=True,
                         timeout=120, cwd=cwd)
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_multiagent_example(server):
    (example,) = MULTIAGENT
    out = bash(example.replace(f"B={DEFAULT}", f"B={server}"))
    assert "The reviewer says: Looks good to me." in out, out
    threads = [line.split() for line in out.splitlines() if line.startswith("sthr_")]
    assert [t[1:] for t in threads] == [["lead", "idle"], ["reviewer", "idle"]], out


def test_self_hosted_walk_through(server, tmp_path):
    setup, worker, ask = SELF_HOSTED
    variables = bash(setup.replace(f"B={DEFAULT}", f"B={server}") + '\necho "$ENV $KEY $SESSION"').split()
    env_id, key, session = variables[-3:]
    (command,) = [line for line in worker.splitlines() if "examples/worker.py" in line]
    assert command.startswith("MAST_URL=$B MAST_ENVIRONMENT_ID=$ENV MAST_ENVIRONMENT_KEY=$KEY python examples/worker.py")
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "examples" / "worker.py"), "--workdir", "./workspace"], cwd=tmp_path,
        env=dict(os.environ, MAST_URL=server, MAST_ENVIRONMENT_ID=env_id, MAST_ENVIRONMENT_KEY=key),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        out = bash(f"B={server}\nSESSION={session}\n{ask}")
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()
    assert out.strip().endswith("The worker runs Linux"), out
    assert (tmp_path / "workspace" / "os.txt").read_text().strip() == "Linux"


def test_files_curl_example(server, tmp_path):
    (code,) = FILES
    code = code.replace(f"B={DEFAULT}", f"B={server}")
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert re.search(r"^file_\w+ report\.csv 19$", out.stdout, re.M), out.stdout
    assert '"mime_type": "text/csv"' in out.stdout
    assert (tmp_path / "copy.csv").read_text() == "city,temp\nParis,21\n"
    assert out.stdout.rstrip().endswith('"type":"file_deleted"}'), out.stdout


def test_memory_stores_curl_example(server, tmp_path):
    (code,) = MEMORY
    code = code.replace(f"B={DEFAULT}", f"B={server}")
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", code], capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    import hashlib
    assert lines[0] == hashlib.sha256(b"Deploys on Thursdays.").hexdigest(), out.stdout
    assert lines[1:3] == ["memory /projects/bar.md", "memory_prefix /projects/foo/"], out.stdout
    assert lines[3] == '{"operation":"created","content":null,"redacted_at":true}', out.stdout
    assert json.loads(lines[4])["type"] == "memory_store_deleted", out.stdout
