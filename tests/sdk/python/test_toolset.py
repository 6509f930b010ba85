"""The built-in toolset through the official SDK: write a file, run it with bash (which asks
for confirmation), and read its output back."""

import json


def test_write_run_read_with_confirmation(client, environment):
    agent = client.beta.agents.create(
        name="coder",
        model="mast-scripted",
        tools=[{"type": "agent_toolset_20260401",
                "configs": [{"name": "bash", "permission_policy": {"type": "always_ask"}}]}],
    )
    assert agent.tools[0].configs[0].permission_policy.type == "always_ask"
    sess = client.beta.sessions.create(agent=agent.id, environment_id=environment.id)
    script = "\n---\n".join([
        "call write " + json.dumps({"file_path": "/workspace/calc.py", "content": "print(6 * 7)\n"}),
        "call bash " + json.dumps({"command": "python3 calc.py > answer.txt"}),
        "call read " + json.dumps({"file_path": "answer.txt"}),
        "say The answer file says: {{result}}",
    ])
    asked = []
    seen = []
    with client.beta.sessions.events.stream(sess.id) as st:
        client.beta.sessions.events.send(sess.id, events=[{"type": "user.message", "content": [{"type": "text", "text": script}]}])
        for ev in st:
            seen.append(ev)
            if ev.type == "session.status_idle":
                if ev.stop_reason.type != "requires_action":
                    break
                for tool_use_id in ev.stop_reason.event_ids:
                    asked.append(tool_use_id)
                    client.beta.sessions.events.send(sess.id, events=[
                        {"type": "user.tool_confirmation", "tool_use_id": tool_use_id, "result": "allow"}])
    uses = [e for e in seen if e.type == "agent.tool_use"]
    assert [u.name for u in uses] == ["write", "bash", "read"]
    assert [u.evaluated_permission for u in uses] == ["allow", "ask", "allow"]
    assert uses[1].evaluation.type == "always_ask"
    assert asked == [uses[1].id], "only bash needed a confirmation"
    results = [e for e in seen if e.type == "agent.tool_result"]
    assert all(not r.is_error for r in results)
    final = [e for e in seen if e.type == "agent.message"][-1]
    assert final.content[0].text == "The answer file says:      1\t42\n"
