//! Session events: what clients may send, and the bodies of events the server
//! emits. Bodies exclude `id` and `processed_at`, which the log stores in columns.

use serde_json::{Value, json};

use super::content::{self, Place};
use super::fields::{Obj, must_be, tag};
use super::invalid::{Invalid, Valid};
use super::session::ModelUsage;

/// Event type names.
pub mod kind {
    pub const USER_MESSAGE: &str = "user.message";
    pub const USER_INTERRUPT: &str = "user.interrupt";
    pub const USER_TOOL_CONFIRMATION: &str = "user.tool_confirmation";
    pub const USER_CUSTOM_TOOL_RESULT: &str = "user.custom_tool_result";
    pub const USER_TOOL_RESULT: &str = "user.tool_result";
    pub const USER_DEFINE_OUTCOME: &str = "user.define_outcome";
    pub const SYSTEM_MESSAGE: &str = "system.message";
    pub const AGENT_MESSAGE: &str = "agent.message";
    pub const AGENT_THINKING: &str = "agent.thinking";
    pub const AGENT_TOOL_USE: &str = "agent.tool_use";
    pub const AGENT_TOOL_RESULT: &str = "agent.tool_result";
    pub const AGENT_CUSTOM_TOOL_USE: &str = "agent.custom_tool_use";
    pub const AGENT_MCP_TOOL_USE: &str = "agent.mcp_tool_use";
    pub const AGENT_MCP_TOOL_RESULT: &str = "agent.mcp_tool_result";
    pub const STATUS_RUNNING: &str = "session.status_running";
    pub const STATUS_IDLE: &str = "session.status_idle";
    pub const STATUS_RESCHEDULED: &str = "session.status_rescheduled";
    pub const STATUS_TERMINATED: &str = "session.status_terminated";
    pub const SESSION_ERROR: &str = "session.error";
    pub const SESSION_UPDATED: &str = "session.updated";
    pub const SESSION_USAGE: &str = "session.usage";
    pub const SESSION_DELETED: &str = "session.deleted";
    pub const SPAN_START: &str = "span.model_request_start";
    pub const SPAN_END: &str = "span.model_request_end";
    pub const THREAD_CREATED: &str = "session.thread_created";
    pub const THREAD_STATUS_RUNNING: &str = "session.thread_status_running";
    pub const THREAD_STATUS_IDLE: &str = "session.thread_status_idle";
    pub const THREAD_STATUS_RESCHEDULED: &str = "session.thread_status_rescheduled";
    pub const THREAD_STATUS_TERMINATED: &str = "session.thread_status_terminated";
    pub const THREAD_MESSAGE_SENT: &str = "agent.thread_message_sent";
    pub const THREAD_MESSAGE_RECEIVED: &str = "agent.thread_message_received";
    pub const OUTCOME_EVALUATION_START: &str = "span.outcome_evaluation_start";
    pub const OUTCOME_EVALUATION_ONGOING: &str = "span.outcome_evaluation_ongoing";
    pub const OUTCOME_EVALUATION_END: &str = "span.outcome_evaluation_end";
    // Context compaction.
    pub const AGENT_THREAD_CONTEXT_COMPACTED: &str = "agent.thread_context_compacted";
    // Workflow runs.
    pub const WORKFLOW_RUN_CREATED: &str = "workflow_run.created";
    pub const WORKFLOW_RUN_STATUS_RUNNING: &str = "workflow_run.status_running";
    pub const WORKFLOW_RUN_STATUS_IDLE: &str = "workflow_run.status_idle";
    pub const WORKFLOW_RUN_PHASE_STARTED: &str = "workflow_run.phase_started";
    pub const WORKFLOW_RUN_PHASE_ENDED: &str = "workflow_run.phase_ended";
    pub const WORKFLOW_RUN_ERROR: &str = "workflow_run.error";
    pub const WORKFLOW_RUN_STATUS_ENDED: &str = "workflow_run.status_ended";
}

