//! Outcomes: the `user.define_outcome` input, the evaluation state the session
//! keeps for each outcome (`outcome_evaluations[]`), its transitions, and the grader's verdict
//! read from the grader model's answer.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::fields::{Obj, must_be, tag};
use super::invalid::{Invalid, Valid, check_len};
use super::time::{self, Micros};

/// Most characters of a rubric (text, or a file's text).
pub const MAX_RUBRIC_CHARS: usize = 262_144;
/// Evaluate→revise cycles when the client names none.
pub const DEFAULT_MAX_ITERATIONS: u32 = 3;
/// Most evaluate→revise cycles a client may ask for.
pub const MAX_ITERATIONS: u32 = 20;

/// How an outcome is graded: rubric text, or a file whose text is the rubric (resolved to
/// text before the event is recorded).
#[derive(Debug, Clone, PartialEq)]
pub enum Rubric {
    Text(String),
    File(String),
}

/// A validated `user.define_outcome`.
#[derive(Debug, Clone, PartialEq)]
pub struct DefineOutcome {
    /// The server-generated `outc_…` id, assigned when the event is parsed.
    pub outcome_id: String,
    pub description: String,
    pub rubric: Rubric,
    pub max_iterations: u32,
}

impl DefineOutcome {
    /// Parses the fields of a `user.define_outcome` event object at `at`.
    pub fn parse(at: &str, v: &Value) -> Valid<DefineOutcome> {
        let o = Obj::new(
            at,
            v,
            "a `user.define_outcome` event",
            &["type", "description", "rubric", "max_iterations"],
        )?;
        let description = o.req_str("description")?.to_string();
        let rubric_at = o.path("rubric");
        let Some(r) = o.get("rubric") else {
            return Err(Invalid::new(format!("`{rubric_at}` is required")));
        };
        if !r.is_object() {
            return Err(must_be(&rubric_at, "a rubric object", r));
        }
        let rubric = match tag(&rubric_at, r, &["text", "file"])? {
            "text" => {
                let ro = Obj::new(&rubric_at, r, "a text rubric", &["type", "content"])?;
                let content = ro.req_str("content")?;
                check_len(&ro.path("content"), content, 1, MAX_RUBRIC_CHARS)?;
                Rubric::Text(content.to_string())
            }
            _ => {
                let ro = Obj::new(&rubric_at, r, "a file rubric", &["type", "file_id"])?;
                Rubric::File(ro.req_str("file_id")?.to_string())
            }
        };
        let max_iterations = match o.int("max_iterations")? {
            None => DEFAULT_MAX_ITERATIONS,
            Some(n) if (1..=i64::from(MAX_ITERATIONS)).contains(&n) => n as u32,
            Some(n) => {
                return Err(Invalid::new(format!(
                    "`{}` must be between 1 and {MAX_ITERATIONS} (got {n})",
                    o.path("max_iterations")
                )));
            }
        };
        Ok(DefineOutcome {
            outcome_id: super::ids::new_id("outc"),
            description,
            rubric,
            max_iterations,
        })
    }

    /// The rubric's text (a file rubric only once resolved).
    pub fn rubric_text(&self) -> Option<&str> {
        match &self.rubric {
            Rubric::Text(t) => Some(t),
            Rubric::File(_) => None,
        }
    }

    /// The persisted body (and echo): the rubric as text, the effective `max_iterations`.
    pub fn body(&self) -> Value {
        let rubric = match &self.rubric {
            Rubric::Text(t) => json!({"type": "text", "content": t}),
            Rubric::File(id) => json!({"type": "file", "file_id": id}),
        };
        json!({
            "outcome_id": self.outcome_id,
            "description": self.description,
            "rubric": rubric,
            "max_iterations": self.max_iterations,
        })
    }
}

/// Where an outcome is (`OutcomeEvaluation.result`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Pending,
    Running,
    Evaluating,
    Satisfied,
    MaxIterationsReached,
    Failed,
    Interrupted,
}

impl Phase {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Pending => "pending",
            Phase::Running => "running",
            Phase::Evaluating => "evaluating",
            Phase::Satisfied => "satisfied",
            Phase::MaxIterationsReached => "max_iterations_reached",
            Phase::Failed => "failed",
            Phase::Interrupted => "interrupted",
        }
    }

    /// No further evaluation follows.
    pub fn is_terminal(self) -> bool {
        !matches!(self, Phase::Pending | Phase::Running | Phase::Evaluating)
    }
}

/// What the grader decided about one iteration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Judgement {
    Satisfied,
    NeedsRevision,
    Failed,
}

