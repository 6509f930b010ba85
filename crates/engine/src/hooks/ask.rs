//! Asking the hooks that apply, one event at a time, oldest first, each turning its
//! endpoint's answer (or failure) into a verdict. Failing to read which hooks apply is the
//! store's error, not a hook's verdict: the caller fails as on any store error (the request
//! gets a 5xx, the runner stops and its step is retried), rather than blaming a hook that may
//! not exist.

use serde_json::{Value, json};

use super::{Asked, HookContext, Hooks};
use mast_domain::hook::{FailureMode, Hook, HookEvent};
use mast_domain::hook_answer::{
    GateDecision, GateOutcome, GateVerdict, HookVerdict, ModelResult, PostVerdict, PreDecision,
    parse_gate, parse_post, parse_pre, post_result,
};
use mast_store::StoreResult;

/// One built-in or MCP tool call, as hooks see it.
#[derive(Debug, Clone, Copy)]
pub struct ToolCallRef<'a> {
    /// The `agent.tool_use` / `agent.mcp_tool_use` event id (it pairs a pre with its post).
    pub tool_use_id: &'a str,
    /// The name matchers see: the built-in tool's name, or `mcp__<server>__<tool>`.
    pub tool_name: &'a str,
    /// The MCP server, for an MCP call.
    pub mcp_server_name: Option<&'a str>,
    pub input: &'a Value,
}

impl ToolCallRef<'_> {
    fn fields(&self, input: &Value) -> Value {
        let mut f = json!({
            "tool_name": self.tool_name,
            "tool_use_id": self.tool_use_id,
            "tool_input": input,
        });
        if let Some(server) = self.mcp_server_name {
            f["mcp_server_name"] = json!(server);
        }
        f
    }
}

/// What the `pre_tool_use` hooks made of a call: each asked hook's verdict, in the order
/// asked, and the input after the rewrites of those that allowed or asked with
/// `updated_input`.
#[derive(Debug, Clone, Default)]
pub struct PreOutcome {
    pub verdicts: Vec<HookVerdict>,
    pub input: Option<Value>,
}

/// What the `post_tool_use` hooks made of a result: each asked hook's verdict, and what the
/// model is given instead of the result (None: the result as it is).
#[derive(Debug, Clone, Default)]
pub struct PostOutcome {
    pub verdicts: Vec<PostVerdict>,
    pub model: Option<ModelResult>,
}

impl PostOutcome {
    /// Records the outcome on the result event it concerns: the verdicts under the body's
    /// `hooks`, which clients see beside the original result, and what the model is given
    /// instead in the private `internal.model_result`, which the context fold reads.
    pub fn annotate(self, body: &mut Value, internal: &mut Option<Value>) {
        if self.verdicts.is_empty() {
            return;
        }
        body["hooks"] = serde_json::to_value(&self.verdicts).unwrap_or_default();
        if let Some(m) = self.model {
            let slot = internal.get_or_insert_with(|| json!({}));
            slot["model_result"] = json!({"content": m.content, "is_error": m.is_error});
        }
    }
}

impl Hooks {
    /// Asks every `pre_tool_use` hook whose scope and matcher take this call; each sees the
    /// input as rewritten by those before it. A deny ends the asking (nothing outranks it).
    pub async fn pre_tool_use(
        &self,
        ctx: &HookContext<'_>,
        call: &ToolCallRef<'_>,
    ) -> StoreResult<PreOutcome> {
        let hooks = self
            .applying(ctx, HookEvent::PreToolUse, Some(call.tool_name))
            .await?;
        let mut out = PreOutcome::default();
        for asked in &hooks {
            let input = out.input.as_ref().unwrap_or(call.input);
            let payload = ctx.payload(&asked.0, call.fields(input));
            let verdict = match self.call(asked, &payload).await.and_then(|b| parse_pre(&b)) {
                Ok(a) => HookVerdict {
                    hook_id: asked.0.id.clone(),
                    decision: a.decision,
                    reason: a.reason,
                    updated_input: a.updated_input.map(Value::Object),
                    failed: None,
                },
                Err(why) => HookVerdict {
                    hook_id: asked.0.id.clone(),
                    decision: match asked.0.failure_mode {
                        FailureMode::Deny => PreDecision::Deny,
                        FailureMode::Allow => PreDecision::Allow,
                    },
                    reason: None,
                    updated_input: None,
                    failed: Some(failure(&asked.0, &why)),
                },
            };
            if matches!(verdict.decision, PreDecision::Allow | PreDecision::Ask)
                && let Some(updated) = &verdict.updated_input
            {
                out.input = Some(updated.clone());
            }
            let denied = verdict.decision == PreDecision::Deny;
            out.verdicts.push(verdict);
            if denied {
                break;
            }
        }
        Ok(out)
    }

