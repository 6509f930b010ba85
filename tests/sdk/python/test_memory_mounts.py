"""Memory stores attached to sessions, through the official SDK with strict validation, on
SQLite and Postgres: a store mounted at /mnt/memory/<slug>/, written by one session's agent
(`write`, `bash`) and read by a later one; a read-only mount refusing writes; two sessions
writing one memory at once (the later write is refused, never lost); the attach rules; and
the SDK's own EnvironmentWorker syncing a store of a self-hosted session."""

import json
import threading
import time
import uuid

import anthropic
import pytest

from conftest import results, run, text_of
from test_worker import as_worker, coder, eventually, run_turn, self_hosted, token_of, workers  # noqa: F401 (fixture)





def call(tool: str, **args) -> str:
    return f"call {tool} " + json.dumps(args)


def memories(client, store_id: str) -> dict:
    return {m.path: client.beta.memory_stores.memories.retrieve(m.id, memory_store_id=store_id).content
            for m in client.beta.memory_stores.memories.list(store_id) if m.type == "memory"}


@pytest.fixture
def agent(client):
    return client.beta.agents.create(name="rememberer", model="mast-scripted",
                                     tools=[{"type": "agent_toolset_20260401"}])


def new_store(client, label: str):
    tag = uuid.uuid4().hex[:6]
    store = client.beta.memory_stores.create(name=f"{label} {tag}", description="What we learnt")
    return store, f"/mnt/memory/{label.lower().replace(' ', '-')}-{tag}"


def test_a_memory_one_session_writes_is_read_by_a_later_one(client, environment, agent):
    store, mount = new_store(client, "Team Notes")
    client.beta.memory_stores.memories.create(store.id, path="/old.md", content="stale\n")
    a = client.beta.sessions.create(agent=agent.id, environment_id=environment.id, resources=[
        {"type": "memory_store", "memory_store_id": store.id, "instructions": "Keep user facts in facts/."}])
    [res] = a.resources
    assert res.type == "memory_store" and res.memory_store_id == store.id
    assert res.access == "read_write" and res.instructions == "Keep user facts in facts/."
    assert res.name == store.name and res.description == "What we learnt" and res.mount_path == mount
    assert [r.memory_store_id for r in client.beta.sessions.resources.list(a.id)] == [store.id]

    seen = run(client, a.id, [
        call("bash", command=f"cat {mount}/old.md"),
        call("write", file_path=f"{mount}/facts/user.md", content="likes tea\n"),
        call("bash", command=f"echo 'works late' >> {mount}/facts/user.md; rm {mount}/old.md; "
                             f"printf 'plan' > {mount}/plan.md"),
        call("edit", file_path=f"{mount}/plan.md", old_string="plan", new_string="the plan"),
        "say done",
    ])
    cat, write, bash, edit = results(seen)
    assert not cat.is_error and "stale" in text_of(cat)
    assert not write.is_error and f"{mount}/facts/user.md" in text_of(write)
    assert not bash.is_error and not edit.is_error, text_of(edit)
    assert memories(client, store.id) == {"/facts/user.md": "likes tea\nworks late\n", "/plan.md": "the plan"}
    versions = list(client.beta.memory_stores.memory_versions.list(store.id, session_id=a.id))
    assert {v.operation for v in versions} == {"created", "modified", "deleted"}
    assert all(v.created_by.type == "session_actor" and v.created_by.session_id == a.id for v in versions)

    # A later session, attached read-only, reads what the first one wrote and cannot change it.
    b = client.beta.sessions.create(agent=agent.id, environment_id=environment.id, resources=[
        {"type": "memory_store", "memory_store_id": store.id, "access": "read_only"}])
    seen = run(client, b.id, [
        call("read", file_path=f"{mount}/facts/user.md"),
        call("write", file_path=f"{mount}/facts/user.md", content="hates tea"),
        call("bash", command=f"echo x > {mount}/facts/user.md || echo refused; ls {mount}"),
        "say done",
    ])
    read, write, bash = results(seen)
    assert "likes tea" in text_of(read) and "works late" in text_of(read)
    assert write.is_error and "read-only" in text_of(write)
    assert "refused" in text_of(bash) and "plan.md" in text_of(bash)
    assert memories(client, store.id)["/facts/user.md"] == "likes tea\nworks late\n"

    listed = [s.id for s in client.beta.sessions.list(memory_store_id=store.id)]
    assert sorted(listed) == sorted([a.id, b.id])
    other, _ = new_store(client, "Unused")
    assert list(client.beta.sessions.list(memory_store_id=other.id)) == []


