//! Delegation: a coordinator's platform tools (`list_agents`, `send_to_agent`) and what a
//! delegation does to the session. A delegate runs in a thread of its own — the same loop
//! with its own agent, history and permissions — and its reply answers the coordinator's
//! call, which waits like any long-running tool call.

use serde_json::{Value, json};

use super::intake::server_event;
use super::state::{EngineState, ThreadRun, ThreadStatus};
use mast_domain::agent::SessionAgent;
use mast_domain::content;
use mast_domain::events::{self, Answer, kind};
use mast_domain::ids::new_id;
use mast_domain::multiagent::ADVISOR_NAME;
use mast_domain::time::Micros;
use mast_domain::tools::ToolDef;
use mast_store::{NewEvent, ThreadRecord};

/// Name of the roster tool.
pub const LIST_AGENTS: &str = "list_agents";
/// Name of the delegation tool.
pub const SEND_TO_AGENT: &str = "send_to_agent";
/// Delegate threads a session may have open at once (advisors aside).
pub const MAX_OPEN_DELEGATES: usize = 25;

const ADVISOR_SYSTEM: &str = "You are an advisor consulted by another agent in the middle of its work. Answer its \
question with concise, concrete advice. You cannot use tools and you will not be asked follow-up questions.";

/// A predefined agent the coordinator may delegate to.
#[derive(Debug, Clone, PartialEq)]
pub struct RosterAgent {
    pub name: String,
    pub snapshot: SessionAgent,
}

/// Refuses a session whose agent, or an agent it may delegate to, holds a custom tool with
/// a reserved name prefix (a version stored before the prefixes were reserved): the model
/// would see it beside the platform's own tools of that prefix.
pub fn refuse_reserved_tools(agent: &SessionAgent) -> Result<(), mast_domain::invalid::Invalid> {
    let mut listed = Roster::of(agent).map(|r| r.agents).unwrap_or_default();
    // The agents a workflow run may use are held to the same rule.
    listed.extend(snapshots(
        agent
            .multiagent
            .as_ref()
            .and_then(|m| m.pointer("/workflows/predefined_agents")),
    ));
    let holders = std::iter::once((None, &agent.tools)).chain(
        listed
            .iter()
            .map(|a| (Some(a.name.as_str()), &a.snapshot.tools)),
    );
    for (member, tools) in holders {
        if let Some(name) = mast_domain::tools::reserved_custom_tool(tools) {
            let whose = match member {
                None => "the session's agent".to_string(),
                Some(m) => format!(
                    "agent `{m}`, which the session's agent may delegate to or run in a workflow,"
                ),
            };
            return Err(mast_domain::invalid::Invalid::new(format!(
                "`agent`: {whose} holds {}; update that agent first",
                mast_domain::tools::reserved_name_message(name)
            )));
        }
    }
    Ok(())
}

/// Whom a coordinator may delegate to, from the session's resolved snapshot.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Roster {
    pub agents: Vec<RosterAgent>,
    /// The advisor's model, when an advisor is configured.
    pub advisor: Option<String>,
    /// The coordinator may define agents on the fly.
    pub inline: bool,
}

fn snapshots(list: Option<&Value>) -> Vec<RosterAgent> {
    list.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter(|e| e.get("type").and_then(Value::as_str) == Some("agent"))
        .filter_map(|e| serde_json::from_value::<SessionAgent>(e.clone()).ok())
        .map(|mut snapshot| {
            // A delegate cannot delegate further (depth 1).
            snapshot.multiagent = None;
            RosterAgent {
                name: snapshot.name.clone(),
                snapshot,
            }
        })
        .collect()
}

impl Roster {
    /// The roster of a coordinator's snapshot; None for agents without `multiagent`.
    pub fn of(agent: &SessionAgent) -> Option<Roster> {
        let mut roster = Roster::listed(agent)?;
        // `self` is the coordinator as this session runs it. The roster holds the stored
        // version, which a session's overrides (tools, model, system) may have replaced;
        // delegating to it must not undo them.
        for member in roster
            .agents
            .iter_mut()
            .filter(|a| a.snapshot.id == agent.id)
        {
            member.snapshot = SessionAgent {
                multiagent: None,
                ..agent.clone()
            };
        }
        Some(roster)
    }

