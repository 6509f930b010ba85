//! Hooks (Mast's own addition, issue 20): creating them (the signing secret is sealed with
//! the server's key and shown once) and asking them about a tool call before it runs.
//!
//! A call is a Standard Webhooks-signed JSON POST (see [`crate::standard_webhooks`]) made
//! while no store transaction or lock is held; its answer decides (with the permission
//! policy, see [`crate::domain::hook::combine`]) what happens to the call. An endpoint that
//! times out, errs or answers something unreadable gets its hook's failure mode (deny unless
//! configured to allow), and the verdict says why.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::config::ConfiguredHook;
use crate::domain::hook::{
    FailureMode, Hook, HookCreate, HookVerdict, PRE_TOOL_USE, PreAnswer, PreDecision,
};
use crate::domain::ids::new_id;
use crate::domain::invalid::Invalid;
use crate::domain::time;
use crate::engine::ops::OpError;
use crate::secrets::Cipher;
use crate::standard_webhooks::{SignedPoster, SigningSecret};
use crate::store::{HookRecord, Store};
use crate::tools::netguard::NetGuard;

/// Largest hook answer read (an `updated_input` can be large).
const ANSWER_LIMIT: usize = 256 * 1024;

/// The hooks service: the store, the key that seals signing secrets, and the signed client.
pub struct Hooks {
    store: Arc<dyn Store>,
    cipher: Result<Cipher, String>,
    poster: SignedPoster,
    /// The config file's hooks, asked in every workspace before the workspace's own.
    configured: Vec<ConfiguredHook>,
}

/// One tool call a `pre_tool_use` hook is asked about.
#[derive(Debug, Clone)]
pub struct PreCall<'a> {
    pub workspace_id: &'a str,
    pub session_id: &'a str,
    pub thread_id: &'a str,
    pub agent_id: &'a str,
    pub environment_id: &'a str,
    /// The `agent.tool_use` / `agent.mcp_tool_use` event id the call will have.
    pub tool_use_id: &'a str,
    /// The name matchers see: the built-in tool's name, or `mcp__<server>__<tool>`.
    pub tool_name: &'a str,
    /// The MCP server, for an MCP call.
    pub mcp_server_name: Option<&'a str>,
    pub input: &'a Value,
}

/// What the hooks made of a call: each asked hook's verdict, in the order asked, and the
/// input after the rewrites of those that allowed or asked with `updated_input`.
#[derive(Debug, Clone, Default)]
pub struct PreOutcome {
    pub verdicts: Vec<HookVerdict>,
    pub input: Option<Value>,
}

impl Hooks {
    /// The service over `store`, sealing with `cipher` (or refusing to create hooks, saying
    /// why, when the server has no key); calls go through `guard`.
    pub fn new(store: Arc<dyn Store>, cipher: Result<Cipher, String>, guard: NetGuard) -> Self {
        Hooks {
            store,
            cipher,
            poster: SignedPoster::new(guard),
            configured: Vec::new(),
        }
    }

    /// Adds the config file's hooks (see [`crate::config::load_hooks`]).
    pub fn with_configured(mut self, configured: Vec<ConfiguredHook>) -> Self {
        self.configured = configured;
        self
    }

    /// Validates and stores a new hook; the response (only this one) carries its secret.
    pub async fn create(&self, workspace_id: &str, body: HookCreate) -> Result<Hook, OpError> {
        let mut hook = body.validate()?;
        self.poster
            .check_url(&hook.url)
            .map_err(|why| Invalid::new(format!("`url`: {why}")))?;
        let cipher = self.cipher.as_ref().map_err(|why| {
            Invalid::with_code(
                "secret_key_unavailable",
                format!(
                    "this server has no key to encrypt hook signing secrets with ({why}); \
                     its operator sets MAST_SECRET_KEY or MAST_SECRET_KEY_FILE"
                ),
            )
        })?;
        let now = time::now();
        hook.id = new_id("hook");
        hook.created_at = time::format(now);
        let secret = SigningSecret::generate().expose();
        let rec = HookRecord {
            hook: hook.clone(),
            sealed_secret: cipher.seal(secret.as_bytes(), &hook.id),
        };
        self.store.insert_hook(workspace_id, &rec, now).await?;
        hook.signing_secret = Some(secret);
        Ok(hook)
    }

