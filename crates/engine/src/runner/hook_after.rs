//! `post_tool_use`, `stop` and `subagent_stop` hooks in the loop: after a built-in or MCP
//! call ran and before its result is recorded, and when a thread's model ends its turn by
//! itself, before the turn's end is recorded (no transaction is open while they answer).
//!
//! Durability: what the hooks decided is recorded with the result or the response it
//! concerns, in the same transaction. A crash while they answer loses that unrecorded step:
//! a tool call is then closed as interrupted (never run twice), a response is asked for again.

use serde_json::{Value, json};

use super::{Loop, Role, RunError, Waited, store_err};
use crate::hooks::{PostOutcome, ToolCallRef};
use mast_domain::hook::HookEvent;
use mast_domain::hook_answer::GateOutcome;

impl Loop<'_> {
    /// Asks the `post_tool_use` hooks that match call `id` (built-in `name`, or an MCP tool
    /// on `server`) about its result. Ok(Done(None)) when no hook applies; Interrupted when
    /// an interrupt came first (the interrupt closes the call).
    pub(super) async fn ask_post_hooks(
        &self,
        id: &str,
        name: &str,
        server: Option<&str>,
        input: &Value,
        content: &[Value],
        is_error: bool,
    ) -> Result<Waited<Option<PostOutcome>>, RunError> {
        let Some(hooks) = self.inner.hooks.clone() else {
            return Ok(Waited::Done(None));
        };
        if !self
            .hold(hooks.any(&self.scope.workspace_id, HookEvent::PostToolUse))
            .await?
        {
            return Ok(Waited::Done(None));
        }
        let tool_name = match server {
            Some(server) => format!("mcp__{server}__{name}"),
            None => name.to_string(),
        };
        let call = ToolCallRef {
            tool_use_id: id,
            tool_name: &tool_name,
            mcp_server_name: server,
            input,
        };
        let ctx = self.hook_ctx();
        let asked = self
            .interruptible(hooks.post_tool_use(&ctx, &call, content, is_error))
            .await?;
        Ok(match asked {
            Waited::Done(o) => Waited::Done(Some(o.map_err(store_err)?)),
            Waited::Interrupted => Waited::Interrupted,
        })
    }

    /// Asks the `stop` hooks (the primary thread) or `subagent_stop` hooks (a delegate,
    /// matched on its name) whether the turn may end, `said` being the model's last text and
    /// `stop_reason` why it stopped. None when no hook applies or an interrupt came first
    /// (which ends the turn anyway).
    pub(super) async fn ask_stop_hooks(
        &self,
        said: &str,
        stop_reason: &str,
    ) -> Result<Option<GateOutcome>, RunError> {
        let Some(hooks) = self.inner.hooks.clone() else {
            return Ok(None);
        };
        if self.scope.workflow_run {
            // A run's agent is the plan's, not a delegation: `subagent_stop` is not asked.
            return Ok(None);
        }
        let (event, name) = match &self.scope.role {
            Role::Primary => (HookEvent::Stop, None),
            Role::Child { name } => (HookEvent::SubagentStop, Some(name.as_str())),
        };
        if !self
            .hold(hooks.any(&self.scope.workspace_id, event))
            .await?
        {
            return Ok(None);
        }
        let mut fields = json!({
            "stop_reason": stop_reason,
            "last_message": said,
            // The turn goes on because a stop hook blocked an earlier stop of it.
            "stop_hook_active": self.view.transcript.stop_hook_active(),
        });
        if let Some(name) = name {
            fields["subagent_name"] = json!(name);
            fields["parent_thread_id"] = json!(self.scope.primary);
        }
        let ctx = self.hook_ctx();
        Ok(
            match self
                .interruptible(hooks.gate(&ctx, event, name, fields))
                .await?
            {
                Waited::Done(gate) => Some(gate.map_err(store_err)?),
                Waited::Interrupted => None,
            },
        )
    }
}