    /// The roster as the snapshot lists it.
    fn listed(agent: &SessionAgent) -> Option<Roster> {
        let m = agent.multiagent.as_ref()?;
        match m.get("type").and_then(Value::as_str)? {
            "coordinator" => {
                let list = m.get("agents");
                let advisor = list
                    .and_then(Value::as_array)
                    .into_iter()
                    .flatten()
                    .find(|e| e.get("type").and_then(Value::as_str) == Some("advisor"))
                    .and_then(|e| e.get("model").and_then(Value::as_str))
                    .map(str::to_string);
                Some(Roster {
                    agents: snapshots(list),
                    advisor,
                    inline: false,
                })
            }
            "multiagent_20261001" => {
                let advisor = m
                    .get("advisor")
                    .filter(|a| a.get("type").and_then(Value::as_str) == Some("enabled"))
                    .and_then(|a| a.get("model").and_then(Value::as_str))
                    .map(str::to_string);
                let sub = m.get("subagents");
                let enabled =
                    sub.is_some_and(|s| s.get("type").and_then(Value::as_str) == Some("enabled"));
                let (agents, inline) = if enabled {
                    (
                        snapshots(sub.and_then(|s| s.get("predefined_agents"))),
                        sub.and_then(|s| s.pointer("/inline_agents/type"))
                            .and_then(Value::as_str)
                            != Some("disabled"),
                    )
                } else {
                    (vec![], false)
                };
                Some(Roster {
                    agents,
                    advisor,
                    inline,
                })
            }
            _ => None,
        }
    }

    /// Whether the coordinator has anyone to delegate to.
    pub fn is_empty(&self) -> bool {
        self.agents.is_empty() && self.advisor.is_none() && !self.inline
    }

    fn find(&self, key: &str) -> Option<&RosterAgent> {
        self.agents
            .iter()
            .find(|a| a.name == key)
            .or_else(|| self.agents.iter().find(|a| a.snapshot.id == key))
    }

    /// The tools a coordinator with this roster is offered.
    pub fn tools(&self) -> Vec<ToolDef> {
        let mut names: Vec<String> = self.agents.iter().map(|a| a.name.clone()).collect();
        if self.advisor.is_some() {
            names.push(ADVISOR_NAME.to_string());
        }
        let mut agent_schema = json!({"type": "string", "description": format!(
            "Name (or id) of the agent to delegate to: one of {}.", if names.is_empty() { "none".to_string() } else { names.join(", ") })});
        if self.inline {
            agent_schema = json!({"description": "A roster agent's name, or a new agent defined here.", "anyOf": [
                agent_schema,
                {"type": "object", "description": "An agent defined for this task.", "properties": {
                    "name": {"type": "string"}, "system": {"type": "string"}, "description": {"type": "string"},
                    "model": {"type": "string", "description": "defaults to yours"},
                    "tools": {"type": "array", "items": {"type": "object"}, "description": "tool definitions, as on an agent; \
                        limited to tools you have yourself, each with a permission policy at least as strict as yours"}},
                 "required": ["name"]}]});
        }
        vec![
            ToolDef {
                name: LIST_AGENTS.into(),
                description: "List the agents you can delegate to, and the delegate threads of this session with their status.".into(),
                input_schema: json!({"type": "object", "properties": {}}),
            },
            ToolDef {
                name: SEND_TO_AGENT.into(),
                description: format!(
                    "Delegate a task to another agent. It works in a thread of its own (its own history, tools and \
                     permissions; it does not see this conversation) and its final message comes back as this call's \
                     result. Pass `thread_id` to continue an earlier delegate thread with a follow-up. Several calls in \
                     one response run in parallel. `{ADVISOR_NAME}` gives advice only."
                ),
                input_schema: json!({"type": "object", "properties": {
                    "agent": agent_schema,
                    "message": {"type": "string", "description": "The task, complete and self-contained."},
                    "thread_id": {"type": "string", "description": "A delegate thread to continue."}},
                    "required": ["message"]}),
            },
        ]
    }

