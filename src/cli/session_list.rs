//! `mast sessions list`: the workspace's sessions, newest first, as a table or JSON. The
//! table says why each idle session stopped — the session object does not, so it is read
//! from each idle session's latest status event — and marks the ones waiting on the user
//! (idle in `requires_action`), which is what someone looking at the list wants to find.

use futures_util::{StreamExt as _, TryStreamExt as _};
use serde_json::Value;

use super::ServerArgs;
use super::client::Api;
use super::names::{self, Kind};
use super::sessions::{latest_status, waiting_on};
use super::table;

/// How many sessions' status events are read at once.
const LOOKUPS: usize = 8;

/// What `mast sessions list` shows.
#[derive(Debug, Clone, clap::Args)]
pub struct ListArgs {
    /// Only sessions of this agent (its id or its name).
    #[arg(long)]
    pub agent: Option<String>,
    /// Only sessions in this status.
    #[arg(long, value_parser = ["idle", "running", "rescheduling", "terminated"])]
    pub status: Option<String>,
    /// At most this many (the newest); all of them when left out.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: Option<u32>,
    /// Print the API's session objects as one JSON array instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// The STOP cell of a session, given its latest status event (read for idle sessions only):
/// the stop reason, or the marker of a session waiting on the user.
pub fn stop_cell(session: &Value, status: Option<&Value>) -> String {
    if session["status"] != "idle" {
        return "-".into();
    }
    let waiting = waiting_on(status);
    match waiting.len() {
        0 => status
            .and_then(|e| e["stop_reason"]["type"].as_str())
            .unwrap_or("-")
            .to_string(),
        1 => "WAITING ON YOU (1 call)".into(),
        n => format!("WAITING ON YOU ({n} calls)"),
    }
}

/// Lists sessions: a table on stdout (and on stderr how to answer the waiting ones), or the
/// JSON array.
pub async fn list(server: &ServerArgs, args: &ListArgs) -> anyhow::Result<()> {
    let api = Api::new(server)?;
    let agent_id = match &args.agent {
        Some(a) => Some(
            names::resolve(&api, Kind::Agent, a).await?["id"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        ),
        None => None,
    };
    let mut query: Vec<(&str, &str)> = Vec::new();
    if let Some(a) = &agent_id {
        query.push(("agent_id", a));
    }
    if let Some(s) = &args.status {
        query.push(("statuses[]", s));
    }
    let sessions = api
        .list("/v1/sessions", &query, 100, args.limit.map(|l| l as usize))
        .await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&sessions)?);
        return Ok(());
    }
    if sessions.is_empty() {
        eprintln!("no sessions on {} match", api.base());
        return Ok(());
    }
    let api = &api;
    let statuses: Vec<Option<Value>> = futures_util::stream::iter(&sessions)
        .map(|s| async move {
            if s["status"] == "idle" {
                latest_status(api, s["id"].as_str().unwrap_or_default()).await
            } else {
                Ok(None)
            }
        })
        .buffered(LOOKUPS)
        .try_collect()
        .await?;
    let mut waiting = 0;
    let rows: Vec<Vec<String>> = sessions
        .iter()
        .zip(&statuses)
        .map(|(s, status)| {
            if !waiting_on(status.as_ref()).is_empty() && s["status"] == "idle" {
                waiting += 1;
            }
            vec![
                s["id"].as_str().unwrap_or("?").to_string(),
                s["status"].as_str().unwrap_or("?").to_string(),
                stop_cell(s, status.as_ref()),
                table::cell(s["agent"]["name"].as_str().unwrap_or_default(), 30),
                table::cell(s["title"].as_str().unwrap_or_default(), 40),
                table::short_time(s["updated_at"].as_str().unwrap_or_default()),
            ]
        })
        .collect();
    print!(
        "{}",
        table::render(
            &["ID", "STATUS", "STOP", "AGENT", "TITLE", "UPDATED"],
            &rows
        )
    );
    if waiting > 0 {
        eprintln!(
            "mast: {waiting} session{} wait{} on you: `mast sessions answer SESSION --result TEXT` (a custom tool) \
             or `--allow` / `--deny` (a confirmation) answers",
            if waiting == 1 { "" } else { "s" },
            if waiting == 1 { "s" } else { "" },
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_stop_cell_marks_sessions_waiting_on_the_user() {
        let idle = |reason: Value| json!({"type": "session.status_idle", "stop_reason": reason});
        let one = idle(json!({"type": "requires_action", "event_ids": ["sevt_1"]}));
        let two = idle(json!({"type": "requires_action", "event_ids": ["sevt_1", "sevt_2"]}));
        let done = idle(json!({"type": "end_turn"}));
        let running = json!({"type": "session.status_running"});
        // (the session's status, its latest status event, the cell)
        let table: &[(&str, Option<&Value>, &str)] = &[
            ("idle", Some(&one), "WAITING ON YOU (1 call)"),
            ("idle", Some(&two), "WAITING ON YOU (2 calls)"),
            ("idle", Some(&done), "end_turn"),
            ("idle", Some(&running), "-"),
            ("idle", None, "-"),
            ("running", Some(&one), "-"),
            ("terminated", None, "-"),
        ];
        for (status, event, want) in table {
            assert_eq!(
                stop_cell(&json!({"status": status}), *event),
                *want,
                "{status} {event:?}"
            );
        }
    }
}
