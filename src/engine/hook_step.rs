//! `pre_tool_use` hooks in the loop: after a model response and before its calls are
//! recorded, every built-in or MCP call is put to the hooks that match it (no transaction
//! is open while they answer), and their verdicts are folded into the permission decision
//! that [`super::model_step`] records and enforces.
//!
//! Durability: nothing about a call is recorded until its hooks have answered, so a crash
//! (or shutdown) while a hook call is outstanding loses the unrecorded response; the resumed
//! loop asks the model again and the hooks are asked again about what it calls.

use std::collections::{HashMap, VecDeque};

use serde_json::{Value, json};

use super::delegation::{LIST_AGENTS, SEND_TO_AGENT};
use super::hooks::{PreCall, PreOutcome};
use super::permissions::{self, Decision};
use super::turn::{Loop, RunError, Waited};
use crate::domain::hook::{Combined, HookVerdict, PolicyDecision, PreDecision, combine};
use crate::domain::ids::new_id;
use crate::domain::tools::Tool;
use crate::models::Block;

/// The ids a response's tool calls get (in block order) and what hooks said of each.
#[derive(Default)]
pub(super) struct PreHooks {
    pub ids: VecDeque<String>,
    pub outcomes: HashMap<String, PreOutcome>,
}

/// A permission decision after hooks: the decision to record and enforce, the input the
/// call runs with, and whether a hook deferred it to the client.
pub(super) struct Hooked {
    pub decision: Decision,
    pub input: Value,
    pub defer: bool,
}

impl Loop<'_> {
    /// Gives each tool call of `blocks` its event id and asks the matching `pre_tool_use`
    /// hooks about the built-in and MCP ones. Without configured hooks this costs one store
    /// read per response with calls.
    pub(super) async fn ask_pre_hooks(
        &self,
        blocks: &[Value],
        cut_short: bool,
    ) -> Result<PreHooks, RunError> {
        let mut pre = PreHooks::default();
        if cut_short {
            return Ok(pre);
        }
        let mut asks = Vec::new();
        for block in blocks {
            let Block::ToolUse { name, input } = Block::of(block) else {
                continue;
            };
            let id = new_id("sevt");
            pre.ids.push_back(id.clone());
            if let Some((tool_name, server)) = self.hooked_name(name) {
                let input = input.cloned().unwrap_or_else(|| json!({}));
                asks.push((id, tool_name, server, input));
            }
        }
        let Some(hooks) = self.inner.hooks.clone().filter(|_| !asks.is_empty()) else {
            return Ok(pre);
        };
        let (ws, env) = (self.workspace_id.clone(), self.environment_id.clone());
        let (sid, thread, agent) = (self.sid.clone(), self.thread.clone(), self.agent.id.clone());
        let work = async {
            let mut out = HashMap::new();
            for (id, tool_name, server, input) in &asks {
                let call = PreCall {
                    workspace_id: &ws,
                    session_id: &sid,
                    thread_id: &thread,
                    agent_id: &agent,
                    environment_id: &env,
                    tool_use_id: id,
                    tool_name,
                    mcp_server_name: server.as_deref(),
                    input,
                };
                out.insert(id.clone(), hooks.pre_tool_use(&call).await);
            }
            out
        };
        pre.outcomes = match self.interruptible(work).await? {
            Waited::Done(out) => out,
            // The interrupt is handled next; no call of this response may run unasked.
            Waited::Interrupted => asks
                .into_iter()
                .map(|(id, ..)| (id, interrupted()))
                .collect(),
        };
        Ok(pre)
    }

    /// The name hooks match a call of `name` on, and its MCP server: built-in tools by name,
    /// MCP tools as `mcp__<server>__<tool>`; None for calls hooks do not see (custom tools,
    /// which the client runs itself, and the delegation tools).
    fn hooked_name(&self, name: &str) -> Option<(String, Option<String>)> {
        let custom = self
            .agent
            .tools
            .iter()
            .any(|t| matches!(t, Tool::Custom(c) if c.name == name));
        if custom || (self.roster.is_some() && (name == LIST_AGENTS || name == SEND_TO_AGENT)) {
            return None;
        }
        if let Some(t) = self.mcp_offer.target(name) {
            return Some((
                format!("mcp__{}__{}", t.server, t.tool),
                Some(t.server.clone()),
            ));
        }
        permissions::is_builtin(&self.agent.tools, name).then(|| (name.to_string(), None))
    }
}

/// The verdict standing in for hooks that were not asked because of an interrupt.
fn interrupted() -> PreOutcome {
    PreOutcome {
        verdicts: vec![HookVerdict {
            hook_id: "*".into(),
            decision: PreDecision::Deny,
            reason: None,
            updated_input: None,
            failed: Some("the thread was interrupted while its hooks were being asked".into()),
        }],
        input: None,
    }
}