    /// The answer to `list_agents`.
    pub fn listing(&self, st: &EngineState) -> String {
        let mut agents: Vec<Value> = self
            .agents
            .iter()
            .map(|a| json!({"name": a.name, "id": a.snapshot.id, "description": a.snapshot.description, "model": a.snapshot.model.id}))
            .collect();
        if let Some(m) = &self.advisor {
            agents.push(json!({"name": ADVISOR_NAME, "description": "Gives advice on a question; no tools.", "model": m}));
        }
        let threads: Vec<Value> = st
            .threads
            .iter()
            .map(|(id, t)| json!({"thread_id": id, "agent": t.agent_name, "status": t.status.as_str()}))
            .collect();
        json!({"agents": agents, "inline_agents": self.inline, "threads": threads}).to_string()
    }
}

/// Who a delegation goes to.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// A roster agent (or, with `thread_id` alone, whoever runs that thread).
    Agent(Option<RosterAgent>),
    /// An agent the coordinator defined for this task.
    Inline { wire: Value, agent: SessionAgent },
    /// The advisor, on its model.
    Advisor(String),
}

/// A validated `send_to_agent` call, applied under the session's lock.
#[derive(Debug, Clone, PartialEq)]
pub struct Send {
    pub call: String,
    pub input: Value,
    pub target: Target,
    pub message: String,
    pub thread_id: Option<String>,
    /// What `subagent_start` hooks said of it (recorded on `agent.thread_message_sent`).
    pub hooks: Option<Value>,
}

/// Checks a `send_to_agent` call's input against the roster (what does not depend on the
/// session's state); the error is the call's result.
pub fn parse_send(
    call: &str,
    input: &Value,
    roster: &Roster,
    coordinator: &SessionAgent,
    routable: &dyn Fn(&str) -> Result<(), String>,
) -> Result<Send, String> {
    let message = input
        .get("message")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|m| !m.is_empty())
        .ok_or("`message` is required: the task for the delegate, as text")?
        .to_string();
    let thread_id = match input.get("thread_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(t.clone()),
        Some(_) => return Err("`thread_id` must be a string".into()),
    };
    let target = match input.get("agent") {
        None | Some(Value::Null) if thread_id.is_some() => Target::Agent(None),
        None | Some(Value::Null) => {
            return Err("`agent` is required unless `thread_id` names a thread to continue".into());
        }
        Some(Value::String(name)) if name == ADVISOR_NAME => match &roster.advisor {
            Some(model) => Target::Advisor(model.clone()),
            None => return Err("this session has no advisor".into()),
        },
        Some(Value::String(name)) => match roster.find(name) {
            Some(a) => Target::Agent(Some(a.clone())),
            None => {
                let names: Vec<&str> = roster.agents.iter().map(|a| a.name.as_str()).collect();
                return Err(format!(
                    "there is no agent `{name}` on the roster; available: {}",
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                ));
            }
        },
        Some(Value::Object(def)) if roster.inline => inline_agent(def, coordinator, routable)?,
        Some(Value::Object(_)) => {
            return Err(
                "this coordinator cannot define agents on the fly; name one from the roster".into(),
            );
        }
        Some(_) => return Err("`agent` must be an agent's name".into()),
    };
    if thread_id.is_some() && matches!(target, Target::Inline { .. } | Target::Advisor(_)) {
        return Err("`thread_id` continues a predefined agent's thread; advisors and new inline agents start fresh".into());
    }
    Ok(Send {
        call: call.to_string(),
        input: input.clone(),
        target,
        message,
        thread_id,
        hooks: None,
    })
}

/// How the id of an agent the model defined inline begins (`inline:<name>`).
pub const INLINE_ID_PREFIX: &str = "inline:";