/// The grader's verdict: its judgement and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub judgement: Judgement,
    pub explanation: String,
}

impl Verdict {
    /// Reads the grader model's answer: a JSON object `{"result", "explanation"}`, alone, in
    /// a code fence, or amid other text (the outermost braces). An answer that cannot be read
    /// is a `failed` verdict saying so — never retried, since the same transcript and prompt
    /// would most likely get the same answer, and a wrong `satisfied` must not be guessed.
    pub fn parse(answer: &str) -> Verdict {
        match Self::read(answer) {
            Some(v) => v,
            None => {
                let excerpt: String = answer.trim().chars().take(500).collect();
                Verdict {
                    judgement: Judgement::Failed,
                    explanation: format!(
                        "The grader's answer could not be read as a verdict (a JSON object with `result` satisfied, needs_revision or failed, and `explanation`): {excerpt:?}"
                    ),
                }
            }
        }
    }

    fn read(answer: &str) -> Option<Verdict> {
        let t = answer.trim();
        let fenced = t
            .strip_prefix("```json")
            .or_else(|| t.strip_prefix("```"))
            .and_then(|r| r.trim_end().strip_suffix("```"))
            .map(str::trim);
        let braces = match (t.find('{'), t.rfind('}')) {
            (Some(a), Some(b)) if a < b => Some(&t[a..=b]),
            _ => None,
        };
        [Some(t), fenced, braces]
            .into_iter()
            .flatten()
            .find_map(|c| {
                serde_json::from_str::<Value>(c)
                    .ok()
                    .and_then(|v| Self::of(&v))
            })
    }

    fn of(v: &Value) -> Option<Verdict> {
        let result = v.get("result")?.as_str()?.trim().to_ascii_lowercase();
        let judgement = match result.as_str() {
            "satisfied" => Judgement::Satisfied,
            "needs_revision" => Judgement::NeedsRevision,
            "failed" => Judgement::Failed,
            _ => return None,
        };
        let explanation = v
            .get("explanation")
            .and_then(Value::as_str)
            .map(str::trim)
            .filter(|e| !e.is_empty())
            .unwrap_or("(the grader gave no explanation)")
            .to_string();
        Some(Verdict {
            judgement,
            explanation,
        })
    }
}

/// One outcome's evaluation state, kept in the session's engine state (so it is durable and
/// changes under the session's lock). The rubric itself stays in the log, on the
/// `user.define_outcome` event.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Outcome {
    pub outcome_id: String,
    pub description: String,
    pub max_iterations: u32,
    /// 0-based revision cycle.
    pub iteration: u32,
    pub phase: Phase,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explanation: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completed_at: Option<Micros>,
    /// The `span.outcome_evaluation_start` of the evaluation under way.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_id: Option<String>,
}

/// What an outcome's evaluation ended with (`span.outcome_evaluation_end.result`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EndResult {
    Satisfied,
    NeedsRevision,
    MaxIterationsReached,
    Failed,
    Interrupted,
}

impl EndResult {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EndResult::Satisfied => "satisfied",
            EndResult::NeedsRevision => "needs_revision",
            EndResult::MaxIterationsReached => "max_iterations_reached",
            EndResult::Failed => "failed",
            EndResult::Interrupted => "interrupted",
        }
    }
}

impl Outcome {
    /// A newly defined outcome; the agent starts on it at once.
    pub fn new(def: &DefineOutcome) -> Outcome {
        Outcome {
            outcome_id: def.outcome_id.clone(),
            description: def.description.clone(),
            max_iterations: def.max_iterations,
            iteration: 0,
            phase: Phase::Running,
            explanation: None,
            completed_at: None,
            start_id: None,
        }
    }

    /// Not yet at a terminal result.
    pub fn is_active(&self) -> bool {
        !self.phase.is_terminal()
    }

    /// The agent would go idle: grading begins (`start_id` names its start span).
    pub fn begin_evaluation(&mut self, start_id: &str) {
        self.phase = Phase::Evaluating;
        self.start_id = Some(start_id.to_string());
    }

