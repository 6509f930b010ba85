//! What hook endpoints answer (see [`super::hook`]), how each answer is read, and the pure
//! rules that turn several hooks' verdicts into one outcome: the permission precedence of
//! `pre_tool_use`, the result the model sees after `post_tool_use`, and the gates
//! (`user_prompt_submit`, `stop`, `subagent_start`, `subagent_stop`).
//!
//! An empty 2xx body is always the permissive answer. Unknown keys are refused, so an answer
//! meant for another event (or a typo) fails the hook, and its failure mode applies, rather
//! than being half understood.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::content::Place;
use super::hook::HookEvent;

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

/// Reads a `pre_tool_use` answer body.
pub fn parse_pre(body: &str) -> Result<PreAnswer, String> {
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

/// A gate's decision (`user_prompt_submit`, `stop`, `subagent_start`, `subagent_stop`):
/// let it happen, or block it (the message is refused, the stop is refused and the thread
/// keeps working, the delegation is refused).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateDecision {
    Allow,
    Block,
}

/// What a gate hook answers (a 2xx with an empty body is `allow`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GateAnswer {
    pub decision: GateDecision,
    /// Why it blocked: refused requests quote it, and a blocked stop gives it to the model
    /// as what to do next (so it is required there).
    #[serde(default)]
    pub reason: Option<String>,
}

/// Reads a gate hook's answer body for `event`.
pub fn parse_gate(event: HookEvent, body: &str) -> Result<GateAnswer, String> {
    if body.trim().is_empty() {
        return Ok(GateAnswer {
            decision: GateDecision::Allow,
            reason: None,
        });
    }
    let answer: GateAnswer = serde_json::from_str(body)
        .map_err(|e| format!("its answer is not a {} decision: {e}", event.as_str()))?;
    let stop = matches!(event, HookEvent::Stop | HookEvent::SubagentStop);
    let reasonless = answer.reason.as_deref().is_none_or(|r| r.trim().is_empty());
    if stop && answer.decision == GateDecision::Block && reasonless {
        return Err(format!(
            "its {} answer blocks without a `reason`, which the model needs to go on",
            event.as_str()
        ));
    }
    Ok(answer)
}

/// One hook's part in a gate, as the event it concerns records it under `hooks`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GateVerdict {
    pub hook_id: String,
    pub event: HookEvent,
    pub decision: GateDecision,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Set when the hook did not answer usably: why; `decision` is then its failure mode.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// The verdicts of one gate, in the order asked (a block ends the asking), and the block,
/// if any: the blocking hook and its reason (or its failure).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct GateOutcome {
    pub verdicts: Vec<GateVerdict>,
    pub blocked: Option<(String, String)>,
}

impl GateOutcome {
    /// Adds one verdict; a block becomes the outcome's block.
    pub fn push(&mut self, v: GateVerdict) {
        if v.decision == GateDecision::Block && self.blocked.is_none() {
            let reason = v
                .failed
                .clone()
                .or_else(|| v.reason.clone().filter(|r| !r.trim().is_empty()))
                .unwrap_or_else(|| format!("hook {} blocked it", v.hook_id));
            self.blocked = Some((v.hook_id.clone(), reason));
        }
        self.verdicts.push(v);
    }

    /// The verdicts as recorded on an event, or None when no hook was asked.
    pub fn recorded(&self) -> Option<Value> {
        (!self.verdicts.is_empty())
            .then(|| serde_json::to_value(&self.verdicts).unwrap_or_default())
    }
}

/// What a `post_tool_use` hook answers (a 2xx with an empty body leaves the result alone).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PostAnswer {
    /// The result the model sees instead: a string, or an array of content blocks of a tool
    /// result (text, image, document, search_result), checked as a client's are.
    #[serde(default)]
    pub updated_result: Option<Value>,
    /// Text the model sees after the result.
    #[serde(default)]
    pub additional_context: Option<String>,
}

/// Largest `additional_context`, in bytes.
const MAX_CONTEXT: usize = 64 * 1024;

/// Most blocks of an `updated_result`.
const MAX_BLOCKS: usize = 1000;