/// The agent whose agent-scoped rules govern a thread running `agent_id` in a session whose
/// agent is `session_agent_id`. A delegate the model defines (inline, or the advisor) is
/// governed by everything that governs the coordinator that defined it — its policies are
/// narrowed to the coordinator's, and the coordinator's agent-scoped hooks apply to it, or the
/// model could shed a hook by delegating the call. Predefined roster agents keep their own.
pub fn governing_agent<'a>(agent_id: &'a str, session_agent_id: &'a str) -> &'a str {
    if agent_id.starts_with(INLINE_ID_PREFIX) || agent_id == ADVISOR_NAME {
        session_agent_id
    } else {
        agent_id
    }
}

fn inline_agent(
    def: &serde_json::Map<String, Value>,
    coordinator: &SessionAgent,
    routable: &dyn Fn(&str) -> Result<(), String>,
) -> Result<Target, String> {
    let name = def
        .get("name")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|n| !n.is_empty() && n.len() <= 256)
        .ok_or("an inline agent needs a `name` (1 to 256 characters)")?;
    if name == ADVISOR_NAME {
        return Err(format!("`{ADVISOR_NAME}` is reserved"));
    }
    let text = |k: &str| def.get(k).and_then(Value::as_str).map(str::to_string);
    let mut model = coordinator.model.clone();
    if let Some(id) = text("model") {
        routable(&id)?;
        model.id = id;
    }
    let tools_raw: Vec<Value> = match def.get("tools") {
        None | Some(Value::Null) => vec![],
        Some(Value::Array(t)) => t.clone(),
        Some(_) => return Err("`tools` must be an array of tool definitions".into()),
    };
    let tools = mast_domain::tools::resolve_tools(&tools_raw)
        .map_err(|e| format!("the inline agent's tools are invalid: {e}"))?;
    // The model wrote this definition: it gets no tool, and no looser policy, than the agent
    // defining it already has (see `permissions::narrow` for why it is clamped, not refused).
    let tools = super::permissions::narrow(&tools, &coordinator.tools);
    let agent = SessionAgent {
        tag: coordinator.tag,
        id: format!("{INLINE_ID_PREFIX}{name}"),
        version: 0,
        name: name.to_string(),
        description: text("description"),
        system: text("system"),
        model,
        tools,
        mcp_servers: vec![],
        skills: vec![],
        execution_identity: coordinator.execution_identity.clone(),
        multiagent: None,
    };
    let wire = json!({
        "type": "inline", "name": agent.name, "description": agent.description, "system": agent.system,
        "model": agent.model, "tools": agent.tools, "mcp_servers": [], "skills": [],
        "execution_identity": agent.execution_identity,
    });
    Ok(Target::Inline { wire, agent })
}

/// The stored body of a delegate thread: its wire agent, its name, and the agent its loop
/// runs (which differs from the wire form for inline agents and advisors).
pub fn thread_body(wire: &Value, name: &str, runs: &SessionAgent) -> String {
    json!({"agent": wire, "agent_name": name, "runs": runs}).to_string()
}

/// The agent a thread's loop runs, from its stored body.
pub fn thread_agent(body: &str) -> Option<SessionAgent> {
    let v: Value = serde_json::from_str(body).ok()?;
    serde_json::from_value(v.get("runs").cloned().or_else(|| v.get("agent").cloned())?).ok()
}

/// Applies validated delegations under the session's lock: starts or continues each
/// delegate thread with its task; a call the session's state refuses gets an error result.
pub fn apply(
    st: &mut EngineState,
    sends: Vec<Send>,
    session_id: &str,
    primary: &str,
    now: Micros,
) -> Vec<NewEvent> {
    let mut out = Vec::new();
    for s in sends {
        match start(st, &s, session_id, primary, now) {
            Ok(events) => out.extend(events),
            Err(msg) => out.extend(refuse(&s.call, SEND_TO_AGENT, &s.input, &msg, primary, now)),
        }
    }
    out
}

