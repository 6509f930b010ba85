//! `mast sessions tail` and `mast send`: a session's events in the terminal, one readable
//! line each (or raw JSON), followed over the server's event stream. `sessions answer
//! --wait` follows with the same code, and what a session waits on (its latest status event)
//! is read here for `send`, `sessions list` and `sessions answer` alike.
//!
//! The follower keeps the id of the last event it printed and resumes after it
//! (`Last-Event-ID`) whenever the connection drops or the server restarts, so nothing is
//! missed and nothing printed twice. Where there is no such id yet (the whole log wanted, or
//! an empty session), it subscribes first and then lists the log, skipping on the stream what
//! the list already showed: anything committed in between is in one or the other.

use std::collections::HashSet;
use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use futures_util::StreamExt as _;
use serde_json::{Value, json};

use super::ServerArgs;
use super::client::{Api, CallError};
use crate::models::sse::SseDecoder;

/// The server pings an idle stream every 15 s; this much silence means the connection died
/// without closing (a half-open TCP connection).
const SILENCE: Duration = Duration::from_secs(45);
/// Longest wait between reconnection attempts.
const MAX_BACKOFF: Duration = Duration::from_secs(3);
/// Longest tool input or result shown on a readable line.
const SHORT: usize = 160;

/// Why following stopped.
#[derive(Debug, Clone, PartialEq)]
enum End {
    /// The session went idle (only when following until idle), with its stop reason.
    Idle(String),
    /// The session was terminated (only when following until idle).
    Terminated,
    /// The session was deleted.
    Deleted,
    /// Nobody reads the output any more (`| head`).
    Closed,
}

/// What is printed and when following ends.
struct Follower {
    api: Api,
    session_id: String,
    json: bool,
    until_idle: bool,
    /// The last event printed, or where to start: the stream resumes after it.
    cursor: Option<String>,
}

/// A failure while following: worth reconnecting for, or not.
enum Trouble {
    Transient(String),
    Fatal(anyhow::Error),
}

impl From<CallError> for Trouble {
    fn from(e: CallError) -> Self {
        if e.is_transient() {
            Trouble::Transient(e.to_string())
        } else {
            Trouble::Fatal(e.into())
        }
    }
}