/// Reads a `post_tool_use` answer body into its verdict parts: the replacement content
/// blocks (checked), and the additional context.
pub fn parse_post(body: &str) -> Result<(Option<Vec<Value>>, Option<String>), String> {
    if body.trim().is_empty() {
        return Ok((None, None));
    }
    let answer: PostAnswer = serde_json::from_str(body)
        .map_err(|e| format!("its answer is not a post_tool_use answer: {e}"))?;
    // Checked as a client's tool result is: a block the provider would refuse would sit in
    // the log and fail every later request of the thread.
    let content = match answer.updated_result {
        None => None,
        Some(Value::String(s)) => Some(vec![json!({"type": "text", "text": s})]),
        Some(v @ Value::Array(_)) => Some(
            super::content::validate("updated_result", Some(&v), Place::ToolResult, 0, MAX_BLOCKS)
                .map_err(|e| format!("its {}", e.message))?,
        ),
        Some(_) => {
            return Err(
                "its `updated_result` must be a string or an array of content blocks".into(),
            );
        }
    };
    if let Some(c) = &answer.additional_context
        && c.len() > MAX_CONTEXT
    {
        return Err(format!(
            "its `additional_context` is longer than {MAX_CONTEXT} bytes"
        ));
    }
    Ok((content, answer.additional_context.filter(|c| !c.is_empty())))
}

/// One hook's part in a tool result, as the result event records it under `hooks`.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PostVerdict {
    pub hook_id: String,
    /// The result this hook gave the model instead.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub updated_result: Option<Vec<Value>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub additional_context: Option<String>,
    /// Set when the hook did not answer usably: why, and what its failure mode did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// The failure mode withheld the result from the model.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub withheld: bool,
}

/// A tool result as the model is given it.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelResult {
    pub content: Vec<Value>,
    pub is_error: bool,
}