    /// Applies the grader's verdict on the current iteration; returns the evaluation's end
    /// result. A revision beyond `max_iterations` ends as `max_iterations_reached`.
    pub fn judge(&mut self, v: &Verdict, now: Micros) -> EndResult {
        self.explanation = Some(v.explanation.clone());
        self.start_id = None;
        let result = match v.judgement {
            Judgement::Satisfied => EndResult::Satisfied,
            Judgement::Failed => EndResult::Failed,
            Judgement::NeedsRevision if self.iteration + 1 >= self.max_iterations => {
                EndResult::MaxIterationsReached
            }
            Judgement::NeedsRevision => EndResult::NeedsRevision,
        };
        match result {
            EndResult::NeedsRevision => {
                self.iteration += 1;
                self.phase = Phase::Running;
            }
            EndResult::Satisfied => self.close(Phase::Satisfied, now),
            EndResult::MaxIterationsReached => self.close(Phase::MaxIterationsReached, now),
            _ => self.close(Phase::Failed, now),
        }
        result
    }

    /// Ends the outcome without a verdict (an interrupt, or a turn that failed); returns the
    /// start span id of an evaluation under way (`""` when none was).
    pub fn abandon(&mut self, phase: Phase, explanation: &str, now: Micros) -> String {
        self.explanation = Some(explanation.to_string());
        self.close(phase, now);
        self.start_id.take().unwrap_or_default()
    }

    fn close(&mut self, phase: Phase, now: Micros) {
        self.phase = phase;
        self.completed_at = Some(now);
    }

    /// The wire `outcome_evaluation` object.
    pub fn to_json(&self) -> Value {
        json!({
            "type": "outcome_evaluation",
            "outcome_id": self.outcome_id,
            "description": self.description,
            "iteration": self.iteration,
            "result": self.phase.as_str(),
            "explanation": self.explanation,
            "completed_at": time::format_opt(self.completed_at),
        })
    }
}

/// `span.outcome_evaluation_start` (and `_ongoing`) body.
pub fn span_start(outcome_id: &str, iteration: u32) -> Value {
    json!({ "outcome_id": outcome_id, "iteration": iteration })
}

/// `span.outcome_evaluation_end` body; `usage` sums the cycle's grader requests.
pub fn span_end(
    outcome_id: &str,
    start_id: &str,
    iteration: u32,
    result: EndResult,
    explanation: &str,
    usage: &super::session::ModelUsage,
) -> Value {
    json!({
        "outcome_id": outcome_id,
        "outcome_evaluation_start_id": start_id,
        "iteration": iteration,
        "result": result.as_str(),
        "explanation": explanation,
        "usage": usage,
    })
}

/// What the agent sees of a `user.define_outcome` event: the task and how it is graded.
pub fn task_text(body: &Value) -> Option<String> {
    let description = body.get("description")?.as_str()?;
    let rubric = body
        .get("rubric")
        .and_then(|r| r.get("content"))
        .and_then(Value::as_str)
        .unwrap_or("");
    Some(format!(
        "{description}\n\nYour work on this will be graded against this rubric:\n{rubric}"
    ))
}

