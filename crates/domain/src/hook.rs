//! Hooks (Mast's own addition, beyond the upstream API): an HTTP endpoint of the user's that
//! the loop asks, signed like a webhook, at fixed points of a session — before and after a
//! tool call, when a user message arrives, when a thread would stop, when a delegate starts —
//! so a rule holds every time instead of living in a prompt. Wire types, validation and the
//! matcher; what endpoints answer is in [`super::hook_answer`].

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::invalid::{Invalid, Valid, check_len};
use crate::type_tag;

type_tag!(
    /// `"type": "hook"`.
    HookTag = "hook"
);

/// The points of a session a hook can be asked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    /// Before a built-in or MCP tool call runs: allow, deny, ask, defer, or rewrite its input.
    PreToolUse,
    /// After a built-in or MCP tool call ran, before the model sees its result: replace or
    /// annotate the result (the stored original is kept).
    PostToolUse,
    /// When a `user.message` is sent: allow or block it (a block refuses the request).
    UserPromptSubmit,
    /// When the primary thread's model ends its turn by itself: allow, or block the stop
    /// with a reason the model is given to keep working.
    Stop,
    /// When a coordinator delegates (`send_to_agent`): allow, or block the delegation with a
    /// reason the coordinator's model sees.
    SubagentStart,
    /// When a delegate's model ends its turn by itself: like `stop`, for the delegate.
    SubagentStop,
}

impl HookEvent {
    /// Every event, in documentation order.
    pub const ALL: [HookEvent; 6] = [
        HookEvent::PreToolUse,
        HookEvent::PostToolUse,
        HookEvent::UserPromptSubmit,
        HookEvent::Stop,
        HookEvent::SubagentStart,
        HookEvent::SubagentStop,
    ];

    /// The wire word.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::PreToolUse => "pre_tool_use",
            HookEvent::PostToolUse => "post_tool_use",
            HookEvent::UserPromptSubmit => "user_prompt_submit",
            HookEvent::Stop => "stop",
            HookEvent::SubagentStart => "subagent_start",
            HookEvent::SubagentStop => "subagent_stop",
        }
    }

    /// The event named `word`.
    pub fn parse(word: &str) -> Option<HookEvent> {
        Self::ALL.into_iter().find(|e| e.as_str() == word)
    }

    /// Whether the event has a name a matcher is matched against: the tool's for tool
    /// events, the delegate's for delegate events.
    pub fn takes_matcher(self) -> bool {
        !matches!(self, HookEvent::UserPromptSubmit | HookEvent::Stop)
    }

    /// What a hook of this event does when it times out, errs or answers nonsense, unless
    /// configured otherwise. A guardrail that is down does not open, except at a stop: a
    /// stop hook that fails cannot tell the model how to go on, so keeping the thread
    /// working would only repeat the failure until the turn's request limit.
    pub fn default_failure_mode(self) -> FailureMode {
        match self {
            HookEvent::Stop | HookEvent::SubagentStop => FailureMode::Allow,
            _ => FailureMode::Deny,
        }
    }
}

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
    /// The strict outcome: the tool call is denied, its result withheld from the model, the
    /// message or delegation blocked, the stop refused (the default, but for `stop` and
    /// `subagent_stop`: see [`HookEvent::default_failure_mode`]).
    #[default]
    Deny,
    /// The session goes on as if the hook had allowed it.
    Allow,
}

/// A hook as responses show it. The signing secret is only in the creation response.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Hook {
    #[serde(rename = "type")]
    pub tag: HookTag,
    pub id: String,
    pub event: HookEvent,
    /// Which names it sees: tool names for `pre_tool_use` and `post_tool_use`, the
    /// delegate's name for `subagent_start` and `subagent_stop` — exact names (`bash`,
    /// `write|edit`), `*`, or a regular expression searched in the name (`^mcp__`). Null
    /// matches every one, and is the only value for the other events.
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
    /// One of `pre_tool_use`, `post_tool_use`, `user_prompt_submit`, `stop`,
    /// `subagent_start`, `subagent_stop` (read as text, so a wrong one gets a 400 listing them).
    #[schema(value_type = HookEvent)]
    pub event: String,
    #[serde(default)]
    pub matcher: Option<String>,
    /// Defaults to `{"type": "workspace"}`.
    #[serde(default)]
    pub scope: Option<HookScope>,
    pub url: String,
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// Defaults to `deny`, or `allow` for `stop` and `subagent_stop`.
    #[serde(default)]
    pub failure_mode: Option<FailureMode>,
}

