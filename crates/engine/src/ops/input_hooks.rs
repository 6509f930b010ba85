//! Hooks asked about client input before it is stored: `user_prompt_submit`
//! about each event whose text the model is given as input — `user.message`,
//! `system.message`, `user.define_outcome` (a block refuses the whole request, so nothing is
//! stored) — and `post_tool_use` about each `user.tool_result` answering a built-in call (a
//! self-hosted worker's result, or a deferred call's), whose verdicts are stored with it.
//!
//! The hooks answer while no transaction is open; a workspace without hooks of these events
//! pays no store read here (their lists are cached). The transaction may still refuse the
//! batch afterwards (an archived session, an answer to a call that is not pending): the hooks
//! were then asked about input that was never stored.

use serde_json::{Value, json};

use super::OpError;
use crate::Engine;
use crate::delegation::thread_agent;
use crate::hooks::{HookContext, PostOutcome, ToolCallRef};
use mast_domain::content::plain_text;
use mast_domain::events::{ClientEvent, kind};
use mast_domain::hook::HookEvent;
use mast_domain::invalid::Invalid;
use mast_domain::outcome::task_text;
use mast_domain::session::SessionBodyHead;

/// One input event a `user_prompt_submit` hook is asked about: its place in the request, its
/// type, and the content the model is given.
pub(super) struct Prompt {
    pub index: usize,
    pub kind: &'static str,
    pub content: Vec<Value>,
}

impl Prompt {
    /// The prompt of event `index` of type `kind` with stored body `body`, if the model is
    /// given its text as input.
    pub fn of(index: usize, kind: &str, body: &Value) -> Option<Prompt> {
        let blocks = || body.get("content")?.as_array().cloned();
        let (kind, content) = match kind {
            kind::USER_MESSAGE => (kind::USER_MESSAGE, blocks()?),
            kind::SYSTEM_MESSAGE => (kind::SYSTEM_MESSAGE, blocks()?),
            kind::USER_DEFINE_OUTCOME => (
                kind::USER_DEFINE_OUTCOME,
                vec![json!({"type": "text", "text": task_text(body)?})],
            ),
            _ => return None,
        };
        Some(Prompt {
            index,
            kind,
            content,
        })
    }
}

impl Engine {
    /// Puts `prompts` to the `user_prompt_submit` hooks of `session`'s primary thread; the
    /// first block refuses the request, naming `at[index]`.
    pub(super) async fn gate_prompts(
        &self,
        session: &HookContext<'_>,
        at: &str,
        prompts: &[Prompt],
    ) -> Result<(), OpError> {
        let Some(hooks) = &self.inner.hooks else {
            return Ok(());
        };
        let event = HookEvent::UserPromptSubmit;
        if prompts.is_empty() || !hooks.any(session.workspace_id, event).await? {
            return Ok(());
        }
        for p in prompts {
            let fields = json!({
                "message_type": p.kind,
                "prompt": plain_text(&p.content),
                "content": p.content,
            });
            let gate = hooks.gate(session, event, None, fields).await?;
            if let Some((hook_id, reason)) = gate.blocked {
                let at = format!("{at}[{}]", p.index);
                let message = format!("`{at}` was blocked by a user_prompt_submit hook: {reason}");
                return Err(Invalid::with_code("blocked_by_hook", message)
                    .detail("hook_id", hook_id)
                    .into());
            }
        }
        Ok(())
    }

    /// Asks the hooks about a batch sent to session `id`: `user_prompt_submit` about its
    /// input (see [`Engine::gate_prompts`]) and `post_tool_use` about each
    /// `user.tool_result` answering a built-in call. Returns the post outcomes by batch index.
    pub(super) async fn hook_batch(
        &self,
        ws: &str,
        id: &str,
        batch: &[ClientEvent],
    ) -> Result<Vec<Option<PostOutcome>>, OpError> {
        let mut post = vec![None; batch.len()];
        let Some(hooks) = &self.inner.hooks else {
            return Ok(post);
        };
        let prompts: Vec<Prompt> = match hooks.any(ws, HookEvent::UserPromptSubmit).await? {
            true => batch
                .iter()
                .enumerate()
                .filter_map(|(i, e)| Prompt::of(i, e.kind(), &e.body(None)))
                .collect(),
            false => vec![],
        };
        let results = batch
            .iter()
            .any(|e| matches!(e, ClientEvent::ToolResult { .. }))
            && hooks.any(ws, HookEvent::PostToolUse).await?;
        if prompts.is_empty() && !results {
            return Ok(post);
        }
        // The transaction decides what an unknown session is; hooks have nothing to ask.
        let Some(rec) = self.inner.store.get_session(ws, id).await? else {
            return Ok(post);
        };
        let head: SessionBodyHead =
            serde_json::from_str(&rec.body).map_err(|e| OpError::Store(e.into()))?;
        // Input goes to the primary thread, of the session's agent.
        let session = HookContext {
            workspace_id: ws,
            session_id: id,
            thread_id: &head.primary_thread_id,
            agent_id: &rec.agent_id,
            scope_agent_id: &rec.agent_id,
            environment_id: &rec.environment_id,
        };
        self.gate_prompts(&session, "events", &prompts).await?;
        if results {
            for (i, e) in batch.iter().enumerate() {
                if let ClientEvent::ToolResult {
                    tool_use_id,
                    content,
                    is_error,
                } = e
                {
                    let is_error = is_error.unwrap_or(false);
                    post[i] = self
                        .post_hook_result(&session, tool_use_id, content, is_error)
                        .await?;
                }
            }
        }
        Ok(post)
    }

    /// The `post_tool_use` outcome of a client's result for built-in call `tool_use_id`;
    /// None when it answers no built-in call (the transaction refuses it) or no hook applies.
    async fn post_hook_result(
        &self,
        session: &HookContext<'_>,
        tool_use_id: &str,
        content: &[Value],
        is_error: bool,
    ) -> Result<Option<PostOutcome>, OpError> {
        let Some(hooks) = &self.inner.hooks else {
            return Ok(None);
        };
        let store = &self.inner.store;
        let Some(call) = store.get_event(session.session_id, tool_use_id).await? else {
            return Ok(None);
        };
        if call.kind != kind::AGENT_TOOL_USE {
            return Ok(None);
        }
        let thread = call
            .thread_id
            .clone()
            .unwrap_or_else(|| session.thread_id.to_string());
        // A delegate's calls are its own agent's.
        let agent_id = match thread == session.thread_id {
            true => session.agent_id.to_string(),
            false => store
                .get_thread(session.session_id, &thread)
                .await?
                .and_then(|t| thread_agent(&t.body))
                .map(|a| a.id)
                .unwrap_or_else(|| session.agent_id.to_string()),
        };
        let name = call.body.get("name").and_then(Value::as_str).unwrap_or("");
        let input = call.body.get("input").cloned().unwrap_or_else(|| json!({}));
        let ctx = HookContext {
            thread_id: &thread,
            agent_id: &agent_id,
            scope_agent_id: crate::delegation::governing_agent(&agent_id, session.agent_id),
            ..*session
        };
        let call = ToolCallRef {
            tool_use_id,
            tool_name: name,
            mcp_server_name: None,
            input: &input,
        };
        let outcome = hooks.post_tool_use(&ctx, &call, content, is_error).await?;
        Ok((!outcome.verdicts.is_empty()).then_some(outcome))
    }
}