/// Every persisted event type clients may filter on (`types[]`); `session.deleted` is never
/// listed.
pub const LISTABLE_TYPES: &[&str] = &[
    "user.message",
    "user.interrupt",
    "user.tool_confirmation",
    "user.custom_tool_result",
    "user.define_outcome",
    "user.tool_result",
    "system.message",
    "agent.message",
    "agent.thinking",
    "agent.tool_use",
    "agent.tool_result",
    "agent.mcp_tool_use",
    "agent.mcp_tool_result",
    "agent.custom_tool_use",
    "agent.thread_message_sent",
    "agent.thread_message_received",
    "agent.thread_context_compacted",
    "session.status_running",
    "session.status_idle",
    "session.status_rescheduled",
    "session.status_terminated",
    "session.error",
    "session.updated",
    "session.usage",
    "session.thread_created",
    "session.thread_status_running",
    "session.thread_status_idle",
    "session.thread_status_rescheduled",
    "session.thread_status_terminated",
    "span.model_request_start",
    "span.model_request_end",
    "span.outcome_evaluation_start",
    "span.outcome_evaluation_ongoing",
    "span.outcome_evaluation_end",
    "workflow_run.created",
    "workflow_run.status_running",
    "workflow_run.status_idle",
    "workflow_run.phase_started",
    "workflow_run.phase_ended",
    "workflow_run.error",
    "workflow_run.status_ended",
];

/// A validated event sent by a client.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientEvent {
    UserMessage {
        content: Vec<Value>,
    },
    Interrupt {
        thread_id: Option<String>,
    },
    ToolConfirmation {
        tool_use_id: String,
        allow: bool,
        deny_message: Option<String>,
    },
    CustomToolResult {
        custom_tool_use_id: String,
        content: Vec<Value>,
        is_error: Option<bool>,
    },
    ToolResult {
        tool_use_id: String,
        content: Vec<Value>,
        is_error: Option<bool>,
    },
    SystemMessage {
        content: Vec<Value>,
    },
    /// `user.define_outcome`.
    DefineOutcome(super::outcome::DefineOutcome),
}

const MAX_BLOCKS: usize = 1000;

/// The event types a client may send, in documentation order.
const SENDABLE: [&str; 7] = [
    kind::USER_MESSAGE,
    kind::USER_INTERRUPT,
    kind::USER_TOOL_CONFIRMATION,
    kind::USER_CUSTOM_TOOL_RESULT,
    kind::USER_TOOL_RESULT,
    kind::USER_DEFINE_OUTCOME,
    kind::SYSTEM_MESSAGE,
];

impl ClientEvent {
    /// Parses and validates one event of a send request (`at` names it in errors).
    pub fn parse(at: &str, v: &Value) -> Valid<ClientEvent> {
        if !v.is_object() {
            return Err(must_be(at, "an event object", v));
        }
        let t = tag(at, v, &SENDABLE)?;
        let fields: &[&str] = match t {
            kind::USER_MESSAGE | kind::SYSTEM_MESSAGE => &["type", "content"],
            kind::USER_INTERRUPT => &["type", "session_thread_id"],
            kind::USER_TOOL_CONFIRMATION => &["type", "tool_use_id", "result", "deny_message"],
            kind::USER_CUSTOM_TOOL_RESULT => &["type", "custom_tool_use_id", "content", "is_error"],
            kind::USER_TOOL_RESULT => &["type", "tool_use_id", "content", "is_error"],
            _ => {
                return Ok(ClientEvent::DefineOutcome(
                    super::outcome::DefineOutcome::parse(at, v)?,
                ));
            }
        };
        let o = Obj::new(at, v, &format!("a `{t}` event"), fields)?;
        let content = |place: Place, min: usize| {
            content::validate(&o.path("content"), o.raw("content"), place, min, MAX_BLOCKS)
        };
        Ok(match t {
            kind::USER_MESSAGE => ClientEvent::UserMessage {
                content: content(Place::UserMessage, 1)?,
            },
            kind::USER_INTERRUPT => ClientEvent::Interrupt {
                thread_id: o.str("session_thread_id")?.map(str::to_string),
            },
            kind::USER_TOOL_CONFIRMATION => {
                let allow = match o.str("result")? {
                    Some("allow") => true,
                    Some("deny") => false,
                    _ => {
                        return Err(Invalid::new(format!(
                            "`{at}.result` must be `allow` or `deny`"
                        )));
                    }
                };
                let deny_message = o.str("deny_message")?.map(str::to_string);
                if allow && deny_message.is_some() {
                    return Err(Invalid::new(format!(
                        "`{at}.deny_message` is only allowed with `result: deny`"
                    )));
                }
                ClientEvent::ToolConfirmation {
                    tool_use_id: o.req_str("tool_use_id")?.to_string(),
                    allow,
                    deny_message,
                }
            }
            kind::USER_CUSTOM_TOOL_RESULT => ClientEvent::CustomToolResult {
                custom_tool_use_id: o.req_str("custom_tool_use_id")?.to_string(),
                content: content(Place::ToolResult, 0)?,
                is_error: o.bool("is_error")?,
            },
            kind::USER_TOOL_RESULT => ClientEvent::ToolResult {
                tool_use_id: o.req_str("tool_use_id")?.to_string(),
                content: content(Place::ToolResult, 0)?,
                is_error: o.bool("is_error")?,
            },
            _ => ClientEvent::SystemMessage {
                content: content(Place::System, 1)?,
            },
        })
    }

