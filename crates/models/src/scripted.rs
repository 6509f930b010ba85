//! `mast-scripted`: a deterministic model that needs no network, for tests, demos and users'
//! own CI. It plays a little script written in the latest user text (see docs/models.md).
//!
//! - No directive lines: it answers `You said: <text>`.
//! - `say <text>`: answer text; `{{result}}` is replaced by the latest tool result's text.
//!   Anywhere in the script, `{{result.KEY}}` is replaced by member `KEY` of that result read
//!   as a JSON object (a string as it is, anything else as JSON; "" when there is none).
//! - `think`: emit a thinking block first.
//! - `call <tool> <json>`: call a tool with that input (several lines call in parallel).
//! - `sleep <ms>`: stream slowly, spreading the answer over that many milliseconds.
//! - `refuse`: stop with a refusal.
//! - `---`: ends a step; each model request of the turn plays the next step. When the steps
//!   run out it answers with the latest tool result (or `Done.`).
//! - `grade <result> <explanation>` (in an outcome's rubric): when it plays an outcome's
//!   grader, the n-th `grade` line is its verdict on iteration n (the last one repeats);
//!   `grade raw <text>` answers `<text>` as it is. No `grade` line: `satisfied`. A
//!   `grade sleep <ms>` line makes the grader take that long (it is not a verdict).
//!
//! A context-compaction request (see `models::summarise`) is not a script: it is answered
//! with a short fixed summary naming how long the summarised text was.

use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::json_size::json_len;
use super::{
    Delta, DeltaSink, ErrorKind, ModelClient, ModelError, ModelRequest, ModelResponse, Role,
};
// `system.message` text reaches models under this prefix; the script reader skips it.
use mast_domain::content::SYSTEM_PREFIX;
use mast_domain::session::ModelUsage;

/// The model id served by [`Scripted`].
pub const MODEL_ID: &str = "mast-scripted";

/// The scripted model.
#[derive(Debug, Default, Clone)]
pub struct Scripted;

#[derive(Debug, Default, PartialEq)]
struct Step {
    say: Vec<String>,
    think: bool,
    calls: Vec<(String, Value)>,
    sleep_ms: u64,
    refuse: bool,
}

fn is_directive(line: &str) -> bool {
    let word = line.split_whitespace().next().unwrap_or("");
    matches!(word, "say" | "think" | "call" | "sleep" | "refuse" | "---")
}

fn parse_steps(script: &str) -> Result<Vec<Step>, String> {
    let mut steps = vec![Step::default()];
    for raw in script.lines() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        let (word, rest) = line
            .split_once(char::is_whitespace)
            .map(|(w, r)| (w, r.trim()))
            .unwrap_or((line, ""));
        let step = steps.last_mut().expect("non-empty");
        match word {
            "---" => steps.push(Step::default()),
            "say" => step.say.push(rest.to_string()),
            "think" => step.think = true,
            "refuse" => step.refuse = true,
            "sleep" => {
                step.sleep_ms = rest
                    .parse()
                    .map_err(|_| format!("`sleep` needs milliseconds, got `{rest}`"))?
            }
            "call" => {
                let (tool, input) = rest.split_once(char::is_whitespace).unwrap_or((rest, "{}"));
                let input: Value = serde_json::from_str(input.trim())
                    .map_err(|e| format!("`call {tool}`: input is not JSON: {e}"))?;
                step.calls.push((tool.to_string(), input));
            }
            _ => {}
        }
    }
    Ok(steps)
}

fn text_of(blocks: &[Value]) -> String {
    blocks
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("text"))
        .filter_map(|b| b.get("text").and_then(Value::as_str))
        .filter(|t| !t.starts_with(SYSTEM_PREFIX))
        .collect::<Vec<_>>()
        .join("\n")
}

fn latest_tool_result(req: &ModelRequest) -> Option<String> {
    let last = req.messages.last().filter(|m| m.role == Role::User)?;
    let texts: Vec<String> = last
        .content
        .iter()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
        .map(|b| match b.get("content") {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Array(a)) => text_of(a),
            _ => String::new(),
        })
        .collect();
    (!texts.is_empty()).then(|| texts.join("\n"))
}

/// The script (the latest user text block: consecutive user messages share one turn, and
/// the newest is the one to play) and how many model requests of this turn came before.
fn script_and_step(req: &ModelRequest) -> (String, usize) {
    let mut steps_done = 0;
    for m in req.messages.iter().rev() {
        match m.role {
            Role::Assistant => steps_done += 1,
            Role::User => {
                let latest = m.content.iter().rev().find_map(|b| {
                    let t = b.get("text").and_then(Value::as_str)?;
                    (b.get("type").and_then(Value::as_str) == Some("text")
                        && !t.starts_with(SYSTEM_PREFIX)
                        && !t.trim().is_empty())
                    .then(|| t.to_string())
                });
                if let Some(t) = latest {
                    return (t, steps_done);
                }
            }
        }
    }
    (String::new(), steps_done)
}