/// The visible record of a platform call answered at once: its `agent.tool_use` and result.
pub fn refuse(
    call: &str,
    name: &str,
    input: &Value,
    msg: &str,
    thread: &str,
    now: Micros,
) -> Vec<NewEvent> {
    answered(call, name, input, msg, true, thread, now)
}

/// A delegation a `subagent_start` hook blocked: the call, recorded as denied with the
/// hooks' `verdicts`, and an error result giving the model the hook's `reason`.
pub fn refused_by_hook(
    call: &str,
    name: &str,
    input: &Value,
    reason: &str,
    verdicts: Value,
    thread: &str,
    now: Micros,
) -> Vec<NewEvent> {
    let msg = format!(
        "A subagent_start hook refused this delegation: {reason}. Nothing was sent; choose another approach."
    );
    let mut out = refuse(call, name, input, &msg, thread, now);
    if let Some(use_event) = out.first_mut() {
        use_event.body["evaluated_permission"] = json!("deny");
        use_event.body["hooks"] = verdicts;
    }
    out
}

/// A platform call and its immediate result.
pub fn answered(
    call: &str,
    name: &str,
    input: &Value,
    text: &str,
    is_error: bool,
    thread: &str,
    now: Micros,
) -> Vec<NewEvent> {
    let mut use_event = server_event(
        kind::AGENT_TOOL_USE,
        json!({"name": name, "input": input, "evaluated_permission": "allow"}),
        thread,
        now,
    );
    use_event.id = call.to_string();
    let mut result = server_event(
        kind::AGENT_TOOL_RESULT,
        events::tool_result(call, vec![content::text(text)], is_error),
        thread,
        now,
    );
    result.answers = Some((call.to_string(), Answer::Result.as_str()));
    vec![use_event, result]
}

fn start(
    st: &mut EngineState,
    s: &Send,
    session_id: &str,
    primary: &str,
    now: Micros,
) -> Result<Vec<NewEvent>, String> {
    let mut out = Vec::new();
    let thread = match &s.thread_id {
        Some(tid) => {
            let run = st
                .threads
                .get(tid)
                .ok_or_else(|| format!("there is no delegate thread `{tid}` in this session"))?;
            if run.advisor {
                return Err("advisor threads cannot be continued".into());
            }
            if run.status == ThreadStatus::Terminated {
                return Err(format!("thread `{tid}` has ended; start a new one"));
            }
            if run.status.is_active() || !st.pending_ids_of(tid).is_empty() {
                return Err(format!(
                    "thread `{tid}` is still working on an earlier task; wait for its reply"
                ));
            }
            if let Target::Agent(Some(a)) = &s.target
                && a.name != run.agent_name
            {
                return Err(format!(
                    "thread `{tid}` belongs to `{}`, not `{}`",
                    run.agent_name, a.name
                ));
            }
            tid.clone()
        }
        None => {
            let advisor = matches!(s.target, Target::Advisor(_));
            if !advisor && st.open_delegates() >= MAX_OPEN_DELEGATES {
                return Err(format!(
                    "this session already has {MAX_OPEN_DELEGATES} open delegate threads, the most allowed; \
                     continue one with `thread_id`, or ask the user to archive finished ones"
                ));
            }
            let (wire, name, runs) = match &s.target {
                Target::Agent(Some(a)) => {
                    let mut wire = serde_json::to_value(&a.snapshot).unwrap_or(Value::Null);
                    if let Some(o) = wire.as_object_mut() {
                        o.remove("multiagent");
                    }
                    (wire, a.name.clone(), a.snapshot.clone())
                }
                Target::Inline { wire, agent } => (wire.clone(), agent.name.clone(), agent.clone()),
                Target::Advisor(model) => {
                    let mut runs = st_advisor_agent(model);
                    runs.system = Some(ADVISOR_SYSTEM.into());
                    (
                        json!({"type": "advisor", "model": model}),
                        ADVISOR_NAME.to_string(),
                        runs,
                    )
                }
                Target::Agent(None) => return Err("`agent` is required for a new thread".into()),
            };
            let tid = new_id("sthr");
            st.created_threads.push(ThreadRecord {
                id: tid.clone(),
                session_id: session_id.to_string(),
                parent_thread_id: Some(primary.to_string()),
                spawning_event_id: Some(s.call.clone()),
                status: ThreadStatus::Running.as_str().into(),
                body: thread_body(&wire, &name, &runs),
                created_at: now,
                updated_at: now,
                archived_at: None,
            });
            let mut run = ThreadRun::new(&name, advisor, now);
            run.status = ThreadStatus::Idle;
            run.running_since = None;
            st.threads.insert(tid.clone(), run);
            out.push(server_event(
                kind::THREAD_CREATED,
                json!({"session_thread_id": tid, "agent_name": name}),
                primary,
                now,
            ));
            tid
        }
    };
    let run = st.threads.get_mut(&thread).expect("thread present");
    let name = run.agent_name.clone();
    run.replies_to.push(s.call.clone());
    run.set_status(ThreadStatus::Running, now);
    let body = vec![content::text(&s.message)];
    let mut sent = server_event(
        kind::THREAD_MESSAGE_SENT,
        json!({"to_session_thread_id": thread, "to_agent_name": name, "content": body}),
        primary,
        now,
    );
    if let Some(hooks) = &s.hooks {
        sent.body["hooks"] = hooks.clone();
    }
    sent.id = s.call.clone();
    out.push(sent);
    out.push(server_event(
        kind::THREAD_STATUS_RUNNING,
        events::thread_status(&thread, &name, None),
        &thread,
        now,
    ));
    out.push(server_event(
        kind::THREAD_MESSAGE_RECEIVED,
        json!({"from_session_thread_id": primary, "content": body}),
        &thread,
        now,
    ));
    Ok(out)
}