    /// The event type name.
    pub fn kind(&self) -> &'static str {
        match self {
            ClientEvent::UserMessage { .. } => kind::USER_MESSAGE,
            ClientEvent::Interrupt { .. } => kind::USER_INTERRUPT,
            ClientEvent::ToolConfirmation { .. } => kind::USER_TOOL_CONFIRMATION,
            ClientEvent::CustomToolResult { .. } => kind::USER_CUSTOM_TOOL_RESULT,
            ClientEvent::ToolResult { .. } => kind::USER_TOOL_RESULT,
            ClientEvent::SystemMessage { .. } => kind::SYSTEM_MESSAGE,
            ClientEvent::DefineOutcome(_) => kind::USER_DEFINE_OUTCOME,
        }
    }

    /// Whether this answers a tool use (a custom or self-hosted tool result).
    pub fn is_tool_result(&self) -> bool {
        matches!(
            self,
            ClientEvent::CustomToolResult { .. } | ClientEvent::ToolResult { .. }
        )
    }

    /// The persisted body (routing thread added by the caller where it applies).
    pub fn body(&self, routed_thread: Option<&str>) -> Value {
        let mut b = match self {
            ClientEvent::UserMessage { content } => json!({ "content": content }),
            ClientEvent::Interrupt { thread_id } => json!({ "session_thread_id": thread_id }),
            ClientEvent::ToolConfirmation {
                tool_use_id,
                allow,
                deny_message,
            } => json!({
                "tool_use_id": tool_use_id,
                "result": if *allow { "allow" } else { "deny" },
                "deny_message": deny_message,
            }),
            ClientEvent::CustomToolResult {
                custom_tool_use_id,
                content,
                is_error,
            } => json!({
                "custom_tool_use_id": custom_tool_use_id, "content": content, "is_error": is_error,
            }),
            ClientEvent::ToolResult {
                tool_use_id,
                content,
                is_error,
            } => json!({
                "tool_use_id": tool_use_id, "content": content, "is_error": is_error,
            }),
            ClientEvent::SystemMessage { content } => json!({ "content": content }),
            ClientEvent::DefineOutcome(d) => d.body(),
        };
        if let Some(t) = routed_thread {
            b["session_thread_id"] = t.into();
        }
        b
    }
}

/// Parses a batch and checks the rules that need no session state: at most one
/// `system.message`, last, right after a user message or tool result.
pub fn parse_batch(events: &[Value], max: usize) -> Valid<Vec<ClientEvent>> {
    if events.is_empty() {
        return Err(Invalid::new("`events` must contain at least one event"));
    }
    if events.len() > max {
        return Err(Invalid::new(format!(
            "`events` has {} items; at most {max} per request",
            events.len()
        )));
    }
    let parsed = events
        .iter()
        .enumerate()
        .map(|(i, e)| ClientEvent::parse(&format!("events[{i}]"), e))
        .collect::<Valid<Vec<_>>>()?;
    for (i, e) in parsed.iter().enumerate() {
        if let ClientEvent::SystemMessage { .. } = e {
            if i + 1 != parsed.len() {
                return Err(Invalid::new(
                    "`system.message` must be the last event of the request",
                ));
            }
            let follows = i > 0
                && matches!(
                    parsed[i - 1],
                    ClientEvent::UserMessage { .. }
                        | ClientEvent::CustomToolResult { .. }
                        | ClientEvent::ToolResult { .. }
                );
            if !follows {
                return Err(Invalid::new(
                    "`system.message` must come right after the `user.message`, `user.tool_result` or `user.custom_tool_result` it accompanies",
                ));
            }
        }
    }
    Ok(parsed)
}

/// What a client or server event gives a blocking event: the store keeps one answer of each
/// kind per blocking event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Answer {
    /// A tool result (`agent.tool_result`, `user.tool_result`, `user.custom_tool_result`).
    Result,
    /// A `user.tool_confirmation`.
    Confirmation,
}

impl Answer {
    /// The name the store records.
    pub fn as_str(self) -> &'static str {
        match self {
            Answer::Result => "result",
            Answer::Confirmation => "confirmation",
        }
    }
}

/// Why a turn stopped.
#[derive(Debug, Clone, PartialEq)]
pub enum StopReason {
    EndTurn,
    RequiresAction(Vec<String>),
    RetriesExhausted,
    Refusal,
    /// The session's list cost reached its budget (or a model has no price to measure).
    BudgetReached,
}

