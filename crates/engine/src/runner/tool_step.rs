//! Tool calls without results: which to act on next (run it here, close a denied one, hand
//! it to a self-hosted worker, wait for delegates or the user), and running built-in tools
//! with a crash marker so a call is never run twice.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{Loop, RunError, Waited};
use crate::intake::server_event;
use crate::mcp::McpTarget;
use crate::state::{EngineState, Pending, PendingKind};
use mast_domain::content;
use mast_domain::events::{self, Answer, kind};
use mast_domain::session::SessionUsage;
use mast_domain::time::Micros;
use mast_sandbox::{Approval, SessionTools};

/// Tools a self-hosted environment's workers run (web tools stay on the server).
pub(super) const SANDBOX_TOOLS: &[&str] = &["bash", "read", "write", "edit", "glob", "grep"];

/// A built-in tool call the loop may act on.
pub(super) struct ToolCall {
    id: String,
    name: String,
    input: Value,
    /// The MCP tool it calls (`agent.mcp_tool_use`); None for a built-in tool.
    mcp: Option<McpTarget>,
    /// Who let it run, which decides what it may see.
    approval: Approval,
}

/// What to do next about tool calls without results.
pub(super) enum ToolStep {
    Run(ToolCall),
    /// The user denied it: close it with their message.
    Denied {
        id: String,
        message: Option<String>,
    },
    /// Confirmed in a self-hosted environment: now it waits for the worker's result.
    HandToWorker(String),
    /// Delegates are working on some of the calls: wait for their replies.
    AwaitDelegates,
    /// A delegation whose thread stopped without replying (and nothing else blocks).
    Orphaned(String),
    /// Only the user (or a worker) can answer what is left.
    Wait,
}

/// Who let an allowed call run, from its `agent.tool_use` event: only `always_allow` grants
/// it everything (a person's confirmation is an answer to an `ask`, never an `allow`).
/// Anything else — `auto`, or an event without its evaluation — keeps the protected paths
/// hidden.
fn approval_of(use_body: &Value) -> Approval {
    let policy = use_body.pointer("/evaluation/type").and_then(Value::as_str);
    if policy == Some("always_allow") {
        Approval::Granted
    } else {
        Approval::Auto
    }
}