def test_two_sessions_writing_one_memory_never_lose_a_write(client, environment, agent):
    store, mount = new_store(client, "Shared")
    client.beta.memory_stores.memories.create(store.id, path="/todo.md", content="v0\n")
    attach = [{"type": "memory_store", "memory_store_id": store.id}]
    slow = client.beta.sessions.create(agent=agent.id, environment_id=environment.id, resources=attach)
    fast = client.beta.sessions.create(agent=agent.id, environment_id=environment.id, resources=attach)
    done = {}

    def slow_turn():
        # Its copy is taken when the call starts; it writes after the other session has.
        done["slow"] = run(client, slow.id, [
            call("bash", command=f"sleep 6; echo from-slow > {mount}/todo.md"),
            call("bash", command=f"cat {mount}/todo.md"),
            "say done",
        ])

    t = threading.Thread(target=slow_turn)
    t.start()
    eventually(lambda: any(e.type == "agent.tool_use"
                           for e in client.beta.sessions.events.list(slow.id)), what="the slow call to start")
    seen = run(client, fast.id, [call("write", file_path=f"{mount}/todo.md", content="from-fast\n"), "say done"])
    assert not results(seen)[0].is_error
    fast_done = time.time()
    t.join(timeout=60)
    first, second = results(done["slow"])
    assert first.processed_at.timestamp() > fast_done - 1, "the slow write must come after the fast one"
    assert first.is_error and "conflict" in text_of(first) and "/todo.md" in text_of(first)
    # The mount shows the winner again, and the store kept it.
    assert "from-fast" in text_of(second)
    assert memories(client, store.id) == {"/todo.md": "from-fast\n"}
    authors = [v.created_by.session_id for v in client.beta.memory_stores.memory_versions.list(store.id)
               if v.operation == "modified"]
    assert authors == [fast.id]


def test_attaching_memory_stores_is_checked(client, environment, agent):
    store, _ = new_store(client, "Rules")
    twin = client.beta.memory_stores.create(name=store.name.upper())
    make = lambda res: client.beta.sessions.create(agent=agent.id, environment_id=environment.id, resources=res)  # noqa: E731
    with pytest.raises(anthropic.NotFoundError):
        make([{"type": "memory_store", "memory_store_id": "memstore_missing"}])
    with pytest.raises(anthropic.BadRequestError) as e:
        make([{"type": "memory_store", "memory_store_id": store.id},
              {"type": "memory_store", "memory_store_id": store.id, "access": "read_only"}])
    assert "attached twice" in e.value.message
    with pytest.raises(anthropic.BadRequestError) as e:
        make([{"type": "memory_store", "memory_store_id": store.id}, {"type": "memory_store", "memory_store_id": twin.id}])
    assert "collides" in e.value.message
    with pytest.raises(anthropic.BadRequestError):
        make([{"type": "memory_store", "memory_store_id": store.id, "access": "write"}])
    with pytest.raises(anthropic.BadRequestError):
        make([{"type": "memory_store", "memory_store_id": store.id, "instructions": "x" * 4097}])
    many = [client.beta.memory_stores.create(name=f"m{i}").id for i in range(9)]
    with pytest.raises(anthropic.BadRequestError) as e:
        make([{"type": "memory_store", "memory_store_id": m} for m in many])
    assert "at most 8" in e.value.message
    archived = client.beta.memory_stores.create(name="gone")
    client.beta.memory_stores.archive(archived.id)
    with pytest.raises(anthropic.BadRequestError):
        make([{"type": "memory_store", "memory_store_id": archived.id}])
    sess = make([{"type": "memory_store", "memory_store_id": store.id}])
    # Stores attach only at creation.
    with pytest.raises(anthropic.BadRequestError) as e:
        client.post(f"/v1/sessions/{sess.id}/resources", cast_to=object,
                    body={"type": "memory_store", "memory_store_id": twin.id})
    assert "only when the session is created" in e.value.message
    with pytest.raises(anthropic.BadRequestError):
        list(client.beta.sessions.list(memory_store_id="sesn_not_a_store"))
    with pytest.raises(anthropic.NotFoundError):
        list(client.beta.sessions.list(memory_store_id="memstore_missing"))


