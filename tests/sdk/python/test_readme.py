"""The README's quickstarts, run as written against a real server: the curl one, then the
Python one twice in a row (a newcomer runs it again; it must not trip over its own names)."""

import re
import subprocess
import sys
import time
import urllib.request
import json
from pathlib import Path

README = (Path(__file__).resolve().parents[3] / "README.md").read_text()
DEFAULT = "http://127.0.0.1:8080"


def blocks(heading: str, lang: str) -> list[str]:
    """The fenced `lang` blocks of the README section under `heading`."""
    section = README.split(heading, 1)[1].split("\n### ", 1)[0].split("\n## ", 1)[0]
    return re.findall(rf"```{lang}\n(.*?)```", section, re.S)


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
    first, answer = blocks("### With curl", "sh")
    first = first.replace(f"B={DEFAULT}", f"B={server}")
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", first + '\necho "SESSION=$SESSION"'],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    session = re.search(r"SESSION=(sesn_\w+)", out.stdout).group(1)
    assert f"curl -N {server}/v1/sessions/{session}/events/stream" in out.stdout
    until("the tool call", lambda: any(e["type"] == "session.status_idle" for e in events(server, session)))
    out = subprocess.run(["bash", "-euo", "pipefail", "-c", f"B={server}\nSESSION={session}\n{answer}"],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    said = until("the answer", lambda: [e for e in events(server, session) if e["type"] == "agent.message"])
    assert said[-1]["content"][0]["text"] == "It is sunny in Paris."


def test_python_quickstart_twice(server):
    (code,) = blocks("### With the Python SDK", "python")
    code = code.replace(DEFAULT, server)
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip() == "It is sunny in Paris.", out.stdout