impl Follower {
    /// Follows until an end, reconnecting with backoff through transient trouble.
    async fn run(&mut self) -> anyhow::Result<End> {
        let mut backoff = Duration::from_millis(200);
        let mut lost = false;
        loop {
            match self.follow_once(&mut lost).await {
                Ok(end) => return Ok(end),
                Err(Trouble::Fatal(e)) => return Err(e),
                Err(Trouble::Transient(why)) => {
                    if !lost {
                        eprintln!("mast: connection lost ({why}); reconnecting…");
                        lost = true;
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
            }
        }
    }

    /// One connection: opens the stream after the cursor, then prints until an end or until
    /// the connection fails.
    async fn follow_once(&mut self, lost: &mut bool) -> Result<End, Trouble> {
        let path = format!("/v1/sessions/{}/events/stream", self.session_id);
        let resp = self.api.stream(&path, self.cursor.as_deref()).await?;
        if *lost {
            eprintln!("mast: reconnected");
            *lost = false;
        }
        // Without a cursor, what is already in the log comes from the list; the stream (open
        // now) carries everything after, and may repeat the list's last events.
        let mut listed = HashSet::new();
        if self.cursor.is_none() {
            let events = self
                .api
                .list_all(&format!("/v1/sessions/{}/events", self.session_id), 1000)
                .await?;
            for e in events {
                let id = e["id"].as_str().unwrap_or_default().to_string();
                if let Some(end) = self.show(&e) {
                    return Ok(end);
                }
                listed.insert(id);
            }
        }
        let mut decoder = SseDecoder::default();
        let mut body = resp.bytes_stream();
        loop {
            let chunk = match tokio::time::timeout(SILENCE, body.next()).await {
                Err(_) => return Err(Trouble::Transient("the stream went silent".into())),
                Ok(None) => return Err(Trouble::Transient("the server closed the stream".into())),
                Ok(Some(Err(e))) => return Err(Trouble::Transient(e.to_string())),
                Ok(Some(Ok(chunk))) => chunk,
            };
            for frame in decoder.feed(&chunk) {
                match frame.event.as_deref() {
                    None | Some("ping" | "event_start" | "event_delta") => continue,
                    Some(_) => {}
                }
                let Ok(event) = serde_json::from_str::<Value>(&frame.data) else {
                    continue;
                };
                if let Some(id) = event["id"].as_str() {
                    if listed.remove(id) {
                        continue;
                    }
                    // The stream is past the list: nothing further can repeat it.
                    listed.clear();
                }
                if let Some(end) = self.show(&event) {
                    return Ok(end);
                }
            }
        }
    }

    /// Prints one event and moves the cursor past it; says when following ends here.
    fn show(&mut self, event: &Value) -> Option<End> {
        if let Some(id) = event["id"].as_str()
            && event["type"] != "session.deleted"
        {
            self.cursor = Some(id.to_string());
        }
        let line = if self.json {
            event.to_string()
        } else {
            readable(event)
        };
        let mut out = std::io::stdout().lock();
        if writeln!(out, "{line}").and_then(|_| out.flush()).is_err() {
            return Some(End::Closed);
        }
        match event["type"].as_str().unwrap_or_default() {
            "session.deleted" => Some(End::Deleted),
            "session.status_idle" if self.until_idle => Some(End::Idle(
                event["stop_reason"]["type"]
                    .as_str()
                    .unwrap_or("idle")
                    .to_string(),
            )),
            "session.status_terminated" if self.until_idle => Some(End::Terminated),
            _ => None,
        }
    }
}

/// Runs `f` until it finishes or Ctrl-C, which exits with the conventional 130.
async fn until_interrupted(
    f: impl std::future::Future<Output = anyhow::Result<ExitCode>>,
) -> anyhow::Result<ExitCode> {
    tokio::select! {
        r = f => r,
        _ = tokio::signal::ctrl_c() => Ok(ExitCode::from(130)),
    }
}

/// The latest event of a session, if it has any: where a live tail starts.
async fn latest_event(api: &Api, session_id: &str) -> Result<Option<String>, CallError> {
    let page = api
        .get(&format!(
            "/v1/sessions/{session_id}/events?order=desc&limit=1"
        ))
        .await?;
    Ok(page["data"][0]["id"].as_str().map(str::to_string))
}

/// `mast sessions tail ID`: follows until Ctrl-C (or the session is deleted).
pub async fn tail(
    server: &ServerArgs,
    session_id: &str,
    from_start: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let api = Api::new(server)?;
    until_interrupted(async {
        // Fails early, and plainly, on a wrong id or key.
        let cursor = if from_start {
            None
        } else {
            latest_event(&api, session_id).await?
        };
        let mut f = Follower {
            api,
            session_id: session_id.to_string(),
            json,
            until_idle: false,
            cursor,
        };
        match f.run().await? {
            End::Deleted => eprintln!("mast: the session was deleted"),
            End::Closed | End::Idle(_) | End::Terminated => {}
        }
        Ok(ExitCode::SUCCESS)
    })
    .await
}

/// `mast send ID TEXT [--wait]`: posts a user message; with `--wait`, follows the session from
/// that message until it is idle again (exit 0; exit 1 when the turn ran out of retries), or
/// terminated or deleted (exit 1).
pub async fn send(
    server: &ServerArgs,
    session_id: &str,
    text: &str,
    wait: bool,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let text = if text == "-" {
        std::io::read_to_string(std::io::stdin())?
    } else {
        text.to_string()
    };
    anyhow::ensure!(!text.trim().is_empty(), "the message is empty");
    let api = Api::new(server)?;
    if wait {
        // A session waiting on tool results or confirmations takes the message up only once
        // they arrive: say so rather than seem to hang.
        let ids = waiting_on(latest_status(&api, session_id).await?.as_ref());
        if !ids.is_empty() {
            eprintln!(
                "mast: the session waits for answers to {}; the message is handled after them",
                ids.join(", ")
            );
        }
    }
    let body =
        json!({"events": [{"type": "user.message", "content": [{"type": "text", "text": text}]}]});
    let sent = api
        .post(&format!("/v1/sessions/{session_id}/events"), &body)
        .await?;
    let id = sent["data"][0]["id"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    if !wait {
        println!("{id}");
        return Ok(ExitCode::SUCCESS);
    }
    follow_until_idle(api, session_id, id, json).await
}

/// Follows a session after the event `after` (what the caller just sent) until it is idle
/// again: exit 0, or 1 when the turn ran out of retries or the session was terminated or
/// deleted, so a script waiting on the turn does not read a failure as success; Ctrl-C
/// exits 130.
pub async fn follow_until_idle(
    api: Api,
    session_id: &str,
    after: String,
    json: bool,
) -> anyhow::Result<ExitCode> {
    until_interrupted(async {
        let mut f = Follower {
            api,
            session_id: session_id.to_string(),
            json,
            until_idle: true,
            cursor: Some(after),
        };
        Ok(match f.run().await? {
            // The turn gave up on the model: a script waiting on it must not read success.
            End::Idle(reason) if reason == "retries_exhausted" => {
                eprintln!("mast: the turn ended without an answer (retries_exhausted)");
                ExitCode::FAILURE
            }
            End::Idle(_) | End::Closed => ExitCode::SUCCESS,
            End::Terminated => {
                eprintln!("mast: the session was terminated");
                ExitCode::FAILURE
            }
            End::Deleted => {
                eprintln!("mast: the session was deleted");
                ExitCode::FAILURE
            }
        })
    })
    .await
}

/// The session's latest status event (`session.status_idle`, `…_running` or
/// `…_terminated`), if it has one: what it is doing now, and when idle, why.
pub async fn latest_status(api: &Api, session_id: &str) -> Result<Option<Value>, CallError> {
    let page = api
        .get(&format!(
            "/v1/sessions/{session_id}/events?order=desc&limit=1&types%5B%5D=session.status_idle\
             &types%5B%5D=session.status_running&types%5B%5D=session.status_terminated"
        ))
        .await?;
    Ok(page["data"].get(0).cloned())
}

/// The ids of the events a session waits on (its tool calls needing a result or a
/// confirmation), given its latest status event: none unless it is idle in
/// `requires_action`.
pub fn waiting_on(status: Option<&Value>) -> Vec<String> {
    let Some(e) = status else {
        return Vec::new();
    };
    if e["type"] != "session.status_idle" || e["stop_reason"]["type"] != "requires_action" {
        return Vec::new();
    }
    e["stop_reason"]["event_ids"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

/// The text of content blocks (`[{"type": "text", "text": …}, …]`), or a string.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .map(|b| match b["type"].as_str() {
                Some("text") => b["text"].as_str().unwrap_or_default().to_string(),
                Some(other) => format!("[{other}]"),
                None => String::new(),
            })
            .collect::<Vec<_>>()
            .join(" "),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// `s` on one line, cut to `max` characters.
fn short(s: &str, max: usize) -> String {
    let flat = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() <= max {
        return flat;
    }
    let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
    format!("{cut}…")
}

/// Token counts of a usage object.
fn tokens(usage: &Value) -> String {
    format!(
        "{} in, {} out tokens",
        usage["input_tokens"].as_i64().unwrap_or(0),
        usage["output_tokens"].as_i64().unwrap_or(0)
    )
}

/// One readable line for an event: its time, what kind of thing happened, and the gist.
/// Messages keep all their text (continuation lines indented under the first).
pub fn readable(e: &Value) -> String {
    let kind = e["type"].as_str().unwrap_or("?");
    // A user event is stored before its turn takes it up (`processed_at` null until then):
    // it is shown at the time it was seen.
    let stamp = e["processed_at"]
        .as_str()
        .map(str::to_string)
        .unwrap_or_else(|| {
            crate::domain::time::format(crate::domain::clock::Clock::system().now())
        });
    let time = stamp.get(11..19).unwrap_or("--:--:--");
    let error = |e: &Value| {
        if e["is_error"] == true {
            " (error)"
        } else {
            ""
        }
    };
    let (label, text) = match kind {
        "user.message" => ("user", text_of(&e["content"])),
        "agent.message" => ("agent", text_of(&e["content"])),
        "system.message" => ("system", text_of(&e["content"])),
        "agent.thinking" => ("thinking", "…".into()),
        "agent.tool_use" | "agent.mcp_tool_use" | "agent.custom_tool_use" => {
            let name = match e["mcp_server_name"].as_str() {
                Some(server) => format!("{server}/{}", e["name"].as_str().unwrap_or("?")),
                None => e["name"].as_str().unwrap_or("?").to_string(),
            };
            let custom = if kind == "agent.custom_tool_use" {
                " (custom: waits for your result)"
            } else {
                ""
            };
            (
                "tool",
                format!("{name} {}{custom}", short(&e["input"].to_string(), SHORT)),
            )
        }
        "agent.tool_result" | "agent.mcp_tool_result" => (
            "result",
            format!("{}{}", short(&text_of(&e["content"]), SHORT), error(e)),
        ),
        "user.tool_result" | "user.custom_tool_result" => (
            "user",
            format!(
                "result {}{}",
                short(&text_of(&e["content"]), SHORT),
                error(e)
            ),
        ),
        "user.tool_confirmation" => (
            "user",
            format!(
                "{} {}",
                e["result"].as_str().unwrap_or("?"),
                e["tool_use_id"].as_str().unwrap_or("")
            ),
        ),
        "user.interrupt" => ("user", "interrupt".into()),
        "session.status_running" => ("status", "running".into()),
        "session.status_idle" => {
            let reason = e["stop_reason"]["type"].as_str().unwrap_or("?");
            let waiting: Vec<&str> = e["stop_reason"]["event_ids"]
                .as_array()
                .map(|ids| ids.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            let text = if waiting.is_empty() {
                format!("idle ({reason})")
            } else {
                format!("idle ({reason}: {})", waiting.join(", "))
            };
            ("status", text)
        }
        "session.status_rescheduled" => ("status", "rescheduled (retrying)".into()),
        "session.status_terminated" => ("status", "terminated".into()),
        "session.deleted" => ("status", "deleted".into()),
        "session.error" => (
            "error",
            format!(
                "{}: {}",
                e["error"]["type"].as_str().unwrap_or("error"),
                e["error"]["message"].as_str().unwrap_or("")
            ),
        ),
        "span.model_request_start" => ("model", "request".into()),
        "span.model_request_end" => (
            "model",
            format!("done, {}{}", tokens(&e["model_usage"]), error(e)),
        ),
        "session.usage" => ("usage", format!("session total {}", tokens(&e["usage"]))),
        other => {
            let mut rest = e.clone();
            if let Some(o) = rest.as_object_mut() {
                for k in ["id", "type", "processed_at"] {
                    o.remove(k);
                }
            }
            (
                "event",
                format!("{other} {}", short(&rest.to_string(), SHORT)),
            )
        }
    };
    let thread = e["session_thread_id"]
        .as_str()
        .map(|t| format!("[{t}] "))
        .unwrap_or_default();
    let indent = " ".repeat(time.len() + 2 + 10);
    let body = text.trim_end().replace('\n', &format!("\n{indent}"));
    format!("{time}  {label:<9} {thread}{body}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readable_lines() {
        let t = "2026-12-01T05:25:02.955654Z";
        let msg = json!({"type": "agent.message", "processed_at": t, "id": "sevt_1",
            "content": [{"type": "text", "text": "two\nlines"}]});
        assert_eq!(
            readable(&msg),
            "05:25:02  agent     two\n                    lines"
        );
        let call = json!({"type": "agent.tool_use", "processed_at": t, "name": "bash",
            "input": {"command": "echo hi"}});
        assert_eq!(
            readable(&call),
            "05:25:02  tool      bash {\"command\":\"echo hi\"}"
        );
        let result = json!({"type": "agent.tool_result", "processed_at": t, "is_error": true,
            "content": [{"type": "text", "text": "x".repeat(500)}]});
        let line = readable(&result);
        assert!(line.ends_with("… (error)") && line.len() < 200, "{line}");
        let idle = json!({"type": "session.status_idle", "processed_at": t,
            "stop_reason": {"type": "requires_action", "event_ids": ["sevt_9"]}});
        assert_eq!(
            readable(&idle),
            "05:25:02  status    idle (requires_action: sevt_9)"
        );
        let err = json!({"type": "session.error", "processed_at": t,
            "error": {"type": "model_overloaded_error", "message": "busy"}});
        assert_eq!(
            readable(&err),
            "05:25:02  error     model_overloaded_error: busy"
        );
        let odd = json!({"type": "session.thread_created", "processed_at": t, "id": "x",
            "session_thread_id": "sthr_1"});
        assert_eq!(
            readable(&odd),
            "05:25:02  event     [sthr_1] session.thread_created {\"session_thread_id\":\"sthr_1\"}"
        );
    }
}