def test_the_sdk_worker_syncs_an_attached_store(client, server, tmp_path, workers):  # noqa: F811
    env, key = self_hosted(client)
    agent = coder(client)
    store, mount = new_store(client, "Worker Notes")
    client.beta.memory_stores.memories.create(store.id, path="/seed.md", content="from the api\n")
    sess = client.beta.sessions.create(agent=agent.id, environment_id=env.id, resources=[
        {"type": "memory_store", "memory_store_id": store.id}])
    workers(server, env.id, key, tmp_path, max_idle=1.0)
    seen = run_turn(client, sess.id, "\n---\n".join([
        call("read", file_path=f"{mount}/seed.md"),
        call("write", file_path=f"{mount}/learnt.md", content="the worker learnt this\n"),
        "say {{result}}",
    ]))
    read, write = [e for e in seen if e.type == "user.tool_result"]
    assert "from the api" in "".join(c.text for c in read.content if c.type == "text")
    assert not write.is_error
    # The worker saves its changes when it lets the session go, as the session.
    eventually(lambda: "/learnt.md" in memories(client, store.id), timeout=60, what="the worker's upload")
    assert memories(client, store.id)["/learnt.md"] == "the worker learnt this\n"
    [created] = [v for v in client.beta.memory_stores.memory_versions.list(store.id) if v.operation == "created"
                 and v.path == "/learnt.md"]
    assert created.created_by.type == "session_actor" and created.created_by.session_id == sess.id



def test_a_work_token_reaches_only_its_sessions_stores(client, server):
    env, key = self_hosted(client)
    agent = coder(client)
    rw, _ = new_store(client, "Writable")
    ro, _ = new_store(client, "Readable")
    other, _ = new_store(client, "Elsewhere")
    m = client.beta.memory_stores.memories.create(ro.id, path="/a.md", content="a")
    client.beta.sessions.create(agent=agent.id, environment_id=env.id, resources=[
        {"type": "memory_store", "memory_store_id": rw.id},
        {"type": "memory_store", "memory_store_id": ro.id, "access": "read_only"}])
    w = as_worker(server, key)
    # The environment key itself is refused, as upstream's memory endpoints do.
    with pytest.raises(anthropic.PermissionDeniedError):
        list(w.beta.memory_stores.memories.list(rw.id))
    item = w.beta.environments.work.poll(env.id)
    w.beta.environments.work.ack(item.id, environment_id=env.id)
    holder = as_worker(server, token_of(item))
    made = holder.beta.memory_stores.memories.create(rw.id, path="/w.md", content="w")
    assert [x.path for x in holder.beta.memory_stores.memories.list(rw.id)] == ["/w.md"]
    assert holder.beta.memory_stores.memories.retrieve(m.id, memory_store_id=ro.id).content == "a"
    [v] = list(client.beta.memory_stores.memory_versions.list(rw.id, memory_id=made.id))
    assert v.created_by.type == "session_actor" and v.created_by.session_id == item.data.id
    with pytest.raises(anthropic.PermissionDeniedError) as e:
        holder.beta.memory_stores.memories.update(m.id, memory_store_id=ro.id, content="b")
    assert "read-only" in e.value.message
    with pytest.raises(anthropic.PermissionDeniedError):
        list(holder.beta.memory_stores.memories.list(other.id))
    with pytest.raises(anthropic.PermissionDeniedError):
        holder.beta.memory_stores.archive(rw.id)
    with pytest.raises(anthropic.PermissionDeniedError):
        list(holder.beta.memory_stores.list())
