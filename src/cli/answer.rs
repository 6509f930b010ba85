//! `mast sessions answer SESSION [TOOL_USE_ID]`: answers a tool call a session waits on —
//! a custom tool's result (`user.custom_tool_result`) or a confirmation of a call whose
//! permission policy asks (`user.tool_confirmation`).
//!
//! Without an id it answers the one call the session waits on that the answer fits, as the
//! session's latest `session.status_idle` (`requires_action`) lists them; what each call is
//! comes from the log. Several such calls, or none, are refused with what there is, since
//! answering the wrong call cannot be taken back. A named id is sent as given (an answer may
//! come before the session idles), unless the log shows it needs the other kind of answer.

use std::collections::HashSet;
use std::process::ExitCode;

use serde_json::{Value, json};

use super::ServerArgs;
use super::client::{Api, CallError};
use super::sessions::{follow_until_idle, latest_status, waiting_on};

/// How `mast sessions answer` answers.
#[derive(Debug, Clone, clap::Args)]
#[command(group(clap::ArgGroup::new("answer").required(true).args(["result", "allow", "deny"])))]
pub struct AnswerArgs {
    /// The session's id.
    pub session_id: String,
    /// The tool call's id (the `sevt_…` of its `agent.custom_tool_use` or `agent.tool_use`
    /// event); left out, the call the session waits on.
    pub tool_use_id: Option<String>,
    /// A custom tool's result, as text (`-` reads it from stdin).
    #[arg(long, value_name = "TEXT")]
    pub result: Option<String>,
    /// With --result: the tool failed, and TEXT says how.
    #[arg(long, requires = "result")]
    pub error: bool,
    /// Confirm a call that waits for permission: it runs.
    #[arg(long)]
    pub allow: bool,
    /// Refuse a call that waits for permission: it does not run, and the model is told.
    #[arg(long)]
    pub deny: bool,
    /// With --deny: why, passed to the model.
    #[arg(long, value_name = "M", requires = "deny")]
    pub message: Option<String>,
    /// Follow the session's events until it is idle again (exit 1 as `send --wait` does).
    #[arg(long)]
    pub wait: bool,
    /// With --wait: print raw events, one JSON object a line.
    #[arg(long)]
    pub json: bool,
}

/// The answer given on the command line.
#[derive(Debug, Clone, PartialEq)]
pub enum Answer {
    /// A custom tool's result.
    Result {
        /// What the tool returned.
        text: String,
        /// Whether it failed.
        is_error: bool,
    },
    /// Let the call run.
    Allow,
    /// Refuse the call.
    Deny {
        /// Why, for the model.
        message: Option<String>,
    },
}

/// What a waiting call needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// A custom tool's result.
    Result,
    /// A confirmation (`allow` or `deny`).
    Confirmation,
    /// A self-hosted environment's tool result, which its worker sends.
    WorkerResult,
    /// Not found in the log: the server decides.
    Unknown,
}

impl Need {
    fn fits(self, answer: &Answer) -> bool {
        match self {
            Need::Result => matches!(answer, Answer::Result { .. }),
            Need::Confirmation => !matches!(answer, Answer::Result { .. }),
            Need::WorkerResult => false,
            Need::Unknown => true,
        }
    }

    /// How to answer such a call, for messages.
    fn how(self) -> &'static str {
        match self {
            Need::Result => "a custom tool's result: --result TEXT",
            Need::Confirmation => "a confirmation: --allow or --deny",
            Need::WorkerResult => {
                "a self-hosted tool's result, which the environment's worker sends"
            }
            Need::Unknown => "an answer",
        }
    }
}

/// A tool call the session waits on.
#[derive(Debug, Clone, PartialEq)]
pub struct Pending {
    /// Its event id, which the answer names.
    pub id: String,
    /// What it needs.
    pub need: Need,
    /// The tool and its input, for messages.
    pub label: String,
}

impl Pending {
    fn describe(&self) -> String {
        format!("{} ({}; {})", self.id, self.label, self.need.how())
    }
}

