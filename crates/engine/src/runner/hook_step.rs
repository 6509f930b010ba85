//! `pre_tool_use` and `subagent_start` hooks in the loop: after a model response and before
//! its calls are recorded, every built-in or MCP call is put to the `pre_tool_use` hooks that
//! match it, and every delegation (`send_to_agent`) to the `subagent_start` hooks (no
//! transaction is open while they answer). Their verdicts are folded into the permission
//! decision (or the delegation) that [`super::model_step`] records and enforces.
//!
//! Durability: nothing about a call is recorded until its hooks have answered, so a crash
//! (or shutdown) while a hook call is outstanding loses the unrecorded response; the resumed
//! loop asks the model again and the hooks are asked again about what it calls.

use std::collections::{HashMap, VecDeque};

use serde_json::{Value, json};

use super::{Loop, RunError, Waited, store_err};
use crate::delegation::{self, LIST_AGENTS, SEND_TO_AGENT, Target};
use crate::hooks::{HookContext, PreOutcome, ToolCallRef};
use crate::permissions::{self, Decision};
use crate::state::EngineState;
use mast_domain::hook::HookEvent;
use mast_domain::hook_answer::{
    Combined, GateDecision, GateOutcome, GateVerdict, HookVerdict, PolicyDecision, PreDecision,
    combine,
};
use mast_domain::ids::new_id;
use mast_domain::multiagent::ADVISOR_NAME;
use mast_domain::tools::Tool;
use mast_models::Block;

/// The ids a response's tool calls get (in block order), what `pre_tool_use` hooks said of
/// each built-in or MCP call, and what `subagent_start` hooks said of each delegation.
#[derive(Default)]
pub(super) struct PreHooks {
    pub ids: VecDeque<String>,
    pub outcomes: HashMap<String, PreOutcome>,
    pub delegations: HashMap<String, GateOutcome>,
}

/// What hooks said of one call: `pre_tool_use` of a built-in or MCP call, `subagent_start`
/// of a delegation.
pub(super) struct CallHooks {
    pub pre: Option<PreOutcome>,
    pub delegation: Option<GateOutcome>,
}

impl PreHooks {
    /// What hooks said of call `id`.
    pub fn take(&mut self, id: &str) -> CallHooks {
        CallHooks {
            pre: self.outcomes.remove(id),
            delegation: self.delegations.remove(id),
        }
    }
}

/// A permission decision after hooks: the decision to record and enforce, the input the
/// call runs with, and whether a hook deferred it to the client.
pub(super) struct Hooked {
    pub decision: Decision,
    pub input: Value,
    pub defer: bool,
}

/// A call a hook is asked about before it is recorded.
enum Ask {
    Tool {
        id: String,
        name: String,
        server: Option<String>,
        input: Value,
    },
    Delegation {
        id: String,
        name: String,
        fields: Value,
    },
}