/// The agent an advisor thread runs: the advisor's model and nothing else.
fn st_advisor_agent(model: &str) -> SessionAgent {
    SessionAgent {
        tag: Default::default(),
        id: ADVISOR_NAME.into(),
        version: 0,
        name: ADVISOR_NAME.into(),
        description: None,
        system: None,
        model: mast_domain::model_config::ModelConfig {
            id: model.to_string(),
            effort: None,
            speed: None,
            inference_geo: None,
        },
        tools: vec![],
        mcp_servers: vec![],
        skills: vec![],
        execution_identity: mast_domain::agent::ExecutionIdentity::ServiceAccount,
        multiagent: None,
    }
}

#[cfg(test)]
mod reserved_tool_tests {
    use super::*;
    use serde_json::json;

    fn snapshot(id: &str, name: &str, tool: &str) -> Value {
        json!({
            "type": "agent", "id": id, "version": 1, "name": name,
            "description": null, "system": null,
            "model": {"id": "mast-scripted", "speed": "standard"},
            "tools": [{"type": "custom", "name": tool, "description": "d",
                       "input_schema": {"type": "object"}}],
            "mcp_servers": [], "skills": [],
            "execution_identity": {"type": "service_account"}
        })
    }

    fn coordinator(own_tool: &str, member_tool: &str) -> SessionAgent {
        let mut lead = snapshot("agent_lead", "lead", own_tool);
        lead["multiagent"] = json!({"type": "coordinator",
            "agents": [snapshot("agent_helper", "helper", member_tool)]});
        serde_json::from_value(lead).unwrap()
    }

    #[test]
    fn a_session_is_refused_while_its_agent_or_a_delegate_holds_a_reserved_name() {
        assert!(refuse_reserved_tools(&coordinator("fine", "also_fine")).is_ok());
        let own = refuse_reserved_tools(&coordinator("ant__old", "fine")).unwrap_err();
        assert!(
            own.message
                .contains("the session's agent holds custom tool `ant__old`"),
            "{}",
            own.message
        );
        let member = refuse_reserved_tools(&coordinator("fine", "mcp__old")).unwrap_err();
        assert!(
            member
                .message
                .contains("agent `helper`, which the session's agent may delegate to or run in a workflow, holds custom tool `mcp__old`"),
            "{}",
            member.message
        );
    }
}