impl HookCreate {
    /// Validates the body into a hook (without id, time or secret, which the caller sets).
    pub fn validate(self) -> Valid<Hook> {
        let Some(event) = HookEvent::parse(&self.event) else {
            let all: Vec<&str> = HookEvent::ALL.iter().map(|e| e.as_str()).collect();
            return Err(Invalid::new(format!(
                "`event` must be one of {}; got `{}`",
                all.join(", "),
                self.event
            )));
        };
        let matcher = self.matcher.filter(|m| !m.is_empty());
        if let Some(m) = &matcher {
            if !event.takes_matcher() {
                return Err(Invalid::new(format!(
                    "`matcher` does not apply to `{}` hooks, which see no tool or delegate name; leave it out",
                    event.as_str()
                )));
            }
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
            event,
            matcher,
            scope: self.scope.unwrap_or(HookScope::Workspace),
            url: self.url,
            timeout_ms,
            failure_mode: self
                .failure_mode
                .unwrap_or_else(|| event.default_failure_mode()),
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

    /// The hook's matcher, compiled (a stored one always parses).
    pub fn compiled_matcher(&self) -> Option<Matcher> {
        self.matcher.as_deref().and_then(|m| Matcher::parse(m).ok())
    }
}

/// Whether a hook with `matcher` (compiled) sees `name`, a tool's or a delegate's: no matcher
/// sees every name, and an event without a name (`None`) is seen by every hook of it.
pub fn sees_name(matcher: Option<&Matcher>, name: Option<&str>) -> bool {
    match (matcher, name) {
        (Some(m), Some(name)) => m.matches(name),
        _ => true,
    }
}

/// A matcher on tool or delegate names. A string made only of letters, digits, `_`, `-` and
/// `|` is a list of exact names (`bash`, `write|edit`); `*` matches everything; anything else
/// is a regular expression searched in the name (`^mcp__`, `^(read|glob)$`), anchored only
/// where it anchors itself. MCP tools are named `mcp__<server>__<tool>`.
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

    /// Whether `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        match self {
            Matcher::Any => true,
            Matcher::Names(n) => n.iter().any(|x| x == name),
            Matcher::Regex(r) => r.is_match(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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

    fn create(event: &str, matcher: Option<&str>, timeout_ms: Option<u64>) -> HookCreate {
        HookCreate {
            event: event.into(),
            matcher: matcher.map(str::to_string),
            scope: None,
            url: "https://example.com/h".into(),
            timeout_ms,
            failure_mode: None,
        }
    }

    #[test]
    fn every_event_is_accepted_with_its_default_failure_mode() {
        // (event, matcher allowed, default failure mode)
        let cases = [
            ("pre_tool_use", true, FailureMode::Deny),
            ("post_tool_use", true, FailureMode::Deny),
            ("user_prompt_submit", false, FailureMode::Deny),
            ("stop", false, FailureMode::Allow),
            ("subagent_start", true, FailureMode::Deny),
            ("subagent_stop", true, FailureMode::Allow),
        ];
        for (event, matcher_allowed, mode) in cases {
            let hook = create(event, None, None).validate().unwrap();
            assert_eq!(hook.event.as_str(), event);
            assert_eq!(hook.failure_mode, mode, "{event}");
            let with_matcher = create(event, Some("worker|bash"), None).validate();
            assert_eq!(with_matcher.is_ok(), matcher_allowed, "{event}");
            if let Err(e) = with_matcher {
                assert!(e.message.contains("does not apply"), "{}", e.message);
            }
        }
        // An empty matcher is no matcher, for every event.
        assert!(create("stop", Some(""), None).validate().is_ok());
    }

    #[test]
    fn unknown_events_and_bad_timeouts_are_refused() {
        let e = create("nope", None, None).validate().unwrap_err();
        assert!(e.message.contains("subagent_stop"), "{}", e.message);
        assert!(create("pre_tool_use", None, Some(10)).validate().is_err());
        assert!(
            create("pre_tool_use", None, Some(60_001))
                .validate()
                .is_err()
        );
    }

    #[test]
    fn names_are_matched_only_where_the_event_has_one() {
        let hook = create("subagent_start", Some("^rev"), None)
            .validate()
            .unwrap();
        let m = hook.compiled_matcher();
        assert!(sees_name(m.as_ref(), Some("reviewer")));
        assert!(!sees_name(m.as_ref(), Some("coder")));
        assert!(sees_name(m.as_ref(), None));
        assert!(sees_name(None, Some("coder")));
    }
}