/// The calls `waiting` lists, in that order, told apart by the tool-use events and the
/// confirmations of `events`: a custom tool's call needs a result; a call whose policy asked
/// needs a confirmation until it has one, and then (only in a self-hosted environment can it
/// still wait) its worker's result; any other waiting call is a self-hosted one.
pub fn classify(waiting: &[String], events: &[Value]) -> Vec<Pending> {
    let confirmed: HashSet<&str> = events
        .iter()
        .filter(|e| e["type"] == "user.tool_confirmation")
        .filter_map(|e| e["tool_use_id"].as_str())
        .collect();
    waiting
        .iter()
        .map(|id| {
            let Some(e) = events
                .iter()
                .find(|e| e["id"].as_str() == Some(id.as_str()))
            else {
                return Pending {
                    id: id.clone(),
                    need: Need::Unknown,
                    label: "not in the log".into(),
                };
            };
            let need = match e["type"].as_str() {
                Some("agent.custom_tool_use") => Need::Result,
                Some("agent.tool_use" | "agent.mcp_tool_use")
                    if e["evaluated_permission"] == "ask" && !confirmed.contains(id.as_str()) =>
                {
                    Need::Confirmation
                }
                Some("agent.tool_use") => Need::WorkerResult,
                _ => Need::Unknown,
            };
            let name = match e["mcp_server_name"].as_str() {
                Some(server) => format!("{server}/{}", e["name"].as_str().unwrap_or("?")),
                None => e["name"].as_str().unwrap_or("?").to_string(),
            };
            Pending {
                id: id.clone(),
                need,
                label: super::table::cell(&format!("{name} {}", e["input"]), 80),
            }
        })
        .collect()
}

/// Which call `answer` goes to: `given`, unless the log shows it needs another kind of
/// answer; else the one waiting call the answer fits. `state` says what the session is
/// doing, for the refusal when nothing waits.
pub fn choose(
    pending: &[Pending],
    given: Option<&str>,
    answer: &Answer,
    state: &str,
) -> Result<String, String> {
    if let Some(id) = given {
        return match pending.iter().find(|p| p.id == id) {
            Some(p) if !p.need.fits(answer) => Err(format!("{id} waits for {}", p.need.how())),
            _ => Ok(id.to_string()),
        };
    }
    if pending.is_empty() {
        return Err(format!("nothing waits for an answer: {state}"));
    }
    let fitting: Vec<&Pending> = pending.iter().filter(|p| p.need.fits(answer)).collect();
    let all = pending
        .iter()
        .map(Pending::describe)
        .collect::<Vec<_>>()
        .join("; ");
    match fitting.as_slice() {
        [one] => Ok(one.id.clone()),
        [] if pending.len() == 1 => Err(format!("the session waits on {all}")),
        [] => Err(format!(
            "none of the calls the session waits on takes this answer: {all}"
        )),
        several => Err(format!(
            "the session waits on {} calls: {all}; name the one to answer (mast sessions answer SESSION TOOL_USE_ID …)",
            several.len()
        )),
    }
}

/// The event that answers call `id`.
pub fn event(answer: &Answer, id: &str) -> Value {
    match answer {
        Answer::Result { text, is_error } => {
            let mut e = json!({"type": "user.custom_tool_result", "custom_tool_use_id": id});
            // An empty text block is not valid content; no content is.
            if !text.is_empty() {
                e["content"] = json!([{"type": "text", "text": text}]);
            }
            if *is_error {
                e["is_error"] = json!(true);
            }
            e
        }
        Answer::Allow => {
            json!({"type": "user.tool_confirmation", "tool_use_id": id, "result": "allow"})
        }
        Answer::Deny { message } => {
            let mut e =
                json!({"type": "user.tool_confirmation", "tool_use_id": id, "result": "deny"});
            if let Some(m) = message {
                e["deny_message"] = json!(m);
            }
            e
        }
    }
}

/// What a session is doing, from its latest status event, for the refusal when nothing
/// waits.
fn state(status: Option<&Value>) -> String {
    let Some(e) = status else {
        return "the session has not run yet".into();
    };
    match e["type"].as_str() {
        Some("session.status_running") => "the session is running".into(),
        Some("session.status_terminated") => "the session is terminated".into(),
        _ => format!(
            "the session is idle ({})",
            e["stop_reason"]["type"].as_str().unwrap_or("?")
        ),
    }
}

