//! Outcomes in the loop: the decisions taken under the session's lock when an
//! outcome is defined, when the agent would go idle while one is active (grading begins
//! instead), and when the session idles or ends for another reason (the outcome ends with
//! it). The grader's request itself is `engine::outcome_grader`; the state is
//! `domain::outcome::Outcome`, kept in the engine state so a crash resumes it.

use std::time::Duration;

use super::intake::server_event;
use super::state::EngineState;
use mast_domain::events::{StopReason, kind};
use mast_domain::invalid::Invalid;
use mast_domain::outcome::{self, DefineOutcome, EndResult, Outcome, Phase};
use mast_domain::session::ModelUsage;
use mast_domain::time::Micros;
use mast_store::{NewEvent, StoreError};

/// The grader's instructions unless configured (`[outcomes] grader_prompt`).
pub const DEFAULT_GRADER_PROMPT: &str = "You are the grader of an AI agent's work. You are \
given what the agent was asked to produce, a rubric, and the transcript of the agent's work. \
Judge the work strictly against the rubric. Answer with one JSON object and nothing else: \
{\"result\": \"satisfied\" | \"needs_revision\" | \"failed\", \"explanation\": \"...\"}. \
Use \"satisfied\" when every criterion is met; \"needs_revision\" when some are not, and say \
precisely which and what to change; \"failed\" only when the rubric cannot apply to this work.";

/// How outcomes are graded (`[outcomes]` in the config file, `MAST_OUTCOME_*`).
#[derive(Debug, Clone)]
pub struct OutcomeConfig {
    /// The grader's model; None grades with the session agent's own model.
    pub grader_model: Option<String>,
    /// The grader's system prompt.
    pub grader_prompt: String,
    /// How often `span.outcome_evaluation_ongoing` is emitted while grading.
    pub heartbeat: Duration,
}

impl Default for OutcomeConfig {
    fn default() -> Self {
        OutcomeConfig {
            grader_model: None,
            grader_prompt: DEFAULT_GRADER_PROMPT.to_string(),
            heartbeat: Duration::from_secs(5),
        }
    }
}

impl OutcomeConfig {
    /// The `[outcomes]` table of the config file (`grader_model`, `grader_prompt`,
    /// `heartbeat_ms`), under `MAST_OUTCOME_GRADER_MODEL`, `MAST_OUTCOME_GRADER_PROMPT` and
    /// `MAST_OUTCOME_HEARTBEAT_MS`.
    pub fn load(file: Option<&std::path::Path>) -> anyhow::Result<OutcomeConfig> {
        #[derive(serde::Deserialize, Default)]
        #[serde(deny_unknown_fields)]
        struct Table {
            grader_model: Option<String>,
            grader_prompt: Option<String>,
            heartbeat_ms: Option<u64>,
        }
        #[derive(serde::Deserialize)]
        struct File {
            #[serde(default)]
            outcomes: Option<Table>,
        }
        let mut t = Table::default();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path)
                .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
            let parsed: File =
                toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
            t = parsed.outcomes.unwrap_or_default();
        }
        let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        if let Some(m) = env("MAST_OUTCOME_GRADER_MODEL") {
            t.grader_model = Some(m);
        }
        if let Some(p) = env("MAST_OUTCOME_GRADER_PROMPT") {
            t.grader_prompt = Some(p);
        }
        if let Some(ms) = env("MAST_OUTCOME_HEARTBEAT_MS") {
            t.heartbeat_ms =
                Some(ms.parse().map_err(|_| {
                    anyhow::anyhow!("MAST_OUTCOME_HEARTBEAT_MS must be milliseconds")
                })?);
        }
        let mut c = OutcomeConfig {
            grader_model: t.grader_model.filter(|m| !m.trim().is_empty()),
            ..OutcomeConfig::default()
        };
        if let Some(p) = t.grader_prompt.filter(|p| !p.trim().is_empty()) {
            c.grader_prompt = p;
        }
        if let Some(ms) = t.heartbeat_ms {
            anyhow::ensure!(ms > 0, "outcomes: heartbeat_ms must be positive");
            c.heartbeat = Duration::from_millis(ms);
        }
        Ok(c)
    }
}

/// The outcome not yet at a terminal result, if any (there is at most one).
pub fn active(st: &EngineState) -> Option<&Outcome> {
    st.outcomes.iter().rev().find(|o| o.is_active())
}

fn active_mut(st: &mut EngineState) -> Option<&mut Outcome> {
    st.outcomes.iter_mut().rev().find(|o| o.is_active())
}

/// The outcome being graded, for the loop's grading step.
pub fn evaluating(st: &EngineState) -> Option<Outcome> {
    active(st).filter(|o| o.phase == Phase::Evaluating).cloned()
}

/// A `user.define_outcome` taken by a session that `can_start` work now: at most one outcome
/// is active, and it starts a turn at once (so one cannot be defined while the session
/// works or waits on tool calls).
pub fn define(
    st: &mut EngineState,
    def: &DefineOutcome,
    can_start: bool,
) -> Result<(), StoreError> {
    if let Some(o) = active(st) {
        return Err(StoreError::Conflict(format!(
            "outcome `{}` is still {}; only one outcome is active at a time: wait for its `span.outcome_evaluation_end` (or interrupt the session) before defining another",
            o.outcome_id,
            o.phase.as_str()
        )));
    }
    if !can_start {
        return Err(StoreError::Conflict(
            "an outcome starts work at once, so it is only accepted while the session is idle with nothing pending; wait for `session.status_idle` (or interrupt the session) and send it again".into(),
        ));
    }
    st.outcomes.push(Outcome::new(def));
    Ok(())
}

