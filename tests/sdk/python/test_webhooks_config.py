"""Webhook endpoints from the config file (`[[webhooks]]` in mast.toml): the endpoint is in
place when the server starts, signs with the secret the file gives (verified by the SDK's
`unwrap` and by `standardwebhooks`), and is listed like any endpoint of its workspace."""

import json
import os
import tempfile

from test_webhooks import FAST, Receiver, api, verified

SECRET = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
RECEIVER = Receiver()
_config = tempfile.NamedTemporaryFile("w", suffix=".toml", delete=False)
_config.write(f'[[webhooks]]\nurl = "{RECEIVER.url}"\nevent_types = ["agent.created"]\n'
              f'description = "from the file"\nsigning_secret = "{SECRET}"\n')
_config.close()
SERVER_ENV = dict(FAST, MAST_ALLOW_PRIVATE_NETWORK="1", MAST_CONFIG=_config.name)


def test_the_config_files_endpoint_receives_signed_events(client, server):
    status, page = api(server, "GET", "/v1/mast/webhook_endpoints")
    assert status == 200
    [ep] = [e for e in page["data"] if e["id"] == "whep_config_1"]
    assert (ep["url"], ep["event_types"], ep["description"], ep["enabled"]) == \
        (RECEIVER.url, ["agent.created"], "from the file", True)
    assert "signing_secret" not in ep, "the file holds the secret; the API never shows it"
    agent = client.beta.agents.create(name="configured", model="mast-scripted")
    RECEIVER.wait(lambda r: any(json.loads(b)["data"]["id"] == agent.id for _, b in r.delivered()))
    [(headers, body)] = [(h, b) for h, b in RECEIVER.delivered() if json.loads(b)["data"]["id"] == agent.id]
    event = verified(client, SECRET, headers, body)
    assert event.data.type == "agent.created" and event.data.id == agent.id


def teardown_module():
    RECEIVER.httpd.shutdown()
    os.unlink(_config.name)
