//! The grading step of an outcome's iteration: one grader model request judges
//! the primary thread's transcript against the rubric, behind the budget gate, with
//! `span.outcome_evaluation_ongoing` heartbeats while it runs; its verdict ends the
//! evaluation. The grader's spend counts toward the session's usage, list cost and budget.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

use super::{Loop, RunError, Waited};
use crate::Inner;
use crate::intake::server_event;
use crate::state::{self, EngineState};
use mast_domain::events::{StopReason, kind};
use mast_domain::outcome::{self, EndResult, Judgement, Outcome, Phase, Verdict};
use mast_domain::session::{ModelUsage, SessionUsage};
use mast_models::{Message, ModelRequest, Role};
use mast_store::Writer;

/// Most characters of the transcript shown to the grader (its newest part is kept).
const MAX_TRANSCRIPT_CHARS: usize = 400_000;

impl Loop<'_> {
    /// Grades outcome `o` (being evaluated): the budget gate, the grader request with its
    /// heartbeats and retries, then the verdict. An interrupt or shutdown leaves it to the
    /// loop; a crash leaves the outcome `evaluating`, so the next runner grades again.
    pub(super) async fn grade(&mut self, o: Outcome) -> Result<(), RunError> {
        let cfg = self.inner.config.outcomes.clone();
        let model = cfg
            .grader_model
            .clone()
            .unwrap_or_else(|| self.scope.agent.model.id.clone());
        let priced = self.inner.config.prices.of(&model).is_some();
        let ender = self.ender();
        let stopped = Arc::new(AtomicBool::new(false));
        let stop_flag = stopped.clone();
        let clock = self.inner.store.clock().clone();
        self.commit(
            move |rec, st| {
                // The budget gate applies to grader requests as to the agent's.
                let stop = crate::budget::gate(&ender, rec, st, priced, clock.now())?;
                stop_flag.store(stop.is_some(), Ordering::Relaxed);
                Ok(stop.unwrap_or_default())
            },
            vec![],
        )
        .await?;
        if stopped.load(Ordering::Relaxed) {
            return Ok(());
        }
        let route = match self.inner.models.route(&model) {
            Ok(r) => r,
            Err(msg) => {
                let v = Verdict {
                    judgement: Judgement::Failed,
                    explanation: format!("The grader model `{model}` cannot be used: {msg}"),
                };
                return self.conclude(&o, v, None, &model).await;
            }
        };
        let request = ModelRequest {
            model: route.upstream_model.clone(),
            system: Some(cfg.grader_prompt.clone()),
            messages: vec![Message {
                role: Role::User,
                content: vec![mast_domain::content::text(self.grader_input(&o))],
            }],
            tools: Default::default(),
            max_tokens: self.inner.config.max_tokens,
            effort: None,
            fast: false,
            inference_geo: None,
            sized: Default::default(),
        };
        let mut attempt = 0u32;
        loop {
            let client = route.client.clone();
            let req = &request;
            let beats = heartbeat(
                self.inner,
                &self.scope.sid,
                &self.scope.writer,
                &self.scope.primary,
                &o,
                cfg.heartbeat,
            );
            let waited = self
                .interruptible(async move {
                    tokio::select! {
                        r = client.complete(req, &|_| {}) => r,
                        never = beats => match never {},
                    }
                })
                .await?;
            match waited {
                Waited::Interrupted => return Ok(()),
                Waited::Done(Ok(resp)) => {
                    let text = crate::context::text_of(&resp.content);
                    let v = Verdict::parse(&text);
                    return self.conclude(&o, v, Some(resp.usage), &model).await;
                }
                Waited::Done(Err(err)) => {
                    attempt += 1;
                    if !(err.retryable && attempt <= self.inner.config.max_retries) {
                        let v = Verdict {
                            judgement: Judgement::Failed,
                            explanation: format!(
                                "The grader's model request failed: {}",
                                err.message
                            ),
                        };
                        return self.conclude(&o, v, None, &model).await;
                    }
                    tracing::warn!(session_id = %self.scope.sid, error = %err.message, "grader request failed; retrying");
                    let delay = crate::backoff::delay(
                        self.inner.config.retry_base,
                        self.inner.config.retry_cap,
                        attempt,
                        err.retry_after,
                    );
                    if let Waited::Interrupted =
                        self.interruptible(tokio::time::sleep(delay)).await?
                    {
                        return Ok(());
                    }
                }
            }
        }
    }

    /// Records the verdict on outcome `o`: the grader's usage and cost, the evaluation's end,
    /// and — `satisfied` or `failed` — the session's idle. A revision's feedback (or the
    /// acknowledgement asked for when no iterations are left) reaches the model through the
    /// end event itself (`engine::context`).
    async fn conclude(
        &mut self,
        o: &Outcome,
        v: Verdict,
        usage: Option<ModelUsage>,
        model: &str,
    ) -> Result<(), RunError> {
        let cost = usage
            .as_ref()
            .map(|u| self.inner.config.prices.cost(model, u));
        let ender = self.ender();
        let (oid, primary) = (o.outcome_id.clone(), self.scope.primary.clone());
        let clock = self.inner.store.clock().clone();
        self.commit(
            move |rec, st| {
                let now = clock.now();
                if let (Some(u), Some(cost)) = (&usage, cost) {
                    let mut total: SessionUsage = serde_json::from_str(&rec.usage)?;
                    total.add(u);
                    rec.usage = serde_json::to_string(&total)?;
                    st.spend.add(cost);
                }
                let Some(o) = st
                    .outcomes
                    .iter_mut()
                    .find(|x| x.outcome_id == oid && x.phase == Phase::Evaluating)
                else {
                    // Ended meanwhile (an interrupt committed first).
                    return Ok(vec![]);
                };
                let (iteration, start) = (o.iteration, o.start_id.clone().unwrap_or_default());
                let result = o.judge(&v, now);
                let mut out = vec![server_event(
                    kind::OUTCOME_EVALUATION_END,
                    outcome::span_end(
                        &oid,
                        &start,
                        iteration,
                        result,
                        &v.explanation,
                        &usage.unwrap_or_default(),
                    ),
                    &primary,
                    now,
                )];
                if matches!(result, EndResult::Satisfied | EndResult::Failed) {
                    out.extend(ender.try_end(rec, st, StopReason::EndTurn, None)?);
                }
                Ok(out)
            },
            vec![],
        )
        .await?;
        Ok(())
    }

    /// The grader's message: the task, the rubric, the transcript, and which iteration this
    /// is (the scripted model reads the marker to play the grader; see `models::scripted`).
    fn grader_input(&self, o: &Outcome) -> String {
        let rubric = self
            .view
            .events
            .iter()
            .find(|e| {
                e.kind == kind::USER_DEFINE_OUTCOME
                    && e.body.get("outcome_id").and_then(Value::as_str) == Some(&o.outcome_id)
            })
            .and_then(|e| {
                e.body
                    .get("rubric")?
                    .get("content")?
                    .as_str()
                    .map(str::to_string)
            })
            .unwrap_or_default();
        let transcript = render(&self.view.transcript.context().messages);
        format!(
            "<outcome_evaluation iteration=\"{}\">\n<description>\n{}\n</description>\n<rubric>\n{}\n</rubric>\n<transcript>\n{}\n</transcript>\n</outcome_evaluation>\nJudge the work in the transcript against the rubric and answer with the JSON verdict only.",
            o.iteration, o.description, rubric, transcript
        )
    }
}

