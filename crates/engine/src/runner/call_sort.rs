//! How the tool calls of one model response are sorted, in code, before anything runs: each
//! call gets its event id, a custom tool waits for the client, the roster tools answer or
//! delegate, a built-in or MCP tool goes through its permission policy (and the hooks' verdicts),
//! and an unknown tool is refused.

use serde_json::{Value, json};

use super::Loop;
use super::hook_step::{self, CallHooks, Hooked, PreHooks};
use super::tool_step::SANDBOX_TOOLS;
use crate::delegation::{self, LIST_AGENTS, SEND_TO_AGENT};
use crate::intake::server_event;
use crate::permissions;
use crate::state::{Pending, PendingKind};
use mast_domain::events::kind;
use mast_domain::ids::new_id;
use mast_domain::time;
use mast_domain::tools::Tool;
use mast_models::Block;
use mast_store::NewEvent;

impl Loop<'_> {
    /// Gives every `tool_use` block of a response its event id and decides, in code, what
    /// becomes of the call. A response cut by `max_tokens` runs no calls: their input may be
    /// incomplete, and the continuation calls them again.
    pub(super) fn sort_calls(
        &self,
        blocks: Vec<Value>,
        cut_short: bool,
        mut pre: PreHooks,
        now: time::Micros,
    ) -> Calls {
        let mut calls = Calls {
            content: Vec::with_capacity(blocks.len()),
            ..Default::default()
        };
        for block in blocks {
            let Block::ToolUse { name, input } = Block::of(&block) else {
                calls.content.push(block);
                continue;
            };
            if cut_short {
                continue;
            }
            let name = name.to_string();
            let input = input.cloned().unwrap_or_else(|| json!({}));
            let id = pre.ids.pop_front().unwrap_or_else(|| new_id("sevt"));
            let mut b = block.clone();
            b["id"] = json!(id);
            calls.content.push(b);
            let hooked = pre.take(&id);
            self.sort_call(&mut calls, id, name, input, hooked, now);
        }
        calls
    }

    /// Decides one call: a custom tool waits for the client, the roster tools answer or
    /// delegate here, a built-in tool goes through its permission policy, and an unknown
    /// tool is refused.
    fn sort_call(
        &self,
        calls: &mut Calls,
        id: String,
        name: String,
        input: Value,
        hooked: CallHooks,
        now: time::Micros,
    ) {
        let thread = &self.scope.thread;
        // A delegate's blocking calls also show on the session's stream, naming their thread.
        let crosspost = self.child_name().map(|_| thread.clone());
        let is_custom = self
            .scope
            .agent
            .tools
            .iter()
            .any(|t| matches!(t, Tool::Custom(c) if c.name == name));
        if crate::workflow_runs::is_platform_tool(&name) && self.starts_workflows() {
            // Answered in the response's own transaction, and never shown to clients.
            calls
                .platform
                .push(crate::workflow_runs::PlatformCall { id, name, input });
            calls.runs_here = true;
        } else if is_custom {
            let mut body = json!({ "name": name, "input": input });
            if let Some(t) = &crosspost {
                body["session_thread_id"] = json!(t);
            }
            let mut e = server_event(kind::AGENT_CUSTOM_TOOL_USE, body, thread, now);
            e.id = id.clone();
            calls.events.push(e);
            calls.pending.push(Pending {
                id,
                kind: PendingKind::Custom,
                thread_id: thread.clone(),
                mcp: false,
            });
        } else if self.scope.roster.is_some() && name == LIST_AGENTS {
            calls.listings.push((id, input));
        } else if let Some(roster) = self.scope.roster.as_ref().filter(|_| name == SEND_TO_AGENT) {
            let models = self.inner.models.clone();
            let routable = move |m: &str| models.check_routable(m);
            match delegation::parse_send(&id, &input, roster, &self.scope.agent, &routable) {
                Ok(mut s) => match hooked.delegation {
                    Some(gate) if gate.blocked.is_some() => {
                        let (_, reason) = gate.blocked.clone().unwrap_or_default();
                        let verdicts = gate.recorded().unwrap_or_default();
                        calls.events.extend(delegation::refused_by_hook(
                            &id, &name, &input, &reason, verdicts, thread, now,
                        ));
                    }
                    gate => {
                        s.hooks = gate.and_then(|g| g.recorded());
                        calls.sends.push(s)
                    }
                },
                Err(msg) => calls
                    .events
                    .extend(delegation::refuse(&id, &name, &input, &msg, thread, now)),
            }
            calls.runs_here = true;
        } else if let Some(target) = self.kit.mcp_offer.target(&name).cloned() {
            // A hook's defer of an MCP call asks the user instead (only built-in calls can be
            // answered by the client with `user.tool_result`).
            let Hooked {
                decision, input, ..
            } = hook_step::apply(hooked.pre, input, false, |_| {
                permissions::decide_mcp(&self.scope.agent.tools, &target.server, &target.tool)
            });
            let body =
                json!({ "name": target.tool, "mcp_server_name": target.server, "input": input });
            let blocking = matches!(decision, permissions::Decision::Ask { .. });
            let use_crosspost = crosspost.as_deref().filter(|_| blocking);
            calls.events.push(decided_use(
                kind::AGENT_MCP_TOOL_USE,
                body,
                &decision,
                use_crosspost,
                &id,
                thread,
                now,
            ));
            match decision {
                permissions::Decision::Deny { reason, .. } => {
                    calls.mcp_refused.push((id, denial(&reason)))
                }
                permissions::Decision::Ask { .. } => calls.pending.push(Pending {
                    id,
                    kind: PendingKind::Confirmation,
                    thread_id: thread.clone(),
                    mcp: true,
                }),
                permissions::Decision::Allow { .. } => calls.runs_here = true,
            }
        } else if permissions::is_builtin(&self.scope.agent.tools, &name) {
            // Policy is decided here, in code, before anything runs.
            // Hooks' verdicts are folded in here too (a hook can only make it stricter).
            let for_worker = self.scope.self_hosted && SANDBOX_TOOLS.contains(&name.as_str());
            // A deferred call waits for the client's `user.tool_result`; in a self-hosted
            // environment the worker is that client, so there it asks the user instead.
            let Hooked {
                decision,
                input,
                defer,
            } = hook_step::apply(hooked.pre, input, !for_worker, |i| {
                permissions::decide(&self.scope.agent.tools, &name, i, &self.scope.egress)
            });
            let blocking = matches!(decision, permissions::Decision::Ask { .. })
                || (for_worker && matches!(decision, permissions::Decision::Allow { .. }));
            let body = json!({ "name": name, "input": input });
            let use_crosspost = crosspost.as_deref().filter(|_| blocking);
            calls.events.push(decided_use(
                kind::AGENT_TOOL_USE,
                body,
                &decision,
                use_crosspost,
                &id,
                thread,
                now,
            ));
            match decision {
                permissions::Decision::Deny { reason, .. } => {
                    calls.refused.push((id, denial(&reason)))
                }
                permissions::Decision::Ask { .. } if defer => calls.pending.push(Pending {
                    id,
                    kind: PendingKind::ClientTool,
                    thread_id: thread.clone(),
                    mcp: false,
                }),
                permissions::Decision::Ask { .. } => calls.pending.push(Pending {
                    id,
                    kind: PendingKind::Confirmation,
                    thread_id: thread.clone(),
                    mcp: false,
                }),
                permissions::Decision::Allow { .. } if for_worker => calls.pending.push(Pending {
                    id,
                    kind: PendingKind::ClientTool,
                    thread_id: thread.clone(),
                    mcp: false,
                }),
                permissions::Decision::Allow { .. } => calls.runs_here = true,
            }
        } else {
            let mut e = server_event(
                kind::AGENT_TOOL_USE,
                json!({ "name": name, "input": input, "evaluated_permission": "deny" }),
                thread,
                now,
            );
            e.id = id.clone();
            calls.events.push(e);
            let available: Vec<String> = self
                .offered_tools()
                .iter()
                .map(|t| t.name.clone())
                .collect();
            let available = if available.is_empty() {
                "none".to_string()
            } else {
                available.join(", ")
            };
            calls.refused.push((
                id,
                format!("There is no tool named `{name}`. Available tools: {available}."),
            ));
        }
    }
}

