//! Hooks (Mast's own addition, beyond the upstream API): an HTTP endpoint of the user's that
//! the loop asks, signed like a webhook, before a tool call runs (`pre_tool_use`), so a rule
//! holds every time instead of living in a prompt. Wire types, validation, the tool-name
//! matcher and the pure function that combines hooks' answers with the permission policy.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::invalid::{Invalid, Valid, check_len};
use crate::type_tag;

type_tag!(
    /// `"type": "hook"`.
    HookTag = "hook"
);

/// Events a hook can be configured for. Only those in [`BUILT_EVENTS`] are accepted today;
/// the rest are refused with a 400 naming them, never stored and ignored.
pub const EVENTS: &[&str] = &[
    PRE_TOOL_USE,
    "post_tool_use",
    "user_prompt_submit",
    "stop",
    "subagent_start",
    "subagent_stop",
];

/// The event asked before a built-in or MCP tool call runs.
pub const PRE_TOOL_USE: &str = "pre_tool_use";

/// The events this server calls hooks for.
pub const BUILT_EVENTS: &[&str] = &[PRE_TOOL_USE];

/// Shortest and longest per-call timeout, and the default, in milliseconds.
pub const TIMEOUT_MS: (u64, u64, u64) = (100, 60_000, 5_000);

/// Which sessions a hook applies to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum HookScope {
    /// Every session of the workspace.
    Workspace,
    /// Threads running this agent (a delegate's own agent id counts for its thread).
    Agent { agent_id: String },
    /// Sessions in this environment.
    Environment { environment_id: String },
}

/// What a call fails to when the endpoint times out, errs or answers nonsense.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum FailureMode {
    /// The call is denied (the default: a guardrail that is down does not open).
    #[default]
    Deny,
    /// The call goes on as if the hook had allowed it.
    Allow,
}

/// A hook as responses show it. The signing secret is only in the creation response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Hook {
    #[serde(rename = "type")]
    pub tag: HookTag,
    pub id: String,
    /// `pre_tool_use` (see [`EVENTS`]).
    pub event: String,
    /// Which tool names it sees (see [`Matcher`]); null matches every tool.
    pub matcher: Option<String>,
    pub scope: HookScope,
    /// The http(s) endpoint the signed call is POSTed to.
    pub url: String,
    /// How long one call may take before the failure mode applies.
    pub timeout_ms: u64,
    pub failure_mode: FailureMode,
    pub created_at: String,
    /// `whsec_…`, present only in the response that created the hook.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signing_secret: Option<String>,
}

/// `POST /v1/mast/hooks` body. Unknown keys are refused.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "a hook object")]
pub struct HookCreate {
    pub event: String,
    #[serde(default)]
    pub matcher: Option<String>,
    /// Defaults to `{"type": "workspace"}`.
    #[serde(default)]
    pub scope: Option<HookScope>,
    pub url: String,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    #[serde(default)]
    pub failure_mode: Option<FailureMode>,
}

impl HookCreate {
    /// Validates the body into a hook (without id, time or secret, which the caller sets).
    pub fn validate(self) -> Valid<Hook> {
        if !EVENTS.contains(&self.event.as_str()) {
            return Err(Invalid::new(format!(
                "`event` must be one of {}; got `{}`",
                EVENTS.join(", "),
                self.event
            )));
        }
        if !BUILT_EVENTS.contains(&self.event.as_str()) {
            return Err(Invalid::new(format!(
                "hooks for `{}` are not supported by this server yet (supported: {})",
                self.event,
                BUILT_EVENTS.join(", ")
            )));
        }
        if let Some(m) = &self.matcher {
            Matcher::parse(m)?;
        }
        match &self.scope {
            Some(HookScope::Agent { agent_id: id })
            | Some(HookScope::Environment { environment_id: id }) => {
                check_len("scope id", id, 1, 255)?
            }
            _ => {}
        }
        check_len("url", &self.url, 1, 2048)?;
        let (lo, hi, default) = TIMEOUT_MS;
        let timeout_ms = self.timeout_ms.unwrap_or(default);
        if !(lo..=hi).contains(&timeout_ms) {
            return Err(Invalid::new(format!(
                "`timeout_ms` must be from {lo} to {hi}; got {timeout_ms}"
            )));
        }
        Ok(Hook {
            tag: HookTag::Tag,
            id: String::new(),
            event: self.event,
            matcher: self.matcher.filter(|m| !m.is_empty()),
            scope: self.scope.unwrap_or(HookScope::Workspace),
            url: self.url,
            timeout_ms,
            failure_mode: self.failure_mode.unwrap_or_default(),
            created_at: String::new(),
            signing_secret: None,
        })
    }
}