impl Loop<'_> {
    /// Which tool call without a result to act on next, given the row's pending set.
    pub(super) fn next_tool_step(&self, missing: &[String], st: &EngineState) -> ToolStep {
        let mut awaiting_delegates = false;
        for id in missing {
            if let Some((tid, run)) = st.delegate_of(id) {
                // A delegation: its thread answers it (blocked delegates wait for the user).
                if run.status.is_active() {
                    awaiting_delegates = true;
                } else if st.pending_of(tid).next().is_none() && !run.budget_paused {
                    return ToolStep::Orphaned(id.clone());
                }
                continue;
            }
            let Some(use_event) = self.view.events.iter().find(|e| {
                (e.kind == kind::AGENT_TOOL_USE || e.kind == kind::AGENT_MCP_TOOL_USE)
                    && &e.id == id
            }) else {
                continue; // a custom tool: the client answers it
            };
            let name = use_event
                .body
                .get("name")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string();
            let input = use_event
                .body
                .get("input")
                .cloned()
                .unwrap_or_else(|| json!({}));
            let mcp = (use_event.kind == kind::AGENT_MCP_TOOL_USE).then(|| {
                let server = use_event
                    .body
                    .get("mcp_server_name")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                let url = self
                    .scope
                    .agent
                    .mcp_servers
                    .iter()
                    .find(|s| s.name == server)
                    .map(|s| s.url.clone())
                    .unwrap_or_default();
                McpTarget {
                    server,
                    url,
                    tool: name.clone(),
                }
            });
            // MCP calls always run here, whoever runs the sandbox tools.
            let for_worker =
                mcp.is_none() && self.scope.self_hosted && SANDBOX_TOOLS.contains(&name.as_str());
            let mut call = ToolCall {
                id: id.clone(),
                name: name.clone(),
                input,
                mcp,
                approval: Approval::Granted,
            };
            match use_event
                .body
                .get("evaluated_permission")
                .and_then(Value::as_str)
            {
                Some("allow") if !for_worker => {
                    call.approval = approval_of(&use_event.body);
                    return ToolStep::Run(call);
                }
                Some("ask") => {
                    let answer = self.view.events.iter().find(|e| {
                        e.kind == kind::USER_TOOL_CONFIRMATION
                            && e.body.get("tool_use_id").and_then(Value::as_str) == Some(id)
                    });
                    match answer.map(|a| {
                        (
                            a.body.get("result").and_then(Value::as_str) == Some("allow"),
                            a,
                        )
                    }) {
                        Some((true, _))
                            if for_worker && !st.pending.iter().any(|p| &p.id == id) =>
                        {
                            return ToolStep::HandToWorker(id.clone());
                        }
                        Some((true, _)) if for_worker => {}
                        Some((true, _)) => return ToolStep::Run(call),
                        Some((false, a)) => {
                            let message = a
                                .body
                                .get("deny_message")
                                .and_then(Value::as_str)
                                .map(str::to_string);
                            return ToolStep::Denied {
                                id: id.clone(),
                                message,
                            };
                        }
                        None => {}
                    }
                }
                _ => {}
            }
        }
        if awaiting_delegates {
            return ToolStep::AwaitDelegates;
        }
        ToolStep::Wait
    }

    /// The session's built-in tools (workspace created, resources mounted on first use).
    async fn session_tools(&mut self) -> Result<Arc<SessionTools>, String> {
        if let Some(t) = &self.kit.tools {
            return Ok(t.clone());
        }
        let mounts = crate::mounts::prepare(
            self.inner,
            &self.scope.sid,
            &self.scope.body,
            &self.scope.agent.skills,
        )
        .await?;
        let owner = self.inner.toolbox.session_user(&self.scope.sid);
        let mounts = crate::memory_mount::with_mounts(
            self.inner,
            &self.scope.sid,
            &self.scope.body,
            mounts,
            owner,
        )?;
        let t = self
            .inner
            .toolbox
            .for_session(
                &self.scope.sid,
                &self.scope.body.environment,
                &self.scope.agent.tools,
                mounts,
            )
            .map_err(|e| format!("the session's workspace could not be prepared: {e}"))?;
        self.kit.repo_errors =
            crate::repos::prepare(self.inner, &self.scope.sid, &self.scope.body, &t).await;
        let t = Arc::new(t);
        self.kit.tools = Some(t.clone());
        Ok(t)
    }

    /// Runs an authorised built-in call and records its result. A marker in the row says it
    /// is running, so a crash in between closes it instead of running it twice.
    pub(super) async fn run_tool(&mut self, call: ToolCall) -> Result<(), RunError> {
        // The tool runners' futures are boxed (and this one where the loop awaits it):
        // inline they were most of every runner's state (61 KB of its 66 KB), allocated and
        // copied on every wake, whatever the turn ran (BENCHMARKS.md).
        if call.mcp.is_some() {
            return Box::pin(self.run_mcp_tool(call)).await;
        }
        let id = call.id.clone();
        let thread = self.scope.thread.clone();
        self.commit(
            move |_, st| {
                st.set_running_tool(&thread, Some(id));
                Ok(vec![])
            },
            vec![],
        )
        .await?;
        // A failed install of the environment's packages is also a `session.error` (once per
        // runner), so clients see why tool calls fail without reading every result.
        let mut package_failure = None;
        let mut output = match self.session_tools().await {
            Ok(tools) => {
                // Session fork: the workspace as this turn found it, for forks at earlier events.
                self.checkpoint_workspace(&tools.workspace).await;
                let (name, input, approval) =
                    (call.name.clone(), call.input.clone(), call.approval);
                let reporter = tools.packages.clone();
                let started = std::time::Instant::now();
                let (inner, sid, body) =
                    (self.inner, self.scope.sid.clone(), self.scope.body.clone());
                match self
                    .interruptible(Box::pin(async move {
                        crate::memory_mount::run_synced(
                            inner, &sid, &body, &tools, &name, &input, approval,
                        )
                        .await
                    }))
                    .await?
                {
                    Waited::Done(out) => {
                        package_failure = reporter.and_then(|p| p.failure_to_report());
                        metrics::histogram!(crate::telemetry::TOOL_DURATION,
                            "tool" => call.name.clone(), "is_error" => if out.is_error { "true" } else { "false" })
                        .record(started.elapsed().as_secs_f64());
                        out
                    }
                    // interrupt() closes the running call.
                    Waited::Interrupted => return Ok(()),
                }
            }
            Err(e) => mast_sandbox::ToolOutput::error(e),
        };
        if let Some(note) = crate::outputs::register(self.inner, &self.scope.sid).await {
            output.content.push(content::text(note));
        }
        let post = match self
            .ask_post_hooks(
                &call.id,
                &call.name,
                None,
                &call.input,
                &output.content,
                output.is_error,
            )
            .await?
        {
            Waited::Done(post) => post,
            // interrupt() closes the running call.
            Waited::Interrupted => return Ok(()),
        };
        let repo_errors = std::mem::take(&mut self.kit.repo_errors);
        let thread = self.scope.thread.clone();
        let clock = self.inner.store.clock().clone();
        self.commit(
            move |rec, st| {
                st.set_running_tool(&thread, None);
                if matches!(call.name.as_str(), "web_search" | "web_fetch") {
                    let count = |usage: &mut SessionUsage| {
                        if call.name == "web_search" {
                            usage.server_tool_use.web_search_requests += 1;
                        } else {
                            usage.server_tool_use.web_fetch_requests += 1;
                        }
                    };
                    let mut usage: SessionUsage =
                        serde_json::from_str(&rec.usage).unwrap_or_default();
                    count(&mut usage);
                    rec.usage = serde_json::to_string(&usage)?;
                    // A delegate's own usage (and so its list cost) counts its searches too.
                    if let Some(t) = st.threads.get_mut(&thread) {
                        count(&mut t.usage);
                    }
                }
                let mut e = server_event(
                    kind::AGENT_TOOL_RESULT,
                    events::tool_result(&call.id, output.content, output.is_error),
                    &thread,
                    clock.now(),
                );
                if let Some(post) = post {
                    post.annotate(&mut e.body, &mut e.internal);
                }
                e.answers = Some((call.id, Answer::Result.as_str()));
                let mut out = vec![e];
                for body in repo_errors {
                    out.push(server_event(
                        kind::SESSION_ERROR,
                        body,
                        &thread,
                        clock.now(),
                    ));
                }
                if let Some(why) = package_failure {
                    out.push(server_event(
                        kind::SESSION_ERROR,
                        events::session_error("unknown_error", &why, "retrying"),
                        &thread,
                        clock.now(),
                    ));
                }
                Ok(out)
            },
            vec![],
        )
        .await?;
        Ok(())
    }

    /// Runs an authorised MCP call on the server (connecting first when this runner has no
    /// connection yet) and records its result; a lost connection is also a `session.error`.
    /// Like a built-in call it is marked running, so a crash in between closes it.
    async fn run_mcp_tool(&mut self, call: ToolCall) -> Result<(), RunError> {
        let Some(target) = call.mcp.clone() else {
            return Ok(());
        };
        let id = call.id.clone();
        let thread = self.scope.thread.clone();
        self.commit(
            move |_, st| {
                st.set_running_tool(&thread, Some(id));
                Ok(vec![])
            },
            vec![],
        )
        .await?;
        if !self.prepare_mcp().await? {
            return Ok(()); // interrupt() closes the running call.
        }
        let started = std::time::Instant::now();
        let timeout = self.inner.config.mcp_call_timeout;
        let reach = self.mcp_reach();
        let outcome = match self
            .interruptible(self.crew.mcp.call(&target, &call.input, timeout, &reach))
            .await?
        {
            Waited::Done(out) => out,
            Waited::Interrupted => return Ok(()),
        };
        metrics::histogram!(crate::telemetry::TOOL_DURATION,
            "tool" => "mcp", "is_error" => if outcome.is_error { "true" } else { "false" })
        .record(started.elapsed().as_secs_f64());
        let post = match self
            .ask_post_hooks(
                &call.id,
                &target.tool,
                Some(&target.server),
                &call.input,
                &outcome.content,
                outcome.is_error,
            )
            .await?
        {
            Waited::Done(post) => post,
            Waited::Interrupted => return Ok(()),
        };
        let thread = self.scope.thread.clone();
        let failure = outcome.failure;
        let clock = self.inner.store.clock().clone();
        self.commit(
            move |_, st| {
                st.set_running_tool(&thread, None);
                let now = clock.now();
                let mut e = server_event(
                    kind::AGENT_MCP_TOOL_RESULT,
                    events::mcp_tool_result(&call.id, outcome.content, outcome.is_error),
                    &thread,
                    now,
                );
                if let Some(post) = post {
                    post.annotate(&mut e.body, &mut e.internal);
                }
                e.answers = Some((call.id, Answer::Result.as_str()));
                let mut out = vec![e];
                if let Some(f) = failure {
                    out.push(f.retrying_event(&thread, now));
                }
                Ok(out)
            },
            vec![],
        )
        .await?;
        Ok(())
    }

    /// The result event kind and id field answering call `id` (MCP calls have their own).
    pub(super) fn result_kind_of(&self, id: &str) -> (&'static str, &'static str) {
        result_kind(
            self.view
                .events
                .iter()
                .any(|e| e.kind == kind::AGENT_MCP_TOOL_USE && e.id == id),
        )
    }

    /// Closes a call the user denied, passing their message to the model.
    pub(super) async fn close_denied(
        &mut self,
        id: String,
        message: Option<String>,
    ) -> Result<(), RunError> {
        let primary = self.scope.thread.clone();
        let text = match message {
            Some(m) => format!("The user denied this tool call: {m}"),
            None => "The user denied this tool call; it did not run.".to_string(),
        };
        let kinds = self.result_kind_of(&id);
        let now = self.inner.now();
        self.commit(
            move |_, _| {
                let mut e = result_event(kinds, &id, vec![content::text(text)], &primary, now);
                e.answers = Some((id, Answer::Result.as_str()));
                Ok(vec![e])
            },
            vec![],
        )
        .await?;
        Ok(())
    }

    /// A confirmed sandbox call in a self-hosted environment now waits for the worker.
    pub(super) async fn hand_to_worker(&mut self, id: String) -> Result<(), RunError> {
        let primary = self.scope.thread.clone();
        self.commit(
            move |_, st| {
                if !st.pending.iter().any(|p| p.id == id) {
                    st.pending.push(Pending {
                        id,
                        kind: PendingKind::ClientTool,
                        thread_id: primary,
                        mcp: false,
                    });
                }
                Ok(vec![])
            },
            vec![],
        )
        .await?;
        Ok(())
    }

    /// Closes a call that was running when its runner stopped.
    pub(super) async fn close_interrupted_tool(&mut self, id: String) -> Result<(), RunError> {
        let primary = self.scope.thread.clone();
        let answered = self.view.events.iter().any(|e| {
            (matches!(
                e.kind.as_str(),
                kind::AGENT_TOOL_RESULT | kind::USER_TOOL_RESULT
            ) && e.body.get("tool_use_id").and_then(Value::as_str) == Some(id.as_str()))
                || (e.kind == kind::AGENT_MCP_TOOL_RESULT
                    && e.body.get("mcp_tool_use_id").and_then(Value::as_str) == Some(id.as_str()))
        });
        let kinds = self.result_kind_of(&id);
        let now = self.inner.now();
        self.commit(
            move |_, st| {
                st.set_running_tool(&primary, None);
                if answered {
                    return Ok(vec![]);
                }
                let text = "The server stopped while this tool call was running, so whether it took effect is unknown. \
                            Check the workspace before running it again.";
                let mut e = result_event(kinds, &id, vec![content::text(text)], &primary, now);
                e.answers = Some((id, Answer::Result.as_str()));
                Ok(vec![e])
            },
            vec![],
        )
        .await?;
        Ok(())
    }
}

/// The result event kind and its id field: `agent.mcp_tool_result` answers an MCP call,
/// `agent.tool_result` everything else.
pub(super) fn result_kind(mcp: bool) -> (&'static str, &'static str) {
    match mcp {
        true => (kind::AGENT_MCP_TOOL_RESULT, "mcp_tool_use_id"),
        false => (kind::AGENT_TOOL_RESULT, "tool_use_id"),
    }
}

/// An error result closing call `id`, of the kind `kinds` says.
pub(super) fn result_event(
    kinds: (&'static str, &'static str),
    id: &str,
    content: Vec<Value>,
    thread: &str,
    now: Micros,
) -> mast_store::NewEvent {
    let (kind_name, field) = kinds;
    server_event(
        kind_name,
        json!({ field: id, "content": content, "is_error": true }),
        thread,
        now,
    )
}