/// `script` with each `{{result.KEY}}` replaced by member `KEY` of `result` read as a JSON
/// object, so a later call can pass on what an earlier one returned (an id, say).
fn with_result_members(script: &str, result: Option<&str>) -> String {
    const OPEN: &str = "{{result.";
    if !script.contains(OPEN) {
        return script.to_string();
    }
    let parsed: Option<Value> = result.and_then(|r| serde_json::from_str(r).ok());
    let mut out = String::with_capacity(script.len());
    let mut rest = script;
    while let Some(at) = rest.find(OPEN) {
        out.push_str(&rest[..at]);
        let after = &rest[at + OPEN.len()..];
        let Some(close) = after.find("}}") else {
            out.push_str(&rest[at..]);
            return out;
        };
        let member = parsed.as_ref().and_then(|v| v.get(&after[..close]));
        match member {
            Some(Value::String(s)) => out.push_str(s),
            Some(v) => out.push_str(&v.to_string()),
            None => {}
        }
        rest = &after[close + 2..];
    }
    out.push_str(rest);
    out
}

/// The grader's answer when the request is an outcome's grading (its message opens with the
/// `<outcome_evaluation iteration="n">` marker Mast's grader writes), from the rubric's
/// `grade` lines, and how long to take over it.
fn grader_answer(script: &str) -> Option<(String, u64)> {
    let rest = script.strip_prefix("<outcome_evaluation iteration=\"")?;
    let iteration: usize = rest.split('"').next()?.parse().ok()?;
    let rubric = script
        .split_once("<rubric>")
        .and_then(|(_, r)| r.split_once("</rubric>"))
        .map_or("", |(r, _)| r);
    let lines = || {
        rubric
            .lines()
            .filter_map(|l| l.trim().strip_prefix("grade "))
    };
    let sleep_ms = lines()
        .find_map(|l| l.trim().strip_prefix("sleep ")?.trim().parse().ok())
        .unwrap_or(0);
    let grades: Vec<&str> = lines()
        .filter(|l| !l.trim().starts_with("sleep "))
        .collect();
    let Some(line) = grades.get(iteration).or(grades.last()) else {
        let v = json!({"result": "satisfied", "explanation": "No `grade` lines: satisfied."});
        return Some((v.to_string(), sleep_ms));
    };
    let (result, explanation) = line.trim().split_once(' ').unwrap_or((line.trim(), ""));
    if result == "raw" {
        return Some((explanation.to_string(), sleep_ms));
    }
    let v = json!({"result": result, "explanation": explanation});
    Some((v.to_string(), sleep_ms))
}

fn estimate_tokens(chars: usize) -> i64 {
    (chars / 4 + 1) as i64
}

/// The scripted answer to a summarisation request: short and deterministic, so a test can
/// recognise it in later requests; usage is estimated like any other request's.
fn summary(req: &ModelRequest) -> ModelResponse {
    let chars: usize = req
        .messages
        .iter()
        .flat_map(|m| &m.content)
        .map(json_len)
        .sum();
    let text = format!("Scripted summary of {chars} characters of earlier conversation.");
    ModelResponse {
        usage: ModelUsage {
            input_tokens: estimate_tokens(chars + super::summarise::SYSTEM.len()),
            output_tokens: estimate_tokens(text.len()),
            ..ModelUsage::default()
        },
        content: vec![json!({"type": "text", "text": text})],
        stop_reason: "end_turn".into(),
        stop_details: None,
    }
}