impl Hook {
    /// Whether the hook applies to a thread running `agent_id` in `environment_id`.
    pub fn in_scope(&self, agent_id: &str, environment_id: &str) -> bool {
        match &self.scope {
            HookScope::Workspace => true,
            HookScope::Agent { agent_id: a } => a == agent_id,
            HookScope::Environment { environment_id: e } => e == environment_id,
        }
    }

    /// Whether the hook sees a call of tool `name` (a stored matcher always parses).
    pub fn matches_tool(&self, name: &str) -> bool {
        match &self.matcher {
            None => true,
            Some(m) => Matcher::parse(m).is_ok_and(|m| m.matches(name)),
        }
    }
}

/// A matcher on tool names. A string made only of letters, digits, `_`, `-` and `|` is a
/// list of exact names (`bash`, `write|edit`); `*` matches everything; anything else is a
/// regular expression searched in the name (`^mcp__`, `^(read|glob)$`), anchored only where
/// it anchors itself. MCP tools are named `mcp__<server>__<tool>`.
#[derive(Debug)]
pub enum Matcher {
    Any,
    Names(Vec<String>),
    Regex(Box<regex_automata::meta::Regex>),
}

impl Matcher {
    /// Parses a matcher; a bad regular expression is a 400.
    pub fn parse(text: &str) -> Valid<Matcher> {
        check_len("matcher", text, 0, 512)?;
        if text.is_empty() || text == "*" {
            return Ok(Matcher::Any);
        }
        let plain = text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '|'));
        if plain {
            let names: Vec<String> = text.split('|').map(str::to_string).collect();
            if names.iter().any(String::is_empty) {
                return Err(Invalid::new(format!(
                    "`matcher` `{text}` has an empty name between `|`"
                )));
            }
            return Ok(Matcher::Names(names));
        }
        regex_automata::meta::Regex::new(text)
            .map(|r| Matcher::Regex(Box::new(r)))
            .map_err(|e| {
                Invalid::new(format!(
                    "`matcher` `{text}` is not a valid regular expression: {e}"
                ))
            })
    }

    /// Whether tool `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Matcher::Any => true,
            Matcher::Names(n) => n.iter().any(|x| x == name),
            Matcher::Regex(r) => r.is_match(name),
        }
    }
}

/// A `pre_tool_use` decision, ordered by precedence (a later variant wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PreDecision {
    Allow,
    Ask,
    Defer,
    Deny,
}

impl PreDecision {
    /// The wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            PreDecision::Allow => "allow",
            PreDecision::Ask => "ask",
            PreDecision::Defer => "defer",
            PreDecision::Deny => "deny",
        }
    }
}

/// What a hook endpoint answers to `pre_tool_use` (a 2xx with an empty body is `allow`).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PreAnswer {
    pub decision: PreDecision,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub updated_input: Option<serde_json::Map<String, Value>>,
}

/// One hook's part in a call's decision, as the `agent.tool_use` event records it under
/// `evaluation.hooks`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct HookVerdict {
    pub hook_id: String,
    pub decision: PreDecision,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The input this hook asked to run instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_input: Option<Value>,
    /// Set when the hook did not answer usably: why; `decision` is then its failure mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// The permission policy's decision, reduced to what combining needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PolicyDecision {
    Allow,
    Ask,
    Deny,
}

/// Who decided a combined result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Combined {
    /// The policy's decision stands (hooks allowed or asked no more than it did).
    Policy(PolicyDecision),
    /// A hook made it stricter: ask, defer, or deny with the hook's reason.
    Hook {
        decision: PreDecision,
        reason: String,
    },
}