    /// Asks every `pre_tool_use` hook of the workspace whose scope and matcher take this call,
    /// oldest first; each sees the input as rewritten by those before it. A deny ends the
    /// asking (nothing can outrank it). A store failure is a verdict too (fail closed).
    pub async fn pre_tool_use(&self, call: &PreCall<'_>) -> PreOutcome {
        let hooks = match self
            .store
            .hooks_for_event(call.workspace_id, PRE_TOOL_USE)
            .await
        {
            Ok(h) => h,
            Err(e) => {
                return PreOutcome {
                    verdicts: vec![HookVerdict {
                        hook_id: "*".into(),
                        decision: PreDecision::Deny,
                        reason: None,
                        updated_input: None,
                        failed: Some(format!("the hooks could not be read: {e}")),
                    }],
                    input: None,
                };
            }
        };
        let mut out = PreOutcome::default();
        let configured = self
            .configured
            .iter()
            .map(|c| (&c.hook, Ok(c.secret.clone())));
        let stored = hooks.iter().map(|r| (&r.hook, self.secret_of(r)));
        for (hook, secret) in configured.chain(stored).filter(|(h, _)| {
            h.event == PRE_TOOL_USE
                && h.in_scope(call.agent_id, call.environment_id)
                && h.matches_tool(call.tool_name)
        }) {
            let input = out.input.as_ref().unwrap_or(call.input);
            let verdict = self.ask_pre(hook, secret, call, input).await;
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
        out
    }

    /// One signed call of one hook, turned into its verdict.
    async fn ask_pre(
        &self,
        hook: &Hook,
        secret: Result<SigningSecret, String>,
        call: &PreCall<'_>,
        input: &Value,
    ) -> HookVerdict {
        let mut payload = json!({
            "type": "hook_event",
            "hook_id": hook.id,
            "event": PRE_TOOL_USE,
            "session_id": call.session_id,
            "thread_id": call.thread_id,
            "agent_id": call.agent_id,
            "environment_id": call.environment_id,
            "tool_name": call.tool_name,
            "tool_use_id": call.tool_use_id,
            "tool_input": input,
        });
        if let Some(server) = call.mcp_server_name {
            payload["mcp_server_name"] = json!(server);
        }
        let answer = match secret {
            Ok(secret) => self.call(hook, secret, &payload).await,
            Err(why) => Err(why),
        };
        match answer {
            Ok(body) => match parse_pre(&body) {
                Ok(a) => HookVerdict {
                    hook_id: hook.id.clone(),
                    decision: a.decision,
                    reason: a.reason,
                    updated_input: a.updated_input.map(Value::Object),
                    failed: None,
                },
                Err(why) => failed(hook, why),
            },
            Err(why) => failed(hook, why),
        }
    }

    /// A stored hook's signing secret, opened with the server's key.
    fn secret_of(&self, rec: &HookRecord) -> Result<SigningSecret, String> {
        let cipher = self
            .cipher
            .as_ref()
            .map_err(|why| format!("no key: {why}"))?;
        cipher
            .open(&rec.sealed_secret, &rec.hook.id)
            .map_err(|e| format!("its secret could not be opened: {e}"))
            .and_then(|plain| {
                SigningSecret::parse(&String::from_utf8_lossy(&plain))
                    .map_err(|_| "its secret is damaged".to_string())
            })
    }

    /// POSTs `payload` signed with `secret`; the 2xx answer's body, or why not.
    async fn call(
        &self,
        hook: &Hook,
        secret: SigningSecret,
        payload: &Value,
    ) -> Result<String, String> {
        let body = serde_json::to_vec(payload).map_err(|e| e.to_string())?;
        let msg_id = new_id("msg");
        let answer = self
            .poster
            .post_reading(
                &hook.url,
                &msg_id,
                &body,
                &[secret],
                Duration::from_millis(hook.timeout_ms),
                ANSWER_LIMIT,
            )
            .await
            .map_err(|u| u.message)?;
        if !(200..300).contains(&answer.status) {
            return Err(format!("it answered HTTP {}", answer.status));
        }
        Ok(answer.body)
    }
}

/// A hook's answer body: empty is `allow`; otherwise a [`PreAnswer`].
fn parse_pre(body: &str) -> Result<PreAnswer, String> {
    if body.trim().is_empty() {
        return Ok(PreAnswer {
            decision: PreDecision::Allow,
            reason: None,
            updated_input: None,
        });
    }
    serde_json::from_str(body)
        .map_err(|e| format!("its answer is not a pre_tool_use decision: {e}"))
}

/// The verdict of a hook that did not answer usably: its failure mode, and why.
fn failed(hook: &Hook, why: String) -> HookVerdict {
    let (decision, mode) = match hook.failure_mode {
        FailureMode::Deny => (PreDecision::Deny, "denied"),
        FailureMode::Allow => (PreDecision::Allow, "allowed"),
    };
    HookVerdict {
        hook_id: hook.id.clone(),
        decision,
        reason: None,
        updated_input: None,
        failed: Some(format!(
            "hook {} failed ({why}), so the call is {mode} by its failure mode",
            hook.id
        )),
    }
}