/// What the model sees of a result after the hooks' verdicts (in the order asked): the last
/// replacement (else the original), then every hook's additional context as text; a
/// withholding failure replaces it all with an error saying so. None when nothing changed.
pub fn post_result(
    content: &[Value],
    is_error: bool,
    verdicts: &[PostVerdict],
) -> Option<ModelResult> {
    if let Some(v) = verdicts.iter().find(|v| v.withheld) {
        let why = v.failed.clone().unwrap_or_default();
        return Some(ModelResult {
            content: vec![json!({"type": "text", "text": format!(
                "The tool ran, but its result is withheld from you: {why}"
            )})],
            is_error: true,
        });
    }
    let replaced = verdicts
        .iter()
        .rev()
        .find_map(|v| v.updated_result.as_ref());
    let notes: Vec<Value> = verdicts
        .iter()
        .filter_map(|v| v.additional_context.as_ref())
        .map(|c| json!({"type": "text", "text": c}))
        .collect();
    if replaced.is_none() && notes.is_empty() {
        return None;
    }
    let mut out = replaced.cloned().unwrap_or_else(|| content.to_vec());
    out.extend(notes);
    Some(ModelResult {
        content: out,
        is_error,
    })
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
    fn gate_answers_are_read_strictly() {
        use GateDecision::*;
        let ok = |event, body: &str| parse_gate(event, body).map(|a| a.decision);
        // (event, body, decision or the error's telling words)
        let cases: &[(HookEvent, &str, Result<GateDecision, &str>)] = &[
            (HookEvent::Stop, "", Ok(Allow)),
            (HookEvent::Stop, r#"{"decision":"allow"}"#, Ok(Allow)),
            (
                HookEvent::Stop,
                r#"{"decision":"block","reason":"run the tests"}"#,
                Ok(Block),
            ),
            // A blocked stop must tell the model what to do.
            (HookEvent::Stop, r#"{"decision":"block"}"#, Err("reason")),
            (
                HookEvent::SubagentStop,
                r#"{"decision":"block","reason":" "}"#,
                Err("reason"),
            ),
            (
                HookEvent::UserPromptSubmit,
                r#"{"decision":"block"}"#,
                Ok(Block),
            ),
            (
                HookEvent::SubagentStart,
                r#"{"decision":"deny"}"#,
                Err("subagent_start"),
            ),
            (
                HookEvent::UserPromptSubmit,
                r#"{"decision":"allow","additional_context":"x"}"#,
                Err("additional_context"),
            ),
        ];
        for (event, body, want) in cases {
            match (ok(*event, body), want) {
                (Ok(got), Ok(want)) => assert_eq!(got, *want, "{body}"),
                (Err(e), Err(words)) => assert!(e.contains(words), "{body}: {e}"),
                (got, want) => panic!("{body}: got {got:?}, want {want:?}"),
            }
        }
    }

    fn gate(id: &str, decision: GateDecision, reason: Option<&str>) -> GateVerdict {
        GateVerdict {
            hook_id: id.into(),
            event: HookEvent::Stop,
            decision,
            reason: reason.map(str::to_string),
            failed: None,
        }
    }

    #[test]
    fn the_first_block_decides_a_gate() {
        let mut o = GateOutcome::default();
        assert_eq!(o.recorded(), None);
        o.push(gate("hook_a", GateDecision::Allow, None));
        assert_eq!(o.blocked, None);
        o.push(gate("hook_b", GateDecision::Block, Some("not yet")));
        o.push(gate("hook_c", GateDecision::Block, Some("later")));
        assert_eq!(o.blocked, Some(("hook_b".into(), "not yet".into())));
        let mut failed = gate("hook_d", GateDecision::Block, None);
        failed.failed = Some("hook hook_d failed (timed out)".into());
        let mut o = GateOutcome::default();
        o.push(failed);
        assert_eq!(
            o.blocked.clone().unwrap().1,
            "hook hook_d failed (timed out)"
        );
        assert_eq!(o.recorded().unwrap()[0]["event"], "stop");
    }

    #[test]
    fn post_answers_replace_or_annotate() {
        assert_eq!(parse_post("").unwrap(), (None, None));
        let (c, n) =
            parse_post(r#"{"updated_result":"[redacted]","additional_context":"note"}"#).unwrap();
        assert_eq!(c.unwrap(), vec![json!({"type":"text","text":"[redacted]"})]);
        assert_eq!(n.unwrap(), "note");
        for (bad, words) in [
            (
                r#"{"updated_result":[{"type":"text"}]}"#,
                "updated_result[0]",
            ),
            (
                r#"{"updated_result":[{"type":"tool_use"}]}"#,
                "must be one of",
            ),
            (
                r#"{"updated_result":[{"type":"text","text":"x","cache_control":{}}]}"#,
                "cache_control",
            ),
            (r#"{"updated_result":3}"#, "string or an array"),
            (r#"{"decision":"block"}"#, "decision"),
        ] {
            let e = parse_post(bad).unwrap_err();
            assert!(e.contains(words), "{bad}: {e}");
        }
    }

    fn post(id: &str, updated: Option<&str>, note: Option<&str>) -> PostVerdict {
        PostVerdict {
            hook_id: id.into(),
            updated_result: updated.map(|t| vec![json!({"type":"text","text":t})]),
            additional_context: note.map(str::to_string),
            failed: None,
            withheld: false,
        }
    }

    #[test]
    fn the_model_sees_the_last_replacement_and_every_note() {
        let original = vec![json!({"type":"text","text":"secret=1"})];
        assert_eq!(post_result(&original, false, &[]), None);
        assert_eq!(
            post_result(&original, false, &[post("h1", None, None)]),
            None
        );
        let got = post_result(
            &original,
            false,
            &[
                post("h1", Some("secret=[x]"), Some("first")),
                post("h2", None, Some("second")),
            ],
        )
        .unwrap();
        let texts: Vec<&str> = got
            .content
            .iter()
            .map(|b| b["text"].as_str().unwrap())
            .collect();
        assert_eq!(texts, ["secret=[x]", "first", "second"]);
        assert!(!got.is_error);

        let mut withheld = post("h3", None, None);
        withheld.withheld = true;
        withheld.failed = Some("hook h3 failed (timed out)".into());
        let got = post_result(&original, false, &[post("h1", Some("x"), None), withheld]).unwrap();
        assert!(got.is_error);
        assert!(
            got.content[0]["text"]
                .as_str()
                .unwrap()
                .contains("timed out")
        );
    }
}