impl Loop<'_> {
    /// Where this thread's hooks are asked.
    pub(super) fn hook_ctx(&self) -> HookContext<'_> {
        HookContext {
            workspace_id: &self.scope.workspace_id,
            session_id: &self.scope.sid,
            thread_id: &self.scope.thread,
            agent_id: &self.scope.agent.id,
            scope_agent_id: crate::delegation::governing_agent(
                &self.scope.agent.id,
                &self.scope.body.agent.id,
            ),
            environment_id: &self.scope.environment_id,
        }
    }

    /// Gives each tool call of `blocks` its event id and asks the matching `pre_tool_use`
    /// hooks about the built-in and MCP ones, and the `subagent_start` hooks about each
    /// delegation. Without hooks of those events this reads nothing (their lists are cached)
    /// and copies no input.
    pub(super) async fn ask_pre_hooks(
        &self,
        blocks: &[Value],
        cut_short: bool,
    ) -> Result<PreHooks, RunError> {
        let mut pre = PreHooks::default();
        if cut_short {
            return Ok(pre);
        }
        let calls: Vec<(&str, Option<&Value>)> = blocks
            .iter()
            .filter_map(|b| match Block::of(b) {
                Block::ToolUse { name, input } => Some((name, input)),
                _ => None,
            })
            .collect();
        pre.ids = calls.iter().map(|_| new_id("sevt")).collect();
        let Some(hooks) = self.inner.hooks.clone().filter(|_| !calls.is_empty()) else {
            return Ok(pre);
        };
        let ws = &self.scope.workspace_id;
        let delegating = self.scope.roster.is_some();
        let tools = self.hold(hooks.any(ws, HookEvent::PreToolUse)).await?;
        let delegations = delegating
            && calls.iter().any(|(n, _)| *n == SEND_TO_AGENT)
            && self.hold(hooks.any(ws, HookEvent::SubagentStart)).await?;
        if !tools && !delegations {
            return Ok(pre);
        }
        let input_of = |input: Option<&Value>| input.cloned().unwrap_or_else(|| json!({}));
        let mut asks = Vec::new();
        for ((name, input), id) in calls.iter().zip(&pre.ids) {
            if delegating && *name == SEND_TO_AGENT {
                if delegations {
                    asks.push(Ask::Delegation {
                        id: id.clone(),
                        name: String::new(),
                        fields: input_of(*input),
                    });
                }
            } else if tools && let Some((tool_name, server)) = self.hooked_name(name) {
                asks.push(Ask::Tool {
                    id: id.clone(),
                    name: tool_name,
                    server,
                    input: input_of(*input),
                });
            }
        }
        if delegations {
            asks = self.describe_delegations(asks).await?;
        }
        let ctx = self.hook_ctx();
        let work = async {
            let mut tools_out = HashMap::new();
            let mut delegations_out = HashMap::new();
            for ask in &asks {
                match ask {
                    Ask::Tool {
                        id,
                        name,
                        server,
                        input,
                    } => {
                        let call = ToolCallRef {
                            tool_use_id: id,
                            tool_name: name,
                            mcp_server_name: server.as_deref(),
                            input,
                        };
                        tools_out.insert(id.clone(), hooks.pre_tool_use(&ctx, &call).await?);
                    }
                    // A delegation naming no one it can go to is refused anyway.
                    Ask::Delegation { name, .. } if name.is_empty() => {}
                    Ask::Delegation { id, name, fields } => {
                        let event = HookEvent::SubagentStart;
                        let outcome = hooks.gate(&ctx, event, Some(name), fields.clone()).await?;
                        delegations_out.insert(id.clone(), outcome);
                    }
                }
            }
            Ok::<_, mast_store::StoreError>((tools_out, delegations_out))
        };
        match self.interruptible(work).await? {
            Waited::Done(done) => {
                let (tools_out, delegations_out) = done.map_err(store_err)?;
                pre.outcomes = tools_out;
                pre.delegations = delegations_out;
            }
            // The interrupt is handled next; no call of this response may run unasked.
            Waited::Interrupted => {
                for ask in asks {
                    match ask {
                        Ask::Tool { id, .. } => {
                            pre.outcomes.insert(id, interrupted());
                        }
                        Ask::Delegation { id, .. } => {
                            pre.delegations.insert(id, interrupted_gate());
                        }
                    }
                }
            }
        }
        Ok(pre)
    }

    /// Fills in each delegation's delegate name and the `subagent_start` payload fields
    /// (the delegation's own input stood in for them). A call that names no one the
    /// coordinator can delegate to is left nameless: it is refused when it is sorted, and
    /// no hook is asked about it. A thread continued by id is looked up in the session.
    async fn describe_delegations(&self, asks: Vec<Ask>) -> Result<Vec<Ask>, RunError> {
        let Some(roster) = &self.scope.roster else {
            return Ok(asks);
        };
        let models = self.inner.models.clone();
        let routable = move |m: &str| models.check_routable(m);
        let mut state: Option<EngineState> = None;
        let mut out = Vec::with_capacity(asks.len());
        for ask in asks {
            let Ask::Delegation { id, fields, .. } = ask else {
                out.push(ask);
                continue;
            };
            let Ok(send) =
                delegation::parse_send(&id, &fields, roster, &self.scope.agent, &routable)
            else {
                out.push(Ask::Delegation {
                    id,
                    name: String::new(),
                    fields,
                });
                continue;
            };
            let (name, agent_id) = match &send.target {
                Target::Agent(Some(a)) => (a.name.clone(), Some(a.snapshot.id.clone())),
                Target::Inline { agent, .. } => (agent.name.clone(), None),
                Target::Advisor(_) => (ADVISOR_NAME.to_string(), None),
                Target::Agent(None) => {
                    if state.is_none() {
                        let rec = self
                            .hold(self.inner.store.get_session_by_id(&self.scope.sid))
                            .await?
                            .ok_or(RunError::Gone)?;
                        state = Some(EngineState::of(&rec)?);
                    }
                    let thread = send.thread_id.as_deref().unwrap_or_default();
                    let name = state
                        .as_ref()
                        .and_then(|st| st.threads.get(thread))
                        .map(|t| t.agent_name.clone())
                        .unwrap_or_default();
                    let agent_id = roster
                        .agents
                        .iter()
                        .find(|a| a.name == name)
                        .map(|a| a.snapshot.id.clone());
                    (name, agent_id)
                }
            };
            let fields = json!({
                "tool_use_id": id,
                "subagent_name": name,
                "subagent_agent_id": agent_id,
                "subagent_thread_id": send.thread_id,
                "message": send.message,
            });
            out.push(Ask::Delegation { id, name, fields });
        }
        Ok(out)
    }

    /// The name hooks match a call of `name` on, and its MCP server: built-in tools by name,
    /// MCP tools as `mcp__<server>__<tool>`; None for calls tool hooks do not see (custom
    /// tools, which the client runs itself, and the delegation tools).
    pub(super) fn hooked_name(&self, name: &str) -> Option<(String, Option<String>)> {
        let custom = self
            .scope
            .agent
            .tools
            .iter()
            .any(|t| matches!(t, Tool::Custom(c) if c.name == name));
        if custom || (self.scope.roster.is_some() && (name == LIST_AGENTS || name == SEND_TO_AGENT))
        {
            return None;
        }
        // Only calls a policy will judge: a disabled or undeclared tool is refused first.
        if let Some(t) = self.kit.mcp_offer.target(name) {
            let enabled = crate::mcp::tool_config(&self.scope.agent.tools, &t.server, &t.tool)
                .is_some_and(|(enabled, _)| enabled);
            return enabled.then(|| {
                (
                    format!("mcp__{}__{}", t.server, t.tool),
                    Some(t.server.clone()),
                )
            });
        }
        let enabled = self
            .scope
            .agent
            .tools
            .iter()
            .find_map(|t| t.builtin_config(name))
            .is_some_and(|(enabled, _)| enabled);
        (enabled && permissions::is_builtin(&self.scope.agent.tools, name))
            .then(|| (name.to_string(), None))
    }
}