/// What the tool calls of one response came to.
#[derive(Default)]
pub(super) struct Calls {
    /// `agent.tool_use` / `agent.custom_tool_use` events, and refusals of bad delegations.
    pub(super) events: Vec<NewEvent>,
    /// The response's content as the context keeps it (calls with their event ids).
    pub(super) content: Vec<Value>,
    /// Calls that block the turn until answered.
    pub(super) pending: Vec<Pending>,
    /// Calls answered at once with an error: (call id, message).
    pub(super) refused: Vec<(String, String)>,
    /// MCP calls refused by policy: (call id, message).
    pub(super) mcp_refused: Vec<(String, String)>,
    /// Delegations to start.
    pub(super) sends: Vec<delegation::Send>,
    /// `list_agents` calls, answered in the transaction from the roster.
    pub(super) listings: Vec<(String, Value)>,
    /// Workflow platform calls, answered in the transaction and kept private.
    pub(super) platform: Vec<crate::workflow_runs::PlatformCall>,
    /// A call runs in this process (a built-in tool, a delegation).
    pub(super) runs_here: bool,
}

/// A built-in or MCP tool-use event carrying the permission decided for it, and the thread a
/// blocking call is cross-posted from.
fn decided_use(
    kind_name: &str,
    mut body: Value,
    decision: &permissions::Decision,
    crosspost: Option<&str>,
    id: &str,
    thread: &str,
    now: time::Micros,
) -> NewEvent {
    body["evaluated_permission"] = json!(decision.label());
    if let Some(ev) = decision.evaluation() {
        body["evaluation"] = ev.clone();
    }
    if let Some(t) = crosspost {
        body["session_thread_id"] = json!(t);
    }
    let mut e = server_event(kind_name, body, thread, now);
    e.id = id.to_string();
    e
}

/// What the model is told of a call the policy denied.
fn denial(reason: &str) -> String {
    format!(
        "Permission denied: {reason}. The call did not run; choose another approach or ask the user."
    )
}