/// Emits `span.outcome_evaluation_ongoing` every `period` until dropped (it never ends by
/// itself). A failed write is logged and the next beat tries again.
async fn heartbeat(
    inner: &Inner,
    sid: &str,
    writer: &Writer,
    primary: &str,
    o: &Outcome,
    period: std::time::Duration,
) -> std::convert::Infallible {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    loop {
        tick.tick().await;
        let now = inner.now();
        let ev = server_event(
            kind::OUTCOME_EVALUATION_ONGOING,
            outcome::span_start(&o.outcome_id, o.iteration),
            primary,
            now,
        );
        let txn = Box::new(move |rec: &mut mast_store::SessionRecord| {
            let st = EngineState::of(rec)?;
            state::output(rec, &st, st.clone(), vec![ev], vec![], now)
        });
        match inner.store.transact(sid, writer, txn).await {
            Ok(Some((_, appended))) => inner.hub.publish(sid, &appended),
            Ok(None) => {}
            Err(e) => tracing::warn!(session_id = %sid, error = %e, "outcome heartbeat failed"),
        }
    }
}

/// The conversation as plain text for the grader: who said what, tool calls and results.
fn render(messages: &[Message]) -> String {
    let mut out = String::new();
    for m in messages {
        let who = match m.role {
            Role::User => "USER",
            Role::Assistant => "AGENT",
        };
        for b in &m.content {
            let line = match b.get("type").and_then(Value::as_str) {
                Some("text") => b.get("text").and_then(Value::as_str).map(str::to_string),
                Some("tool_use") => Some(format!(
                    "[tool call {} {}]",
                    b.get("name").and_then(Value::as_str).unwrap_or(""),
                    b.get("input").cloned().unwrap_or(Value::Null)
                )),
                Some("tool_result") => {
                    let text = match b.get("content") {
                        Some(Value::Array(a)) => a
                            .iter()
                            .filter_map(|c| c.get("text").and_then(Value::as_str))
                            .collect::<Vec<_>>()
                            .join("\n"),
                        Some(Value::String(s)) => s.clone(),
                        _ => String::new(),
                    };
                    Some(format!("[tool result] {text}"))
                }
                _ => None,
            };
            if let Some(line) = line {
                out.push_str(who);
                out.push_str(": ");
                out.push_str(&line);
                out.push('\n');
            }
        }
    }
    if out.chars().count() > MAX_TRANSCRIPT_CHARS {
        let skip = out.chars().count() - MAX_TRANSCRIPT_CHARS;
        out = format!(
            "[… {skip} earlier characters left out …]\n{}",
            out.chars().skip(skip).collect::<String>()
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn transcripts_render_as_text() {
        let messages = vec![
            Message {
                role: Role::User,
                content: vec![json!({"type":"text","text":"write it"})],
            },
            Message {
                role: Role::Assistant,
                content: vec![
                    json!({"type":"thinking","thinking":"hmm","signature":"s"}),
                    json!({"type":"text","text":"calling"}),
                    json!({"type":"tool_use","id":"t","name":"bash","input":{"command":"ls"}}),
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    json!({"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"a.txt"}]}),
                ],
            },
        ];
        assert_eq!(
            render(&messages),
            "USER: write it\nAGENT: calling\nAGENT: [tool call bash {\"command\":\"ls\"}]\nUSER: [tool result] a.txt\n"
        );
    }
}
