"""Environment packages through the official SDK (strict validation): a pip package installed
from the registry is importable in the sandbox, and a misspelt one is a `session.error` naming
it, with the installer's words in the tool result."""

import json
import uuid

import anthropic
import pytest


def run(client, env_id, command):
    agent = client.beta.agents.create(name="pk", model="mast-scripted", tools=[{"type": "agent_toolset_20260401"}])
    sess = client.beta.sessions.create(agent=agent.id, environment_id=env_id)
    script = "call bash " + json.dumps({"command": command}) + "\n---\nsay {{result}}"
    seen = []
    with client.beta.sessions.events.stream(sess.id) as st:
        client.beta.sessions.events.send(sess.id, events=[{"type": "user.message", "content": [{"type": "text", "text": script}]}])
        for ev in st:
            seen.append(ev)
            if ev.type == "session.status_idle":
                break
    return seen


def test_pip_packages_install_and_misspelt_ones_are_named(client):
    env = client.beta.environments.create(
        name="pk-" + uuid.uuid4().hex[:8],
        config={"type": "cloud", "networking": {"type": "limited", "allow_package_managers": True},
                "packages": {"pip": ["iniconfig==2.0.0"]}},
    )
    assert env.config.packages.pip == ["iniconfig==2.0.0"] and env.config.packages.npm == []
    seen = run(client, env.id, "python3 -c 'import iniconfig; print(iniconfig.__name__)'")
    result = [e for e in seen if e.type == "agent.tool_result"][0]
    assert not result.is_error and result.content[0].text.startswith("iniconfig\n")

    bad = client.beta.environments.create(
        name="pk-" + uuid.uuid4().hex[:8], config={"type": "cloud", "packages": {"pip": ["mast-no-such-package-zqx"]}})
    seen = run(client, bad.id, "echo never")
    result = [e for e in seen if e.type == "agent.tool_result"][0]
    assert result.is_error and "No matching distribution found for mast-no-such-package-zqx" in result.content[0].text
    errors = [e for e in seen if e.type == "session.error"]
    assert len(errors) == 1 and errors[0].error.type == "unknown_error"
    assert "`mast-no-such-package-zqx`" in errors[0].error.message

    # Under `limited` networking, packages need the registries allowed.
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.environments.update(env.id, config={"type": "cloud", "networking": {"type": "limited"}})
    assert "allow_package_managers" in e.value.body["error"]["message"]