/// The tool-use events and confirmations that tell the waiting calls apart, newest first,
/// read back until every waiting call is found (they are near the end of the log).
async fn calls_in_log(
    api: &Api,
    session_id: &str,
    waiting: &[String],
) -> Result<Vec<Value>, CallError> {
    let mut found = Vec::new();
    let mut missing: HashSet<&str> = waiting.iter().map(String::as_str).collect();
    let mut cursor: Option<String> = None;
    let path = format!("/v1/sessions/{session_id}/events");
    let query = [
        ("order", "desc"),
        ("limit", "100"),
        ("types[]", "agent.custom_tool_use"),
        ("types[]", "agent.tool_use"),
        ("types[]", "agent.mcp_tool_use"),
        ("types[]", "user.tool_confirmation"),
    ];
    while !missing.is_empty() {
        let (events, next) = api.page(&path, &query, cursor.as_deref()).await?;
        for e in &events {
            if let Some(id) = e["id"].as_str() {
                missing.remove(id);
            }
        }
        found.extend(events);
        match next {
            Some(n) => cursor = Some(n),
            None => break,
        }
    }
    Ok(found)
}

/// Answers a call; prints the sent event's id, or with `--wait` follows the session until it
/// is idle again.
pub async fn answer(server: &ServerArgs, args: &AnswerArgs) -> anyhow::Result<ExitCode> {
    let answer = match (&args.result, args.allow) {
        (Some(text), _) => Answer::Result {
            text: if text == "-" {
                std::io::read_to_string(std::io::stdin())?
            } else {
                text.clone()
            },
            is_error: args.error,
        },
        (None, true) => Answer::Allow,
        (None, false) => Answer::Deny {
            message: args.message.clone(),
        },
    };
    let api = Api::new(server)?;
    let sid = args.session_id.as_str();
    let status = latest_status(&api, sid).await?;
    let waiting = waiting_on(status.as_ref());
    let pending = classify(&waiting, &calls_in_log(&api, sid, &waiting).await?);
    let id = choose(
        &pending,
        args.tool_use_id.as_deref(),
        &answer,
        &state(status.as_ref()),
    )
    .map_err(|why| anyhow::anyhow!("{why}"))?;
    if args.tool_use_id.is_none()
        && let Some(p) = pending.iter().find(|p| p.id == id)
    {
        eprintln!("mast: answering {} ({})", p.id, p.label);
    }
    let sent = api
        .post(
            &format!("/v1/sessions/{sid}/events"),
            &json!({"events": [event(&answer, &id)]}),
        )
        .await?;
    let sent_id = sent["data"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if !args.wait {
        println!("{sent_id}");
        return Ok(ExitCode::SUCCESS);
    }
    follow_until_idle(api, sid, sent_id, args.json).await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, need: Need) -> Pending {
        Pending {
            id: id.into(),
            need,
            label: "tool {}".into(),
        }
    }

    #[test]
    fn waiting_calls_are_told_apart_by_the_log() {
        let events = [
            json!({"id": "sevt_5", "type": "user.tool_confirmation", "tool_use_id": "sevt_4", "result": "allow"}),
            json!({"id": "sevt_4", "type": "agent.tool_use", "name": "bash", "input": {}, "evaluated_permission": "ask"}),
            json!({"id": "sevt_3", "type": "agent.mcp_tool_use", "name": "search", "mcp_server_name": "docs",
                   "input": {"q": "x"}, "evaluated_permission": "ask"}),
            json!({"id": "sevt_2", "type": "agent.tool_use", "name": "read", "input": {}, "evaluated_permission": "allow"}),
            json!({"id": "sevt_1", "type": "agent.custom_tool_use", "name": "get_weather", "input": {"city": "Oslo"}}),
        ];
        let waiting: Vec<String> = ["sevt_1", "sevt_3", "sevt_4", "sevt_2", "sevt_9"]
            .map(String::from)
            .to_vec();
        let got: Vec<(String, Need, String)> = classify(&waiting, &events)
            .into_iter()
            .map(|p| (p.id, p.need, p.label))
            .collect();
        let want = [
            ("sevt_1", Need::Result, "get_weather {\"city\":\"Oslo\"}"),
            ("sevt_3", Need::Confirmation, "docs/search {\"q\":\"x\"}"),
            // Confirmed, and still waiting: a self-hosted call, whose worker answers.
            ("sevt_4", Need::WorkerResult, "bash {}"),
            ("sevt_2", Need::WorkerResult, "read {}"),
            ("sevt_9", Need::Unknown, "not in the log"),
        ]
        .map(|(id, need, label)| (id.to_string(), need, label.to_string()));
        assert_eq!(got, want);
    }

    /// Waiting calls, the id named, the answer, and the call chosen or the refusal's start.
    type Case<'a> = (
        Vec<Pending>,
        Option<&'a str>,
        &'a Answer,
        Result<&'a str, &'a str>,
    );

    #[test]
    fn the_answer_goes_to_the_one_call_it_fits_or_is_refused() {
        let result = Answer::Result {
            text: "sunny".into(),
            is_error: false,
        };
        let allow = Answer::Allow;
        let custom = call("sevt_1", Need::Result);
        let ask = call("sevt_2", Need::Confirmation);
        let ask2 = call("sevt_3", Need::Confirmation);
        let worker = call("sevt_4", Need::WorkerResult);
        let idle = "the session is idle (end_turn)";
        let table: &[Case] = &[
            (vec![custom.clone()], None, &result, Ok("sevt_1")),
            (
                vec![custom.clone(), ask.clone()],
                None,
                &result,
                Ok("sevt_1"),
            ),
            (
                vec![custom.clone(), ask.clone()],
                None,
                &allow,
                Ok("sevt_2"),
            ),
            (vec![custom.clone()], Some("sevt_1"), &result, Ok("sevt_1")),
            // Not (yet) waiting: the server decides.
            (vec![], Some("sevt_7"), &allow, Ok("sevt_7")),
            (
                vec![custom.clone()],
                Some("sevt_1"),
                &allow,
                Err("sevt_1 waits for a custom tool's result: --result TEXT"),
            ),
            (
                vec![],
                None,
                &result,
                Err("nothing waits for an answer: the session is idle (end_turn)"),
            ),
            (
                vec![ask.clone(), ask2.clone()],
                None,
                &allow,
                Err(
                    "the session waits on 2 calls: sevt_2 (tool {}; a confirmation: --allow or --deny); sevt_3",
                ),
            ),
            (
                vec![custom.clone()],
                None,
                &allow,
                Err("the session waits on sevt_1 (tool {}; a custom tool's result: --result TEXT)"),
            ),
            (
                vec![worker.clone(), custom.clone()],
                None,
                &allow,
                Err("none of the calls the session waits on takes this answer: sevt_4"),
            ),
            (
                vec![worker.clone()],
                Some("sevt_4"),
                &result,
                Err(
                    "sevt_4 waits for a self-hosted tool's result, which the environment's worker sends",
                ),
            ),
        ];
        for (pending, given, answer, want) in table {
            let got = choose(pending, *given, answer, idle);
            match want {
                Ok(id) => assert_eq!(got.as_deref(), Ok(*id), "{given:?} {answer:?}"),
                Err(start) => {
                    let e = got.expect_err(start);
                    assert!(e.starts_with(start), "{e}");
                }
            }
        }
    }

    #[test]
    fn answers_become_the_api_events() {
        let r = Answer::Result {
            text: "no such city".into(),
            is_error: true,
        };
        assert_eq!(
            event(&r, "sevt_1"),
            json!({"type": "user.custom_tool_result", "custom_tool_use_id": "sevt_1",
                   "content": [{"type": "text", "text": "no such city"}], "is_error": true})
        );
        let empty = Answer::Result {
            text: String::new(),
            is_error: false,
        };
        assert_eq!(
            event(&empty, "sevt_1"),
            json!({"type": "user.custom_tool_result", "custom_tool_use_id": "sevt_1"})
        );
        assert_eq!(
            event(&Answer::Allow, "sevt_2"),
            json!({"type": "user.tool_confirmation", "tool_use_id": "sevt_2", "result": "allow"})
        );
        let deny = Answer::Deny {
            message: Some("not on main".into()),
        };
        assert_eq!(
            event(&deny, "sevt_2"),
            json!({"type": "user.tool_confirmation", "tool_use_id": "sevt_2", "result": "deny",
                   "deny_message": "not on main"})
        );
    }
}