/// What the agent sees of a `span.outcome_evaluation_end` that asks for more work: the
/// grader's feedback for a revision, or (budget exhausted) a request to wrap up. None for
/// results that end the outcome without another turn.
pub fn feedback_text(body: &Value) -> Option<String> {
    let explanation = body
        .get("explanation")
        .and_then(Value::as_str)
        .unwrap_or("");
    match body.get("result").and_then(Value::as_str)? {
        "needs_revision" => Some(format!(
            "The grader judged your work against the rubric and it needs revision:\n{explanation}\n\nRevise your work to address this, then finish."
        )),
        "max_iterations_reached" => Some(format!(
            "The grader still found gaps, and no more evaluation cycles are left:\n{explanation}\n\nBriefly acknowledge where the work stands; do not start new work."
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn def(max: u32) -> DefineOutcome {
        DefineOutcome {
            outcome_id: "outc_x".into(),
            description: "d".into(),
            rubric: Rubric::Text("r".into()),
            max_iterations: max,
        }
    }

    fn verdict(j: Judgement) -> Verdict {
        Verdict {
            judgement: j,
            explanation: "why".into(),
        }
    }

    #[test]
    fn parses_and_bounds_the_event() {
        let ok = json!({"type":"user.define_outcome","description":"d","rubric":{"type":"text","content":"c"}});
        let d = DefineOutcome::parse("e", &ok).unwrap();
        assert_eq!(d.max_iterations, 3);
        assert!(d.outcome_id.starts_with("outc_"));
        assert_eq!(d.body()["rubric"], json!({"type":"text","content":"c"}));
        for bad in [
            json!({"type":"user.define_outcome","description":"d","rubric":{"type":"text","content":"c"},"max_iterations":0}),
            json!({"type":"user.define_outcome","description":"d","rubric":{"type":"text","content":"c"},"max_iterations":21}),
            json!({"type":"user.define_outcome","description":"d"}),
            json!({"type":"user.define_outcome","description":"d","rubric":{"type":"text","content":""}}),
            json!({"type":"user.define_outcome","description":"d","rubric":{"type":"url","url":"x"}}),
            json!({"type":"user.define_outcome","description":"d","rubric":{"type":"file"}}),
            json!({"type":"user.define_outcome","description":"d","rubric":"text"}),
            json!({"type":"user.define_outcome","rubric":{"type":"text","content":"c"}}),
            json!({"type":"user.define_outcome","description":"d","rubric":{"type":"text","content":"c"},"grader":"x"}),
        ] {
            assert!(DefineOutcome::parse("e", &bad).is_err(), "{bad}");
        }
        let long = "x".repeat(MAX_RUBRIC_CHARS + 1);
        let e = DefineOutcome::parse(
            "e",
            &json!({"type":"user.define_outcome","description":"d","rubric":{"type":"text","content":long}}),
        )
        .unwrap_err();
        assert!(e.message.contains("at most 262144"), "{}", e.message);
        let file = DefineOutcome::parse(
            "e",
            &json!({"type":"user.define_outcome","description":"d","rubric":{"type":"file","file_id":"file_1"},"max_iterations":20}),
        )
        .unwrap();
        assert_eq!(file.rubric, Rubric::File("file_1".into()));
        assert_eq!(file.max_iterations, 20);
    }

    #[test]
    fn verdicts_are_read_robustly() {
        let cases = [
            (
                r#"{"result":"satisfied","explanation":"ok"}"#,
                Judgement::Satisfied,
            ),
            (
                "```json\n{\"result\": \"needs_revision\", \"explanation\": \"add x\"}\n```",
                Judgement::NeedsRevision,
            ),
            (
                "Verdict follows. {\"result\":\"FAILED\",\"explanation\":\"n/a\"} Thanks.",
                Judgement::Failed,
            ),
        ];
        for (text, want) in cases {
            assert_eq!(Verdict::parse(text).judgement, want, "{text}");
        }
        let v = Verdict::parse(r#"{"result":"needs_revision","explanation":"  add x "}"#);
        assert_eq!(v.explanation, "add x");
        for junk in [
            "looks fine to me",
            r#"{"result":"great"}"#,
            r#"{"verdict":"satisfied"}"#,
            "",
        ] {
            let v = Verdict::parse(junk);
            assert_eq!(v.judgement, Judgement::Failed, "{junk}");
            assert!(v.explanation.contains("could not be read"), "{junk}");
        }
    }

    #[test]
    fn transitions() {
        let mut o = Outcome::new(&def(2));
        assert_eq!(o.phase, Phase::Running);
        o.begin_evaluation("sevt_a");
        assert_eq!(o.phase, Phase::Evaluating);
        assert_eq!(
            o.judge(&verdict(Judgement::NeedsRevision), 5),
            EndResult::NeedsRevision
        );
        assert_eq!((o.phase, o.iteration), (Phase::Running, 1));
        assert_eq!(o.completed_at, None);
        o.begin_evaluation("sevt_b");
        // The last allowed iteration still needs revision: the budget is exhausted.
        assert_eq!(
            o.judge(&verdict(Judgement::NeedsRevision), 6),
            EndResult::MaxIterationsReached
        );
        assert_eq!((o.phase, o.iteration), (Phase::MaxIterationsReached, 1));
        assert_eq!(o.completed_at, Some(6));
        assert!(!o.is_active());

        let mut s = Outcome::new(&def(3));
        s.begin_evaluation("sevt_c");
        assert_eq!(
            s.judge(&verdict(Judgement::Satisfied), 7),
            EndResult::Satisfied
        );
        assert_eq!(s.to_json()["result"], "satisfied");
        assert_eq!(s.to_json()["explanation"], "why");

        let mut f = Outcome::new(&def(3));
        f.begin_evaluation("sevt_d");
        assert_eq!(f.judge(&verdict(Judgement::Failed), 7), EndResult::Failed);
        assert_eq!(f.phase, Phase::Failed);

        let mut i = Outcome::new(&def(3));
        assert_eq!(i.abandon(Phase::Interrupted, "stop", 8), "");
        let mut j = Outcome::new(&def(3));
        j.begin_evaluation("sevt_e");
        assert_eq!(j.abandon(Phase::Interrupted, "stop", 8), "sevt_e");
        assert_eq!(j.phase, Phase::Interrupted);
        assert_eq!(j.to_json()["result"], "interrupted");
    }
}