/// Combines the policy's decision with the hooks' verdicts: deny > defer > ask > allow. A
/// hook's `allow` never loosens the policy (its ask or deny stands); a hook's `deny` holds
/// even under `always_allow`. The first hook (in the order given) with the winning decision
/// supplies the reason.
pub fn combine(policy: PolicyDecision, hooks: &[HookVerdict]) -> Combined {
    let policy_rank = match policy {
        PolicyDecision::Allow => PreDecision::Allow,
        PolicyDecision::Ask => PreDecision::Ask,
        PolicyDecision::Deny => PreDecision::Deny,
    };
    let strictest = hooks.iter().map(|h| h.decision).max();
    match strictest {
        Some(d) if d > policy_rank => {
            let h = hooks
                .iter()
                .find(|h| h.decision == d)
                .expect("the max is present");
            let reason = h
                .failed
                .clone()
                .or_else(|| h.reason.clone())
                .unwrap_or_else(|| format!("hook {} decided {}", h.hook_id, d.as_str()));
            Combined::Hook {
                decision: d,
                reason,
            }
        }
        _ => Combined::Policy(policy),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use PolicyDecision as P;
    use PreDecision as D;

    fn v(d: PreDecision) -> HookVerdict {
        HookVerdict {
            hook_id: format!("hook_{}", d.as_str()),
            decision: d,
            reason: Some(format!("because {}", d.as_str())),
            updated_input: None,
            failed: None,
        }
    }

    fn decided(policy: PolicyDecision, hooks: &[PreDecision]) -> String {
        let vs: Vec<_> = hooks.iter().map(|d| v(*d)).collect();
        match combine(policy, &vs) {
            Combined::Policy(P::Allow) => "policy allow".into(),
            Combined::Policy(P::Ask) => "policy ask".into(),
            Combined::Policy(P::Deny) => "policy deny".into(),
            Combined::Hook { decision, reason } => format!("hook {} ({reason})", decision.as_str()),
        }
    }

    #[test]
    fn precedence_table() {
        let cases: &[(PolicyDecision, &[PreDecision], &str)] = &[
            (P::Allow, &[], "policy allow"),
            (P::Allow, &[D::Allow], "policy allow"),
            (P::Allow, &[D::Ask], "hook ask (because ask)"),
            (P::Allow, &[D::Defer], "hook defer (because defer)"),
            // a hook's deny holds under always_allow
            (P::Allow, &[D::Deny], "hook deny (because deny)"),
            // a hook's allow never skips the policy's ask or deny
            (P::Ask, &[D::Allow], "policy ask"),
            (P::Deny, &[D::Allow], "policy deny"),
            (P::Ask, &[D::Ask], "policy ask"),
            (P::Ask, &[D::Defer], "hook defer (because defer)"),
            (P::Deny, &[D::Defer, D::Ask], "policy deny"),
            // deny > defer > ask > allow across hooks, whatever their order
            (
                P::Allow,
                &[D::Allow, D::Ask, D::Defer],
                "hook defer (because defer)",
            ),
            (
                P::Allow,
                &[D::Deny, D::Allow, D::Defer],
                "hook deny (because deny)",
            ),
            (P::Allow, &[D::Ask, D::Allow], "hook ask (because ask)"),
            (P::Ask, &[D::Allow, D::Deny], "hook deny (because deny)"),
        ];
        for (policy, hooks, want) in cases {
            assert_eq!(&decided(*policy, hooks), want, "{policy:?} + {hooks:?}");
        }
    }

    #[test]
    fn a_failed_hook_gives_its_failure_as_the_reason() {
        let mut h = v(D::Deny);
        h.failed = Some("hook hook_x did not answer: timed out".into());
        assert_eq!(
            combine(P::Allow, &[h]),
            Combined::Hook {
                decision: D::Deny,
                reason: "hook hook_x did not answer: timed out".into()
            }
        );
    }

    #[test]
    fn matchers_are_exact_lists_or_searched_regexes() {
        let m = |s: &str| Matcher::parse(s).unwrap();
        assert!(m("bash").matches("bash"));
        assert!(!m("bash").matches("bash2"));
        assert!(m("write|edit").matches("edit"));
        assert!(!m("write|edit").matches("read"));
        assert!(m("^mcp__").matches("mcp__github__create_issue"));
        assert!(!m("^mcp__").matches("bash"));
        assert!(m("^(read|glob)$").matches("glob"));
        assert!(m("*").matches("anything"));
        assert!(Matcher::parse("a||b").is_err());
        assert!(Matcher::parse("(unclosed").is_err());
    }

    #[test]
    fn unbuilt_events_and_bad_timeouts_are_refused() {
        let create = |event: &str, timeout_ms: Option<u64>| HookCreate {
            event: event.into(),
            matcher: None,
            scope: None,
            url: "https://example.com/h".into(),
            timeout_ms,
            failure_mode: None,
        };
        assert!(create("pre_tool_use", None).validate().is_ok());
        let e = create("stop", None).validate().unwrap_err();
        assert!(e.message.contains("not supported"), "{}", e.message);
        assert!(create("nope", None).validate().is_err());
        assert!(create("pre_tool_use", Some(10)).validate().is_err());
        assert!(create("pre_tool_use", Some(60_001)).validate().is_err());
    }
}
