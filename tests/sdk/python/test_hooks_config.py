"""Hooks from the config file (`[[hooks]]` in mast.toml): the operator's hook is
asked in every workspace with the secret the file gives, before any hook of the workspace,
and is not listed by the API."""

import os
import tempfile

from conftest import results, run, text_of
from test_hooks import Receiver, add_hook, call, coder

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
RECEIVER = Receiver()
RECEIVER.rules["operator"] = lambda p: (0, {"decision": "deny", "reason": "the operator forbids rm"}
                                        if "rm " in p["tool_input"].get("command", "") else {"decision": "allow"})
RECEIVER.secrets["hook_config_1"] = SECRET
_config = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
_config.write(f'[[hooks]]\nevent = "pre_tool_use"\nurl = "{RECEIVER.base}/operator"\n'
              f'matcher = "bash"\nsigning_secret = "{SECRET}"\n')
_config.close()
SERVER_ENV = {"MAST_ALLOW_PRIVATE_NETWORK": "1", "MAST_CONFIG": _config.name}


def test_the_config_files_hook_is_asked_first_in_every_workspace(client, environment):
    agent = coder(client)
    own = add_hook(client, RECEIVER, lambda p: (0, {"decision": "allow"}), matcher="bash",
                   scope={"type": "agent", "agent_id": agent.id})
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    seen = run(client, sess.id, [call("bash", command="echo fine"), call("bash", command="rm -rf /workspace/x"), "say {{result}}"])
    uses = [e for e in seen if e.type == "agent.tool_use"]
    assert [u.evaluated_permission for u in uses] == ["allow", "deny"]
    assert [h["hook_id"] for h in uses[0].evaluation.hooks] == ["hook_config_1", own["id"]]
    assert [h["hook_id"] for h in uses[1].evaluation.hooks] == ["hook_config_1"], "a deny stops the asking"
    denied = results(seen)[-1]
    assert denied.is_error and "the operator forbids rm" in text_of(denied)
    calls = [c for c in RECEIVER.of("operator") if c["payload"]["session_id"] == sess.id]
    assert len(calls) == 2 and all(c["verified"] for c in calls)
    listed = client.get("/v1/mast/hooks", cast_to=object)["data"]
    assert [h["id"] for h in listed] == [own["id"]], "the operator's hook is not the workspace's"


def teardown_module():
    RECEIVER.httpd.shutdown()
    os.unlink(_config.name)