/// The gate verdict standing in for `subagent_start` hooks not asked because of an
/// interrupt: the delegation does not start.
fn interrupted_gate() -> GateOutcome {
    let mut o = GateOutcome::default();
    o.push(GateVerdict {
        hook_id: "*".into(),
        event: HookEvent::SubagentStart,
        decision: GateDecision::Block,
        reason: None,
        failed: Some("the thread was interrupted while its hooks were being asked".into()),
    });
    o
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

/// Folds hooks' verdicts into the policy's decision (see [`combine`]); `can_defer` says
/// whether a client may answer the call with `user.tool_result` (else a defer asks the user). `decide` is the
/// policy, applied to the input that would run: the hooks' rewrite when they allowed or
/// asked with `updated_input`, the model's own input when a hook deferred (a deferred call's
/// rewrite is dropped, and `evaluation.hooks` records it). The verdicts are recorded under
/// `evaluation.hooks` of the tool-use event; without verdicts nothing changes.
pub(super) fn apply(
    outcome: Option<PreOutcome>,
    input: Value,
    can_defer: bool,
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
    // Refused before any policy applied (the tool is disabled or not declared): nothing a
    // hook says changes that, and an `evaluation` without a policy `type` is no SDK shape.
    let Some(evaluation) = policy.evaluation().cloned() else {
        return Hooked {
            decision: policy,
            input,
            defer: false,
        };
    };
    let mut evaluation = evaluation;
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
            PreDecision::Defer if can_defer => {
                evaluation["hook_decision"] = json!("defer");
                (Decision::Ask { evaluation }, true)
            }
            // Nobody but the user can answer this call (an MCP call, or a self-hosted call
            // whose client is the worker): the defer asks the user, and the event says so.
            PreDecision::Defer => {
                evaluation["hook_decision"] = json!("ask");
                evaluation["hook_defer_asked_instead"] = json!(true);
                (Decision::Ask { evaluation }, false)
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
        let h = apply(None, json!({"command": "ls"}), true, allow_all);
        assert_eq!(h.decision, allow_all(&json!({})));
        assert!(!h.defer);
    }

    #[test]
    fn a_deny_holds_under_always_allow_and_carries_the_reason() {
        let o = PreOutcome {
            verdicts: vec![verdict(PreDecision::Deny, None)],
            input: None,
        };
        let h = apply(Some(o), json!({}), true, allow_all);
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
        let h = apply(Some(o), json!({"command": "ls"}), true, deny_rm);
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
        let h = apply(Some(o), json!({"command": "ls"}), true, allow_all);
        assert!(h.defer);
        assert_eq!(h.input, json!({"command": "ls"}));
        let ev = h.decision.evaluation().unwrap();
        assert_eq!(ev["hooks_updated_input_dropped"], true);
        assert_eq!(ev["hook_decision"], "defer");
        assert_eq!(h.decision.label(), "ask");
    }

    #[test]
    fn a_defer_nobody_but_the_user_can_answer_asks_and_says_so() {
        let o = PreOutcome {
            verdicts: vec![verdict(PreDecision::Defer, None)],
            input: None,
        };
        let h = apply(Some(o), json!({"command": "ls"}), false, allow_all);
        assert!(!h.defer, "a confirmation, not a client result");
        let ev = h.decision.evaluation().unwrap();
        assert_eq!(ev["hook_decision"], "ask");
        assert_eq!(ev["hook_defer_asked_instead"], true);
        assert_eq!(h.decision.label(), "ask");
    }

    #[test]
    fn hooks_say_nothing_of_a_call_refused_before_any_policy() {
        let o = PreOutcome {
            verdicts: vec![verdict(PreDecision::Allow, None)],
            input: None,
        };
        let disabled = |_: &Value| Decision::Deny {
            evaluation: None,
            reason: "the `bash` tool is disabled for this agent".into(),
        };
        let h = apply(Some(o), json!({}), true, disabled);
        assert!(
            h.decision.evaluation().is_none(),
            "no evaluation without a policy type"
        );
    }
}