/// Folds hooks' verdicts into the policy's decision (see [`combine`]). `decide` is the
/// policy, applied to the input that would run: the hooks' rewrite when they allowed or
/// asked with `updated_input`, the model's own input when a hook deferred (a deferred call's
/// rewrite is dropped, and `evaluation.hooks` records it). The verdicts are recorded under
/// `evaluation.hooks` of the tool-use event; without verdicts nothing changes.
pub(super) fn apply(
    outcome: Option<PreOutcome>,
    input: Value,
    decide: impl Fn(&Value) -> Decision,
) -> Hooked {
    let Some(outcome) = outcome.filter(|o| !o.verdicts.is_empty()) else {
        let decision = decide(&input);
        return Hooked {
            decision,
            input,
            defer: false,
        };
    };
    let deferred = outcome
        .verdicts
        .iter()
        .map(|v| v.decision)
        .max()
        .is_some_and(|d| d == PreDecision::Defer);
    let input = match (deferred, outcome.input) {
        (false, Some(updated)) => updated,
        _ => input,
    };
    let policy = decide(&input);
    let policy_rank = match &policy {
        Decision::Allow { .. } => PolicyDecision::Allow,
        Decision::Ask { .. } => PolicyDecision::Ask,
        Decision::Deny { .. } => PolicyDecision::Deny,
    };
    let mut evaluation = policy.evaluation().cloned().unwrap_or_else(|| json!({}));
    evaluation["hooks"] = serde_json::to_value(&outcome.verdicts).unwrap_or_default();
    let dropped = deferred && outcome.verdicts.iter().any(|v| v.updated_input.is_some());
    if dropped {
        evaluation["hooks_updated_input_dropped"] = json!(true);
    }
    let (decision, defer) = match combine(policy_rank, &outcome.verdicts) {
        Combined::Policy(_) => (with_evaluation(policy, evaluation), false),
        Combined::Hook { decision, reason } => match decision {
            PreDecision::Deny => (
                Decision::Deny {
                    evaluation: Some(evaluation),
                    reason: format!("a hook denied it: {reason}"),
                },
                false,
            ),
            PreDecision::Defer => {
                evaluation["hook_decision"] = json!("defer");
                (Decision::Ask { evaluation }, true)
            }
            // Allow never outranks the policy, so only ask is left.
            PreDecision::Ask | PreDecision::Allow => {
                evaluation["hook_decision"] = json!("ask");
                (Decision::Ask { evaluation }, false)
            }
        },
    };
    Hooked {
        decision,
        input,
        defer,
    }
}

/// `decision` with `evaluation` in place of its own.
fn with_evaluation(decision: Decision, evaluation: Value) -> Decision {
    match decision {
        Decision::Allow { .. } => Decision::Allow { evaluation },
        Decision::Ask { .. } => Decision::Ask { evaluation },
        Decision::Deny { reason, .. } => Decision::Deny {
            evaluation: Some(evaluation),
            reason,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(d: PreDecision, updated: Option<Value>) -> HookVerdict {
        HookVerdict {
            hook_id: "hook_1".into(),
            decision: d,
            reason: Some("use read instead".into()),
            updated_input: updated,
            failed: None,
        }
    }

    fn allow_all(_: &Value) -> Decision {
        Decision::Allow {
            evaluation: json!({"type": "always_allow"}),
        }
    }

    #[test]
    fn no_verdicts_leave_the_policy_alone() {
        let h = apply(None, json!({"command": "ls"}), allow_all);
        assert_eq!(h.decision, allow_all(&json!({})));
        assert!(!h.defer);
    }

    #[test]
    fn a_deny_holds_under_always_allow_and_carries_the_reason() {
        let o = PreOutcome {
            verdicts: vec![verdict(PreDecision::Deny, None)],
            input: None,
        };
        let h = apply(Some(o), json!({}), allow_all);
        let Decision::Deny { reason, evaluation } = h.decision else {
            panic!("not denied")
        };
        assert_eq!(reason, "a hook denied it: use read instead");
        let ev = evaluation.unwrap();
        assert_eq!(ev["type"], "always_allow");
        assert_eq!(ev["hooks"][0]["decision"], "deny");
    }

    #[test]
    fn the_policy_judges_the_rewritten_input() {
        let o = PreOutcome {
            verdicts: vec![verdict(
                PreDecision::Allow,
                Some(json!({"command": "rm -rf /"})),
            )],
            input: Some(json!({"command": "rm -rf /"})),
        };
        let deny_rm = |i: &Value| {
            if i["command"] == "rm -rf /" {
                Decision::Deny {
                    evaluation: Some(json!({"type": "auto"})),
                    reason: "high risk".into(),
                }
            } else {
                allow_all(i)
            }
        };
        let h = apply(Some(o), json!({"command": "ls"}), deny_rm);
        assert!(matches!(h.decision, Decision::Deny { ref reason, .. } if reason == "high risk"));
    }

    #[test]
    fn defer_drops_the_rewrite_and_says_so() {
        let o = PreOutcome {
            verdicts: vec![
                verdict(PreDecision::Allow, Some(json!({"command": "pwd"}))),
                verdict(PreDecision::Defer, None),
            ],
            input: Some(json!({"command": "pwd"})),
        };
        let h = apply(Some(o), json!({"command": "ls"}), allow_all);
        assert!(h.defer);
        assert_eq!(h.input, json!({"command": "ls"}));
        let ev = h.decision.evaluation().unwrap();
        assert_eq!(ev["hooks_updated_input_dropped"], true);
        assert_eq!(ev["hook_decision"], "defer");
        assert_eq!(h.decision.label(), "ask");
    }
}
