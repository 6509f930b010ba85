//! Webhook records and the outbox's one entry point.
//!
//! **Emitting a webhook event** is one call inside the transaction that makes the change it
//! reports: build a [`WebhookEvent`] (`WebhookEvent::new("deployment.paused", ws, &id)`) and
//! hand it to the backend's `emit` (`postgres::webhooks::push_emit` as a `WITH` part or
//! `postgres::webhooks::emit` on a transaction; `sqlite::webhooks::emit` on the writer's
//! connection), or, outside any transaction of yours, [`super::WebhookStore::emit_webhook_events`].
//! `emit` writes one `webhook_deliveries` row per enabled endpoint of the workspace that
//! wants the type (a cheap indexed check; an event nobody wants writes nothing), so a crash
//! can neither lose an event whose change committed nor invent one whose change did not.

use mast_domain::time::{self, Micros};

/// The organization id in every payload: Mast has one organization per server.
pub const ORGANIZATION_ID: &str = "org_mast";

/// One event about to be written to the outbox.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookEvent {
    /// The envelope's `id` (`wevt_…`), sent as `webhook-id`.
    pub id: String,
    /// `data.type`, one of [`mast_domain::webhook::EVENT_TYPES`].
    pub kind: String,
    pub workspace_id: String,
    /// `data.id`: the object the event is about.
    pub object_id: String,
    /// Further `data` fields (`session_thread_id`, `vault_id`).
    pub extra: Vec<(&'static str, String)>,
}

impl WebhookEvent {
    /// An event of `kind` about the object `object_id` of workspace `ws`; its `created_at`
    /// is the time the backend writes it to the outbox, on the store's clock.
    pub fn new(kind: &str, ws: &str, object_id: &str) -> Self {
        Self::with(kind, ws, object_id, &[])
    }

    /// The same with extra `data` fields (`session_thread_id`, `vault_id`).
    pub fn with(kind: &str, ws: &str, object_id: &str, extra: &[(&'static str, &str)]) -> Self {
        WebhookEvent {
            id: mast_domain::ids::new_id("wevt"),
            kind: kind.to_string(),
            workspace_id: ws.to_string(),
            object_id: object_id.to_string(),
            extra: extra.iter().map(|(k, v)| (*k, v.to_string())).collect(),
        }
    }

    /// The exact body sent: the `BetaWebhookEvent` envelope, compact JSON with its keys in
    /// order. Rendered only where an endpoint may want it: most events of a busy session
    /// are wanted by none, and building each one's JSON was a visible share of a turn.
    pub fn payload(&self, created_at: Micros) -> String {
        let mut data: Vec<(&str, &str)> = vec![
            ("type", &self.kind),
            ("id", &self.object_id),
            ("organization_id", ORGANIZATION_ID),
            ("workspace_id", &self.workspace_id),
        ];
        data.extend(self.extra.iter().map(|(k, v)| (*k, v.as_str())));
        data.sort_by_key(|(k, _)| *k);
        let mut out = Vec::with_capacity(192);
        out.extend_from_slice(b"{\"created_at\":");
        json_str(&mut out, &time::format(created_at));
        out.extend_from_slice(b",\"data\":{");
        for (i, (k, v)) in data.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            json_str(&mut out, k);
            out.push(b':');
            json_str(&mut out, v);
        }
        out.extend_from_slice(b"},\"id\":");
        json_str(&mut out, &self.id);
        out.extend_from_slice(b",\"type\":\"event\"}");
        String::from_utf8(out).expect("JSON of strings is UTF-8")
    }
}

/// Appends `s` as a JSON string.
fn json_str(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(&mut *out, s).expect("a string always serialises");
}

/// A `vault_credential.*` event (its data names the vault too).
pub fn credential_event(kind: &str, ws: &str, vault_id: &str, id: &str) -> WebhookEvent {
    WebhookEvent::with(kind, ws, id, &[("vault_id", vault_id)])
}

/// The webhook events a session transaction's appended stream events and row change imply
/// (the one fan-out point for `session.*`: every change of a session goes through it).
pub fn session_events(
    ws: &str,
    session_id: &str,
    events: &[super::NewEvent],
    archived_now: bool,
) -> Vec<WebhookEvent> {
    let mut out = Vec::new();
    let thread = |e: &super::NewEvent| {
        e.body
            .get("session_thread_id")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    for e in events {
        let simple: &[&str] = match e.kind.as_str() {
            "session.status_running" => &["session.running", "session.status_run_started"],
            "session.status_rescheduled" => &["session.status_rescheduled"],
            "session.status_terminated" => &["session.status_terminated"],
            "session.updated" => &["session.updated"],
            "span.outcome_evaluation_end" => &["session.outcome_evaluation_ended"],
            "session.status_idle" => {
                out.push(WebhookEvent::new("session.idled", ws, session_id));
                out.push(WebhookEvent::new("session.status_idled", ws, session_id));
                match e.body.pointer("/stop_reason/type").and_then(|v| v.as_str()) {
                    Some("requires_action") => &["session.requires_action"],
                    Some("budget_reached") => &["session.budget_reached"],
                    _ => &[],
                }
            }
            "session.thread_created"
            | "session.thread_status_idle"
            | "session.thread_status_terminated" => {
                let kind = match e.kind.as_str() {
                    "session.thread_created" => "session.thread_created",
                    "session.thread_status_idle" => "session.thread_idled",
                    _ => "session.thread_terminated",
                };
                let tid = thread(e);
                out.push(WebhookEvent::with(
                    kind,
                    ws,
                    session_id,
                    &[("session_thread_id", &tid)],
                ));
                &[]
            }
            _ => &[],
        };
        for kind in simple {
            out.push(WebhookEvent::new(kind, ws, session_id));
        }
    }
    if archived_now {
        out.push(WebhookEvent::new("session.archived", ws, session_id));
    }
    out
}

/// A stored endpoint; its secrets sealed by the engine (never seen in clear here).
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointRecord {
    pub id: String,
    pub workspace_id: String,
    pub url: String,
    pub event_types: Vec<String>,
    pub description: Option<String>,
    pub enabled: bool,
    pub secret: Vec<u8>,
    pub previous_secret: Option<Vec<u8>>,
    pub previous_until: Option<Micros>,
    pub created_at: Micros,
    pub updated_at: Micros,
}

/// A delivery: one event for one endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct DeliveryRecord {
    /// Order of the outbox: an endpoint is sent its deliveries in `seq` order.
    pub seq: i64,
    pub id: String,
    pub endpoint_id: String,
    pub event_id: String,
    pub event_type: String,
    pub payload: String,
    /// `pending`, `delivered` or `failed`.
    pub state: String,
    pub attempts: i64,
    pub next_attempt_at: Micros,
    pub last_status: Option<i64>,
    pub last_error: Option<String>,
    pub created_at: Micros,
    pub updated_at: Micros,
}

/// One attempt, as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptRecord {
    pub id: String,
    pub delivery_id: String,
    pub attempted_at: Micros,
    pub status_code: Option<i64>,
    pub latency_ms: i64,
    pub error: Option<String>,
    pub next_retry_at: Option<Micros>,
}

