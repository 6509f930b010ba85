"""Skills through the official SDK with strict validation: a folder uploaded with
`files_from_dir`, its versions and zip download, bundle errors that say what is wrong, a
custom skill on an agent (named in the model's system prompt, mounted read-only at
/mnt/skills/<name>/ and read there), and the SDK's self-hosted worker fetching it."""

import io
import json
import stat
import uuid
import zipfile

import anthropic
import pytest
from anthropic.lib import files_from_dir

from conftest import MessagesHandler, run, text_of
from test_worker import run_turn, self_hosted, workers  # noqa: F401 (fixture)

TOOLSET = {"type": "agent_toolset_20260401"}


def bundle(tmp_path, name, description="Greets people by name."):
    d = tmp_path / uuid.uuid4().hex[:6] / name
    (d / "scripts").mkdir(parents=True)
    (d / "SKILL.md").write_text(
        f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nRun scripts/greet.sh NAME.\n")
    (d / "scripts" / "greet.sh").write_text("#!/bin/sh\necho hello $1\n")
    return d


def skill_name():
    return "greeter-" + uuid.uuid4().hex[:6]




def test_skills_their_versions_and_download(client, tmp_path):
    name = skill_name()
    s = client.beta.skills.create(files=files_from_dir(bundle(tmp_path, name)), display_name="Greeter")
    assert s.type == "skill" and s.id.startswith("skill_") and s.source.type == "custom"
    assert s.display_name == "Greeter"
    v1 = client.beta.skills.versions.retrieve("latest", skill_id=s.id)
    assert (v1.type, v1.id, v1.skill_id, v1.name) == ("skill_version", s.latest_version_id, s.id, name)
    assert v1.description == "Greets people by name."
    assert client.beta.skills.retrieve(s.id).latest_version_id == v1.id
    assert s.id in [x.id for x in client.beta.skills.list(source="custom")]
    assert s.id not in [x.id for x in client.beta.skills.list(source="anthropic")]
    # Without display_name, SKILL.md's name stands in.
    plain = client.beta.skills.create(files=files_from_dir(bundle(tmp_path, skill_name())))
    assert plain.display_name == client.beta.skills.versions.retrieve("latest", skill_id=plain.id).name

    v2 = client.beta.skills.versions.create(s.id, files=files_from_dir(bundle(tmp_path, name, "Greets, v2.")))
    assert v2.description == "Greets, v2." and v2.name == name
    assert client.beta.skills.retrieve(s.id).latest_version_id == v2.id
    assert [v.id for v in client.beta.skills.versions.list(s.id)] == [v2.id, v1.id]
    assert [v.id for v in client.beta.skills.versions.list(s.id, limit=1)] == [v2.id, v1.id]

    data = client.beta.skills.versions.download(v2.id, skill_id=s.id).read()
    with zipfile.ZipFile(io.BytesIO(data)) as z:
        assert sorted(z.namelist()) == [f"{name}/SKILL.md", f"{name}/scripts/greet.sh"]
        assert "Greets, v2." in z.read(f"{name}/SKILL.md").decode()
        mode = z.getinfo(f"{name}/scripts/greet.sh").external_attr >> 16
        assert mode & stat.S_IXUSR, "scripts keep their execute bit"

    gone = client.beta.skills.versions.delete(v2.id, skill_id=s.id)
    assert (gone.id, gone.type) == (v2.id, "skill_version_deleted")
    assert client.beta.skills.retrieve(s.id).latest_version_id == v1.id
    with pytest.raises(anthropic.NotFoundError):
        client.beta.skills.versions.retrieve(v2.id, skill_id=s.id)
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.skills.versions.delete(v1.id, skill_id=s.id)
    assert "delete the skill instead" in e.value.message
    d = client.beta.skills.delete(s.id)
    assert (d.id, d.type) == (s.id, "skill_deleted")
    with pytest.raises(anthropic.NotFoundError):
        client.beta.skills.retrieve(s.id)
    with pytest.raises(anthropic.NotFoundError):
        client.beta.skills.versions.list(s.id)


def test_bad_bundles_say_what_is_wrong_and_store_nothing(client, tmp_path):
    before = [x.id for x in client.beta.skills.list(limit=1000)]
    md = b"---\nname: ok-skill\ndescription: d\n---\n"

    def refused(files, status=anthropic.BadRequestError):
        with pytest.raises(status) as e:
            client.beta.skills.create(files=files)
        return e.value.message

    assert "no SKILL.md at `tool/`" in refused([("tool/README.md", b"hi")])
    assert "front matter" in refused([("tool/SKILL.md", b"# no front matter\n")])
    assert "`description`" in refused([("tool/SKILL.md", b"---\nname: tool\n---\n")])
    assert "kebab-case" in refused([("tool/SKILL.md", b"---\nname: Not A Slug\ndescription: d\n---\n")])
    assert "`..`" in refused([("tool/../SKILL.md", md)])
    assert "same top-level folder" in refused([("a/SKILL.md", md), ("b/x.txt", b"x")])
    big = [("ok-skill/SKILL.md", md), ("ok-skill/big.bin", b"0" * (8 * 1024 * 1024 + 1))]
    with pytest.raises(anthropic.APIStatusError) as e:
        client.beta.skills.create(files=big)
    assert e.value.status_code == 413
    assert [x.id for x in client.beta.skills.list(limit=1000)] == before

    s = client.beta.skills.create(files=[("ok-skill/SKILL.md", md)])
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.skills.versions.create(s.id, files=[("other/SKILL.md", b"---\nname: other\ndescription: d\n---\n")])
    assert "keeps its name" in e.value.message
    assert [v.id for v in client.beta.skills.versions.list(s.id)] == [s.latest_version_id]


def test_an_agents_skill_is_prompted_mounted_and_read(client, environment, tmp_path):
    name = skill_name()
    s = client.beta.skills.create(files=files_from_dir(bundle(tmp_path, name)))
    ref = [{"type": "custom", "skill_id": s.id}]
    agent = client.beta.agents.create(name="skilled", model="mast-scripted", tools=[TOOLSET], skills=ref)
    assert [(k.type, k.skill_id, k.version) for k in agent.skills] == [("custom", s.id, "latest")]

    # Refusals: no `read` tool, a missing skill or version, Anthropic's own skills.
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.agents.create(name="x", model="mast-scripted", skills=ref)
    assert "`read` tool" in e.value.message
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.agents.create(name="x", model="mast-scripted", tools=[TOOLSET],
                                  skills=[{"type": "custom", "skill_id": "skill_missing"}])
    assert "skill `skill_missing` not found" in e.value.message
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.agents.create(name="x", model="mast-scripted", tools=[TOOLSET],
                                  skills=[{"type": "custom", "skill_id": s.id, "version": "nope"}])
    assert "no version `nope`" in e.value.message
    with pytest.raises(anthropic.BadRequestError) as e:
        client.beta.agents.create(name="x", model="mast-scripted", tools=[TOOLSET],
                                  skills=[{"type": "anthropic", "skill_id": "xlsx"}])
    assert e.value.error_code == "unsupported_feature" and "custom skill" in e.value.message

    # A session pins `latest` to the version it is now.
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    assert sess.agent.skills[0].version == s.latest_version_id
    client.beta.skills.versions.create(s.id, files=files_from_dir(bundle(tmp_path, name, "Later version.")))
    assert client.beta.sessions.retrieve(sess.id).agent.skills[0].version == s.latest_version_id

    root = f"/mnt/skills/{name}"
    seen = run(client, sess.id, [
        "call read " + json.dumps({"file_path": f"{root}/SKILL.md"}),
        "call bash " + json.dumps({"command": f"{root}/scripts/greet.sh world; touch {root}/x || echo refused"}),
        "call write " + json.dumps({"file_path": f"{root}/SKILL.md", "content": "changed"}),
        "say done",
    ])
    read, bash, write = [e for e in seen if e.type == "agent.tool_result"]
    assert not read.is_error and "Run scripts/greet.sh NAME." in text_of(read)
    assert "Greets people by name." in text_of(read), "the pinned version, not the later one"
    assert "hello world" in text_of(bash) and "refused" in text_of(bash)
    assert write.is_error and "read-only" in text_of(write)

    # The model is told about the skill in its system prompt (a Claude model: the fake
    # Messages API records what it is sent).
    claude = client.beta.agents.create(name="prompted", model="claude-sonnet-4-5", system="Be brief.",
                                       tools=[TOOLSET], skills=ref)
    sess = client.beta.sessions.create(agent=claude.id, environment_id=environment.id)
    MessagesHandler.received.clear()
    run(client, sess.id, ["hello"])
    systems = [json.dumps(b.get("system")) for b in MessagesHandler.received]
    mine = [p for p in systems if f"<name>{name}</name>" in p]
    assert mine, systems
    assert "Be brief." in mine[0] and "Later version." in mine[0]
    assert f"{root}/SKILL.md" in mine[0]


def test_the_sdk_worker_fetches_a_sessions_skills(client, server, tmp_path, workers):  # noqa: F811
    env, key = self_hosted(client)
    name = skill_name()
    s = client.beta.skills.create(files=files_from_dir(bundle(tmp_path, name)))
    agent = client.beta.agents.create(
        name="coder", model="mast-scripted", skills=[{"type": "custom", "skill_id": s.id}],
        tools=[{"type": "agent_toolset_20260401", "default_config": {"permission_policy": {"type": "always_allow"}}}])
    sess = client.beta.sessions.create(agent=agent.id, environment_id=env.id)
    workdir = tmp_path / "work"
    workers(server, env.id, key, workdir)
    seen = run_turn(client, sess.id, "\n---\n".join([
        "call read " + json.dumps({"file_path": f"skills/{name}/SKILL.md"}),
        "call bash " + json.dumps({"command": f"skills/{name}/scripts/greet.sh worker"}),
        "say {{result}}",
    ]))
    read, bash = [e for e in seen if e.type == "user.tool_result"]
    assert "Run scripts/greet.sh NAME." in "".join(c.text for c in read.content if c.type == "text")
    assert "hello worker" in "".join(c.text for c in bash.content if c.type == "text")

    # An environment key reads no skills (the worker uses the item's sessions token).
    as_env = anthropic.Anthropic(base_url=server, auth_token=key, _strict_response_validation=True, max_retries=0)
    with pytest.raises(anthropic.PermissionDeniedError):
        as_env.beta.skills.versions.retrieve("latest", skill_id=s.id)