impl StopReason {
    /// The wire object.
    pub fn to_json(&self) -> Value {
        match self {
            StopReason::EndTurn => json!({"type": "end_turn"}),
            StopReason::RequiresAction(ids) => json!({"type": "requires_action", "event_ids": ids}),
            StopReason::RetriesExhausted => json!({"type": "retries_exhausted"}),
            StopReason::Refusal => json!({"type": "refusal"}),
            StopReason::BudgetReached => json!({"type": "budget_reached"}),
        }
    }
}

/// `session.status_idle` body.
pub fn idle(stop: &StopReason, stop_details: Option<Value>) -> Value {
    json!({ "stop_reason": stop.to_json(), "stop_details": stop_details })
}

/// Body of a child thread's `session.thread_status_*` event (cross-posted: it names the
/// thread). `stop` only for `session.thread_status_idle`.
pub fn thread_status(
    thread: &str,
    agent_name: &str,
    stop: Option<(&StopReason, Option<Value>)>,
) -> Value {
    let mut b = json!({ "session_thread_id": thread, "agent_name": agent_name });
    if let Some((reason, details)) = stop {
        b["stop_reason"] = reason.to_json();
        b["stop_details"] = details.unwrap_or(Value::Null);
    }
    b
}

/// `span.model_request_end` body.
pub fn span_end(start_id: &str, usage: &ModelUsage, is_error: bool) -> Value {
    json!({ "model_request_start_id": start_id, "is_error": is_error, "model_usage": usage })
}

/// `agent.tool_result` body.
pub fn tool_result(tool_use_id: &str, content: Vec<Value>, is_error: bool) -> Value {
    json!({ "tool_use_id": tool_use_id, "content": content, "is_error": is_error })
}

/// `agent.mcp_tool_result` body.
pub fn mcp_tool_result(mcp_tool_use_id: &str, content: Vec<Value>, is_error: bool) -> Value {
    json!({ "mcp_tool_use_id": mcp_tool_use_id, "content": content, "is_error": is_error })
}

/// `session.error` body of an MCP failure (`mcp_connection_failed_error`,
/// `mcp_authentication_failed_error`), which names the server.
pub fn mcp_session_error(
    error_type: &str,
    server: &str,
    message: &str,
    retry_status: &str,
) -> Value {
    json!({ "error": { "type": error_type, "mcp_server_name": server, "message": message, "retry_status": { "type": retry_status } } })
}

/// `session.error` body.
pub fn session_error(error_type: &str, message: &str, retry_status: &str) -> Value {
    json!({ "error": { "type": error_type, "message": message, "retry_status": { "type": retry_status } } })
}

/// What interrupted tool calls are answered with (upstream's wording).
pub const INTERRUPTED_TOOL_MESSAGE: &str =
    "Tool execution was interrupted before completion. Please retry.";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_message_placement() {
        let um = json!({"type":"user.message","content":[{"type":"text","text":"hi"}]});
        let sm = json!({"type":"system.message","content":[{"type":"text","text":"be brief"}]});
        assert!(parse_batch(&[um.clone(), sm.clone()], 100).is_ok());
        assert!(parse_batch(std::slice::from_ref(&sm), 100).is_err());
        assert!(parse_batch(&[um.clone(), sm.clone(), um.clone()], 100).is_err());
        assert!(parse_batch(&[um.clone(), sm.clone(), sm.clone()], 100).is_err());
        let int = json!({"type":"user.interrupt"});
        assert!(parse_batch(&[int, sm], 100).is_err());
    }

    #[test]
    fn unknown_keys_are_named() {
        let e = ClientEvent::parse(
            "events[0]",
            &json!({"type":"user.interrupt","session_thread":"sthr_x"}),
        )
        .unwrap_err();
        assert_eq!(e.details["field"], "events[0].session_thread");
        assert_eq!(e.details["suggestion"], "session_thread_id");
    }

    #[test]
    fn rejects_unknown_and_incomplete_outcomes() {
        assert!(ClientEvent::parse("e", &json!({"type":"agent.message"})).is_err());
        assert!(
            ClientEvent::parse(
                "e",
                &json!({"type":"user.define_outcome","description":"d"})
            )
            .is_err()
        );
        assert!(ClientEvent::parse("e", &json!({"type":"user.tool_confirmation","tool_use_id":"x","result":"allow","deny_message":"no"})).is_err());
        assert!(parse_batch(&[], 100).is_err());
    }
}