#[async_trait]
impl ModelClient for Scripted {
    async fn complete(
        &self,
        req: &ModelRequest,
        deltas: DeltaSink<'_>,
    ) -> Result<ModelResponse, ModelError> {
        if req.system.as_deref() == Some(super::summarise::SYSTEM) {
            return Ok(summary(req));
        }
        let (script, step_index) = script_and_step(req);
        if let Some((verdict, sleep_ms)) = grader_answer(&script) {
            tokio::time::sleep(Duration::from_millis(sleep_ms)).await;
            let usage = ModelUsage {
                input_tokens: estimate_tokens(script.len()),
                output_tokens: estimate_tokens(verdict.len()),
                ..ModelUsage::default()
            };
            deltas(Delta::Text {
                index: 0,
                text: verdict.clone(),
            });
            return Ok(ModelResponse {
                content: vec![json!({"type": "text", "text": verdict})],
                stop_reason: "end_turn".into(),
                stop_details: None,
                usage,
            });
        }
        let result = latest_tool_result(req);
        let script = with_result_members(&script, result.as_deref());
        let directive = script.lines().any(|l| is_directive(l.trim()));
        let step = if directive {
            let steps =
                parse_steps(&script).map_err(|e| ModelError::fatal(ErrorKind::RequestFailed, e))?;
            steps.into_iter().nth(step_index).unwrap_or_else(|| Step {
                say: vec![result.clone().unwrap_or_else(|| "Done.".into())],
                ..Step::default()
            })
        } else {
            Step {
                say: vec![format!("You said: {script}")],
                ..Step::default()
            }
        };
        let mut content = Vec::new();
        if step.think {
            deltas(Delta::ThinkingStarted);
            content.push(json!({"type": "thinking", "thinking": "Following the script.", "signature": "scripted"}));
        }
        let text = step
            .say
            .join("\n")
            .replace("{{result}}", result.as_deref().unwrap_or(""));
        if !text.is_empty() {
            let words: Vec<&str> = text.split_inclusive(' ').collect();
            let pause = Duration::from_millis(step.sleep_ms / words.len().max(1) as u64);
            for w in &words {
                if !pause.is_zero() {
                    tokio::time::sleep(pause).await;
                }
                deltas(Delta::Text {
                    index: 0,
                    text: (*w).to_string(),
                });
            }
            content.push(json!({"type": "text", "text": text}));
        } else if step.sleep_ms > 0 {
            tokio::time::sleep(Duration::from_millis(step.sleep_ms)).await;
        }
        for (i, (name, input)) in step.calls.iter().enumerate() {
            content.push(json!({"type": "tool_use", "id": format!("toolu_scripted_{step_index}_{i}"), "name": name, "input": input}));
        }
        let stop_reason = if step.refuse {
            "refusal"
        } else if step.calls.is_empty() {
            "end_turn"
        } else {
            "tool_use"
        };
        let prompt_chars =
            req.sized.total(&req.messages) + req.system.as_deref().map_or(0, str::len);
        Ok(ModelResponse {
            content,
            stop_reason: stop_reason.to_string(),
            stop_details: step.refuse.then(|| json!({"type": "refusal", "category": null, "explanation": "The script asked to refuse."})),
            usage: ModelUsage {
                input_tokens: estimate_tokens(prompt_chars),
                output_tokens: estimate_tokens(text.len()),
                ..ModelUsage::default()
            },
        })
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn result_members_pass_on_what_a_call_returned() {
        let result = r#"{"id": "wrun_1", "n": 3}"#;
        assert_eq!(
            super::with_result_members(
                "stop {{result.id}} of {{result.n}}{{result.none}}.",
                Some(result)
            ),
            "stop wrun_1 of 3."
        );
        assert_eq!(super::with_result_members("x {{result.id}}", None), "x ");
        assert_eq!(
            super::with_result_members("say {{result}}", Some(result)),
            "say {{result}}"
        );
    }

    #[test]
    fn plays_the_grader_from_the_rubric() {
        let req = |iteration: u32, rubric: &str| {
            format!(
                "<outcome_evaluation iteration=\"{iteration}\">\n<rubric>\n{rubric}\n</rubric>\n<transcript>\nUSER: grade satisfied no\n</transcript>"
            )
        };
        let rubric =
            "- criteria\ngrade sleep 5\ngrade needs_revision Add tests.\ngrade satisfied Good.";
        let (a, ms) = super::grader_answer(&req(0, rubric)).unwrap();
        assert_eq!(ms, 5);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&a).unwrap(),
            serde_json::json!({"result": "needs_revision", "explanation": "Add tests."})
        );
        // The last verdict repeats; the transcript's text is not the rubric.
        let (a, _) = super::grader_answer(&req(5, rubric)).unwrap();
        assert!(a.contains("\"satisfied\"") && a.contains("Good."), "{a}");
        let (a, _) = super::grader_answer(&req(0, "grade raw not json")).unwrap();
        assert_eq!(a, "not json");
        let (a, ms) = super::grader_answer(&req(0, "no verdicts")).unwrap();
        assert!(a.contains("satisfied") && ms == 0, "{a}");
        // An agent's own request is not a grading.
        assert!(super::grader_answer("say hi\ngrade satisfied x").is_none());
    }

    use super::*;
    use crate::{Message, SizedPrefix};

    fn req(messages: Vec<Message>) -> ModelRequest {
        ModelRequest {
            model: MODEL_ID.into(),
            system: None,
            messages,
            tools: Default::default(),
            max_tokens: 100,
            effort: None,
            fast: false,
            inference_geo: None,
            sized: SizedPrefix::default(),
        }
    }

    fn user(t: &str) -> Message {
        Message {
            role: Role::User,
            content: vec![json!({"type":"text","text":t})],
        }
    }

    #[tokio::test]
    async fn echoes_and_plays_steps() {
        let none = |_: Delta| {};
        let r = Scripted
            .complete(&req(vec![user("hello")]), &none)
            .await
            .unwrap();
        assert_eq!(r.content[0]["text"], "You said: hello");
        assert_eq!(r.stop_reason, "end_turn");

        let script = "call get_weather {\"city\":\"Paris\"}\n---\nsay It is {{result}}.";
        let r = Scripted
            .complete(&req(vec![user(script)]), &none)
            .await
            .unwrap();
        assert_eq!(r.stop_reason, "tool_use");
        assert_eq!(r.content[0]["input"], json!({"city":"Paris"}));
        let after = vec![
            user(script),
            Message {
                role: Role::Assistant,
                content: r.content.clone(),
            },
            Message {
                role: Role::User,
                content: vec![
                    json!({"type":"tool_result","tool_use_id":"x","content":[{"type":"text","text":"sunny"}]}),
                ],
            },
        ];
        let r = Scripted.complete(&req(after), &none).await.unwrap();
        assert_eq!(r.content[0]["text"], "It is sunny.");
        assert_eq!(r.stop_reason, "end_turn");
    }
}