/// A file rubric that was not resolved to text before the transaction (a bug, not input).
pub fn unresolved(i: usize) -> Invalid {
    Invalid::new(format!(
        "`events[{i}].rubric`: the file rubric could not be read"
    ))
}

/// The primary thread would idle with `end_turn`: with an outcome at work, grading begins
/// instead (its start span is returned) and the session keeps running; with one already being
/// graded, the turn is not over either. None: no outcome stops the turn's end.
pub(super) fn on_turn_end(
    st: &mut EngineState,
    primary: &str,
    now: Micros,
) -> Option<Vec<NewEvent>> {
    let o = active_mut(st)?;
    match o.phase {
        Phase::Pending | Phase::Running => {
            let ev = server_event(
                kind::OUTCOME_EVALUATION_START,
                outcome::span_start(&o.outcome_id, o.iteration),
                primary,
                now,
            );
            o.begin_evaluation(&ev.id);
            Some(vec![ev])
        }
        Phase::Evaluating => Some(vec![]),
        _ => None,
    }
}

/// The session idles for `reason` (not through an outcome's own end): an interrupt ends the
/// active outcome as `interrupted`, a failed or refused turn as `failed`. A session that
/// waits on tool calls or the budget keeps its outcome.
pub(super) fn on_session_idle(
    st: &mut EngineState,
    reason: &StopReason,
    primary: &str,
    now: Micros,
) -> Vec<NewEvent> {
    let (phase, why) = match reason {
        StopReason::RequiresAction(_) | StopReason::BudgetReached => return vec![],
        StopReason::EndTurn => (
            Phase::Interrupted,
            "The user interrupted the session before the outcome was evaluated.",
        ),
        StopReason::RetriesExhausted => (
            Phase::Failed,
            "The agent's turn failed (its retries ran out) before the outcome was met.",
        ),
        StopReason::Refusal => (
            Phase::Failed,
            "The agent's model refused the task before the outcome was met.",
        ),
    };
    abandon(st, phase, why, primary, now)
}

/// Ends the active outcome without a verdict: its `span.outcome_evaluation_end` (start id
/// `""` when no evaluation was under way).
pub(super) fn abandon(
    st: &mut EngineState,
    phase: Phase,
    why: &str,
    primary: &str,
    now: Micros,
) -> Vec<NewEvent> {
    let Some(o) = active_mut(st) else {
        return vec![];
    };
    let iteration = o.iteration;
    let start = o.abandon(phase, why, now);
    let result = match phase {
        Phase::Interrupted => EndResult::Interrupted,
        _ => EndResult::Failed,
    };
    vec![server_event(
        kind::OUTCOME_EVALUATION_END,
        outcome::span_end(
            &o.outcome_id,
            &start,
            iteration,
            result,
            why,
            &ModelUsage::default(),
        ),
        primary,
        now,
    )]
}

/// The wire `outcome_evaluations[]` of a session.
pub fn view(st: &EngineState) -> Vec<serde_json::Value> {
    st.outcomes.iter().map(Outcome::to_json).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use mast_domain::outcome::Rubric;

    fn def() -> DefineOutcome {
        DefineOutcome {
            outcome_id: "outc_1".into(),
            description: "d".into(),
            rubric: Rubric::Text("r".into()),
            max_iterations: 3,
        }
    }

    #[test]
    fn one_active_outcome_that_starts_at_once() {
        let mut st = EngineState::default();
        assert!(matches!(
            define(&mut st, &def(), false),
            Err(StoreError::Conflict(_))
        ));
        assert!(st.outcomes.is_empty());
        define(&mut st, &def(), true).unwrap();
        let e = define(&mut st, &def(), true).unwrap_err();
        assert!(e.to_string().contains("only one outcome"), "{e}");
        assert_eq!(st.outcomes.len(), 1);
        // Chained after a terminal result.
        abandon(&mut st, Phase::Interrupted, "x", "sthr", 1);
        define(&mut st, &def(), true).unwrap();
        assert_eq!(st.outcomes.len(), 2);
    }

    #[test]
    fn turn_end_becomes_an_evaluation() {
        let mut st = EngineState::default();
        assert!(on_turn_end(&mut st, "sthr", 1).is_none());
        define(&mut st, &def(), true).unwrap();
        let evs = on_turn_end(&mut st, "sthr", 1).unwrap();
        assert_eq!(evs.len(), 1);
        assert_eq!(evs[0].kind, kind::OUTCOME_EVALUATION_START);
        assert_eq!(
            evaluating(&st).unwrap().start_id.as_deref(),
            Some(evs[0].id.as_str())
        );
        // While it is graded, the turn does not end.
        assert_eq!(on_turn_end(&mut st, "sthr", 2).unwrap().len(), 0);
        // Waiting on tools or the budget keeps it; an interrupt ends it with its start id.
        assert!(on_session_idle(&mut st, &StopReason::BudgetReached, "sthr", 3).is_empty());
        let end = on_session_idle(&mut st, &StopReason::EndTurn, "sthr", 3);
        assert_eq!(end[0].body["result"], "interrupted");
        assert_eq!(
            end[0].body["outcome_evaluation_start_id"],
            evs[0].id.as_str()
        );
        assert!(active(&st).is_none());
        assert!(on_turn_end(&mut st, "sthr", 4).is_none());
        assert_eq!(view(&st)[0]["result"], "interrupted");
    }
}