/// What became of a delivery after an attempt.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum AttemptOutcome {
    /// The receiver answered 2xx.
    Delivered,
    /// Try again this long after now (database clock on Postgres).
    RetryIn(Micros),
    /// Retries ran out.
    Failed,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NewEvent;

    fn ev(kind: &str, body: serde_json::Value) -> NewEvent {
        NewEvent {
            id: "sevt_1".into(),
            thread_id: None,
            kind: kind.into(),
            body,
            internal: None,
            answers: None,
            processed_at: None,
        }
    }

    #[test]
    fn stream_events_map_to_webhook_types() {
        let got = session_events(
            "wrkspc_1",
            "sesn_1",
            &[
                ev("session.status_running", serde_json::json!({})),
                ev("agent.message", serde_json::json!({})),
                ev(
                    "session.status_idle",
                    serde_json::json!({"stop_reason": {"type": "requires_action", "event_ids": []}}),
                ),
                ev(
                    "session.thread_created",
                    serde_json::json!({"session_thread_id": "sthr_1"}),
                ),
            ],
            true,
        );
        let kinds: Vec<&str> = got.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(
            kinds,
            [
                "session.running",
                "session.status_run_started",
                "session.idled",
                "session.status_idled",
                "session.requires_action",
                "session.thread_created",
                "session.archived"
            ]
        );
        let p: serde_json::Value = serde_json::from_str(&got[5].payload(0)).unwrap();
        assert_eq!(p["type"], "event");
        assert_eq!(p["data"]["session_thread_id"], "sthr_1");
        assert_eq!(p["data"]["id"], "sesn_1");
        assert_eq!(p["data"]["workspace_id"], "wrkspc_1");
        assert_eq!(p["id"], got[5].id);
    }

    #[test]
    fn a_payload_is_compact_json_with_its_keys_in_order() {
        let mut e = WebhookEvent::with(
            "vault_credential.created",
            "wrkspc_1",
            "vcrd_1",
            &[("vault_id", "vlt_\"q\"")],
        );
        e.id = "wevt_1".into();
        let at = 1_700_000_000_000_000;
        let want = format!(
            "{{\"created_at\":\"{}\",\"data\":{{\"id\":\"vcrd_1\",\"organization_id\":\"org_mast\",\
             \"type\":\"vault_credential.created\",\"vault_id\":\"vlt_\\\"q\\\"\",\
             \"workspace_id\":\"wrkspc_1\"}},\"id\":\"wevt_1\",\"type\":\"event\"}}",
            time::format(at)
        );
        assert_eq!(e.payload(at), want);
        // The same bytes serde_json writes for the parsed value (sorted keys, compact).
        let parsed: serde_json::Value = serde_json::from_str(&e.payload(at)).unwrap();
        assert_eq!(parsed.to_string(), e.payload(at));
    }
}
