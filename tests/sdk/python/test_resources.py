"""Agents, environments and sessions through the official SDK with strict validation."""

import uuid

import anthropic
import pytest

from conftest import WEATHER_TOOL


def test_agent_versions_archive_and_lists(client):
    a = client.beta.agents.create(
        name="Weather bot",
        model="claude-opus-4-7",
        tools=[
            {"type": "agent_toolset_20260401", "configs": [{"name": "bash", "permission_policy": {"type": "always_ask"}}]},
            WEATHER_TOOL,
        ],
        mcp_servers=[],
        metadata={"team": "infra"},
    )
    assert a.type == "agent" and a.version == 1
    assert a.model.id == "claude-opus-4-7" and a.model.effort.type == "high"
    assert a.tools[0].configs[0].permission_policy.type == "always_ask"
    assert a.mcp_servers == []
    b = client.beta.agents.update(a.id, version=1, system="Be brief.", metadata={"team": None, "x": "y"})
    assert b.version == 2 and b.system == "Be brief." and b.metadata == {"x": "y"}
    with pytest.raises(anthropic.ConflictError) as e:
        client.beta.agents.update(a.id, version=1, name="stale")
    assert e.value.request_id and e.value.request_id.startswith("req_")
    assert client.beta.agents.retrieve(a.id, version=1).system is None
    assert client.beta.agents.retrieve(a.id).version == 2
    versions = [v.version for v in client.beta.agents.versions.list(a.id)]
    assert versions == [2, 1]
    archived = client.beta.agents.archive(a.id)
    assert archived.archived_at is not None
    assert a.id not in [x.id for x in client.beta.agents.list()]
    assert a.id in [x.id for x in client.beta.agents.list(include_archived=True)]
    with pytest.raises(anthropic.NotFoundError):
        client.beta.agents.retrieve("agent_missing")


def test_auto_pagination_visits_everything_once(client):
    made = {client.beta.agents.create(name=f"p{i}", model="mast-scripted").id for i in range(5)}
    seen = [a.id for a in client.beta.agents.list(limit=2)]
    assert made <= set(seen)
    assert len(seen) == len(set(seen))


def test_validation_errors(client):
    # What Mast does not do yet is refused with a stable code, never stored and ignored.
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.agents.create(
            name="m", model="mast-scripted", tools=[{"type": "agent_toolset_20260401"}],
            skills=[{"type": "anthropic", "skill_id": "xlsx"}]
        )
    assert e.value.error_code == "unsupported_feature"
    assert e.value.body["error"]["details"]["field"] == "skills[0].type"
    # An MCP server needs a toolset that exposes it.
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.agents.create(
            name="m",
            model="mast-scripted",
            mcp_servers=[{"type": "url", "name": "linear", "url": "https://mcp.linear.app/mcp"}],
        )
    assert "no `mcp_toolset`" in e.value.body["error"]["message"]
    # A typo at any depth is named, with the key probably meant.
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.environments.create(
            name="typo-" + uuid.uuid4().hex[:8],
            config={"type": "cloud", "netwrking": {"type": "limited"}},
        )
    assert e.value.error_code == "unknown_field"
    assert "did you mean `networking`?" in e.value.body["error"]["message"]
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.agents.create(name="m", model="mast-scripted", metadata={f"k{i}": "v" for i in range(17)})
    assert e.value.body["error"]["details"]["error_code"] == "invalid_metadata"
    with pytest.raises(anthropic.BadRequestError):
        client.beta.agents.create(name="t", model="mast-scripted", tools=[{"type": "custom", "name": "bad name", "description": "d", "input_schema": {"type": "object"}}])


def test_environment_lifecycle(client):
    name = "py-" + uuid.uuid4().hex[:8]
    env = client.beta.environments.create(name=name)
    assert env.config.type == "cloud" and env.config.networking.type == "unrestricted"
    assert env.config.packages.pip == []
    with pytest.raises(anthropic.ConflictError):
        client.beta.environments.create(name=name)
    up = client.beta.environments.update(env.id, description="d", config={"type": "cloud", "networking": {"type": "limited", "allowed_hosts": ["api.example.com"]}})
    assert up.description == "d" and up.config.networking.allowed_hosts == ["api.example.com"]
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.environments.update(env.id, config={"type": "self_hosted"})
    assert e.value.body["error"]["details"]["error_code"] == "invalid_config_type_change"
    assert env.id in [x.id for x in client.beta.environments.list()]
    assert client.beta.environments.archive(env.id).archived_at is not None
    deleted = client.beta.environments.delete(env.id)
    assert deleted.id == env.id and deleted.type == "environment_deleted"
    with pytest.raises(anthropic.NotFoundError):
        client.beta.environments.retrieve(env.id)


def test_session_lifecycle(client, environment):
    agent = client.beta.agents.create(name="s", model="mast-scripted", tools=[WEATHER_TOOL])
    s = client.beta.sessions.create(agent=agent.id, environment_id=environment.id, title="t", metadata={"k": "v"})
    assert s.status == "idle" and s.agent.id == agent.id and s.usage.input_tokens == 0
    pinned = client.beta.sessions.create(agent={"type": "agent", "id": agent.id, "version": 1}, environment_id=environment.id)
    assert pinned.agent.version == 1
    u = client.beta.sessions.update(s.id, title=None, metadata={"k": None, "n": "1"})
    assert u.title is None and u.metadata == {"n": "1"}
    u = client.beta.sessions.update(s.id, agent={"tools": []})
    assert u.agent.tools == []
    ids = [x.id for x in client.beta.sessions.list(agent_id=agent.id, limit=1)]
    assert set(ids) == {s.id, pinned.id}
    assert client.beta.sessions.archive(pinned.id).archived_at is not None
    deleted = client.beta.sessions.delete(s.id)
    assert deleted.type == "session_deleted"
    with pytest.raises(anthropic.NotFoundError):
        client.beta.sessions.retrieve(s.id)


def test_models_catalog(client):
    ids = [m.id for m in client.models.list()]
    assert "mast-scripted" in ids and "claude-opus-4-7" in ids
    page = client.models.list(limit=2)
    assert len(page.data) == 2 and page.has_more
    assert client.models.retrieve("claude-opus-4-7").display_name == "Claude Opus 4.7"
    with pytest.raises(anthropic.NotFoundError):
        client.models.retrieve("no-such-model")