    /// Asks every `post_tool_use` hook whose scope and matcher take this call about its
    /// result; each sees the result as the hooks before it left it. A hook that fails under
    /// `deny` withholds the result from the model and ends the asking.
    pub async fn post_tool_use(
        &self,
        ctx: &HookContext<'_>,
        call: &ToolCallRef<'_>,
        content: &[Value],
        is_error: bool,
    ) -> StoreResult<PostOutcome> {
        let hooks = self
            .applying(ctx, HookEvent::PostToolUse, Some(call.tool_name))
            .await?;
        let mut out = PostOutcome::default();
        for asked in &hooks {
            let seen = out
                .verdicts
                .iter()
                .rev()
                .find_map(|v| v.updated_result.as_deref())
                .unwrap_or(content);
            let mut fields = call.fields(call.input);
            fields["tool_result"] = json!({"content": seen, "is_error": is_error});
            let payload = ctx.payload(&asked.0, fields);
            let verdict = match self
                .call(asked, &payload)
                .await
                .and_then(|b| parse_post(&b))
            {
                Ok((updated_result, additional_context)) => PostVerdict {
                    hook_id: asked.0.id.clone(),
                    updated_result,
                    additional_context,
                    failed: None,
                    withheld: false,
                },
                Err(why) => PostVerdict {
                    hook_id: asked.0.id.clone(),
                    updated_result: None,
                    additional_context: None,
                    failed: Some(failure(&asked.0, &why)),
                    withheld: asked.0.failure_mode == FailureMode::Deny,
                },
            };
            let withheld = verdict.withheld;
            out.verdicts.push(verdict);
            if withheld {
                break;
            }
        }
        out.model = post_result(content, is_error, &out.verdicts);
        Ok(out)
    }

    /// Asks every hook of gate `event` whose scope (and, for delegates, matcher on `name`)
    /// applies, with the event's own `fields` in the payload. The first block ends the
    /// asking.
    pub async fn gate(
        &self,
        ctx: &HookContext<'_>,
        event: HookEvent,
        name: Option<&str>,
        fields: Value,
    ) -> StoreResult<GateOutcome> {
        let hooks = self.applying(ctx, event, name).await?;
        let mut out = GateOutcome::default();
        for asked in &hooks {
            let payload = ctx.payload(&asked.0, fields.clone());
            let verdict = self.ask_gate(asked, event, &payload).await;
            let blocked = verdict.decision == GateDecision::Block;
            out.push(verdict);
            if blocked {
                break;
            }
        }
        Ok(out)
    }

    async fn ask_gate(&self, asked: &Asked, event: HookEvent, payload: &Value) -> GateVerdict {
        let hook = &asked.0;
        match self
            .call(asked, payload)
            .await
            .and_then(|b| parse_gate(event, &b))
        {
            Ok(a) => GateVerdict {
                hook_id: hook.id.clone(),
                event,
                decision: a.decision,
                reason: a.reason,
                failed: None,
            },
            Err(why) => GateVerdict {
                hook_id: hook.id.clone(),
                event,
                decision: match hook.failure_mode {
                    FailureMode::Deny => GateDecision::Block,
                    FailureMode::Allow => GateDecision::Allow,
                },
                reason: None,
                failed: Some(failure(hook, &why)),
            },
        }
    }
}

/// Why a hook's verdict is its failure mode, and what that mode did, in the event's terms.
fn failure(hook: &Hook, why: &str) -> String {
    let deny = hook.failure_mode == FailureMode::Deny;
    let done = match (hook.event, deny) {
        (HookEvent::PreToolUse, true) => "the call is denied",
        (HookEvent::PreToolUse, false) => "the call is allowed",
        (HookEvent::PostToolUse, true) => "the result is withheld from the model",
        (HookEvent::PostToolUse, false) => "the result is passed on as it is",
        (HookEvent::UserPromptSubmit, true) => "the message is blocked",
        (HookEvent::UserPromptSubmit, false) => "the message is allowed",
        (HookEvent::Stop | HookEvent::SubagentStop, true) => "the stop is refused",
        (HookEvent::Stop | HookEvent::SubagentStop, false) => "the stop goes ahead",
        (HookEvent::SubagentStart, true) => "the delegation is refused",
        (HookEvent::SubagentStart, false) => "the delegation is allowed",
    };
    format!(
        "hook {} failed ({why}), so {done} by its failure mode",
        hook.id
    )
}
