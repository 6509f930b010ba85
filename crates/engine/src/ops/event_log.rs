//! Reading a session's log: pages of its view or of one thread, the whole transcript as JSON
//! lines, and the position a stream starts from. Streams themselves (framing, keep-alives,
//! credentials) belong to the API; what they read comes from here.

use std::collections::HashMap;
use std::sync::Arc;

use futures_util::Stream;
use serde_json::json;

use super::OpError;
use crate::Engine;
use crate::hub::Subscription;
use mast_domain::invalid::Invalid;
use mast_domain::query::{Direction, EventFilter, Scan};
use mast_domain::session::SessionBodyHead;
use mast_store::{SessionRecord, Store, StoreError};

pub use mast_store::EventRecord;

/// How many events a transcript reads at a time.
const TRANSCRIPT_PAGE: i64 = 500;

/// A read-only handle on session logs, for a stream catching up on what it missed.
#[derive(Clone)]
pub struct EventLog {
    store: Arc<dyn Store>,
}

impl EventLog {
    /// The current time, on the store's clock (for what the stream itself stamps).
    pub fn now(&self) -> mast_domain::time::Micros {
        self.store.clock().now()
    }

    /// Up to `limit` events of session `id` after sequence number `after`, every thread's.
    pub async fn after(
        &self,
        id: &str,
        after: i64,
        limit: i64,
    ) -> Result<Vec<EventRecord>, StoreError> {
        self.store.events_after(id, after, &[], limit).await
    }
}

/// Where a stream of a session starts: subscribed before the session was read, so nothing
/// committed after `last_seq` can be missed.
pub struct StreamStart {
    /// Live events from the moment of subscribing.
    pub subscription: Subscription,
    /// The thread the stream follows (the primary thread for a session's view).
    pub thread: String,
    /// Whether delegates' cross-posted events show (a session's view).
    pub crossposts: bool,
    /// The last event already sent: stored events after it are read before live ones.
    pub last_seq: i64,
    /// Whether stored events after `last_seq` must be read first (a resumed stream).
    pub catching_up: bool,
    /// Where those stored events are read.
    pub log: EventLog,
}

impl Engine {
    /// The session row of workspace `ws`, or `SessionNotFound`.
    async fn session_row(&self, ws: &str, id: &str) -> Result<SessionRecord, OpError> {
        self.inner
            .store
            .get_session(ws, id)
            .await?
            .ok_or_else(|| OpError::SessionNotFound(id.to_string()))
    }

    /// The environment session `id` of workspace `ws` runs in, if the session exists.
    pub async fn session_environment(&self, ws: &str, id: &str) -> Result<Option<String>, OpError> {
        Ok(self
            .inner
            .store
            .get_session(ws, id)
            .await?
            .map(|s| s.environment_id))
    }

    /// A page of session `id`'s view: its primary thread and what delegates cross-post to
    /// it, narrowed by `filter` (whose thread fields are the view's own).
    pub async fn list_session_events(
        &self,
        ws: &str,
        id: &str,
        filter: EventFilter,
        scan: &Scan<i64>,
    ) -> Result<Vec<EventRecord>, OpError> {
        let rec = self.session_row(ws, id).await?;
        let filter = EventFilter {
            thread_id: Some(primary_thread(&rec)?),
            crossposts: true,
            ..filter
        };
        Ok(self.inner.store.list_events(id, &filter, scan).await?)
    }

    /// A page of thread `tid`'s own events in session `id`.
    pub async fn list_thread_events(
        &self,
        ws: &str,
        id: &str,
        tid: &str,
        scan: &Scan<i64>,
    ) -> Result<Vec<EventRecord>, OpError> {
        self.session_row(ws, id).await?;
        self.require_thread(id, tid).await?;
        let filter = EventFilter {
            thread_id: Some(tid.to_string()),
            ..Default::default()
        };
        Ok(self.inner.store.list_events(id, &filter, scan).await?)
    }

    /// `ThreadNotFound` unless session `id` has thread `tid`.
    pub async fn require_thread(&self, id: &str, tid: &str) -> Result<(), OpError> {
        match self.inner.store.get_thread(id, tid).await? {
            Some(_) => Ok(()),
            None => Err(OpError::ThreadNotFound(tid.to_string())),
        }
    }

    /// Subscribes to session `id` and says where a stream of it starts: of its view (`thread`
    /// None) or of one thread's own log, after event `after` when resuming.
    pub async fn open_stream(
        &self,
        ws: &str,
        id: &str,
        thread: Option<String>,
        after: Option<&str>,
        previews: bool,
    ) -> Result<StreamStart, OpError> {
        // Subscribe before reading the session, so nothing committed from here on can be missed.
        let subscription = self.inner.hub.subscribe(id, previews);
        let rec = self.session_row(ws, id).await?;
        let primary = primary_thread(&rec)?;
        let mut start = StreamStart {
            subscription,
            crossposts: thread.is_none(),
            thread: thread.unwrap_or(primary),
            last_seq: rec.last_seq,
            catching_up: false,
            log: self.event_log(),
        };
        if let Some(after) = after {
            let ev = self
                .inner
                .store
                .get_event(id, after)
                .await?
                .ok_or_else(|| {
                    Invalid::new(format!(
                        "`after` / Last-Event-ID: no event `{after}` in this session"
                    ))
                })?;
            start.last_seq = ev.seq;
            start.catching_up = true;
        }
        Ok(start)
    }

    /// A read-only handle on session logs.
    pub fn event_log(&self) -> EventLog {
        EventLog {
            store: self.inner.store.clone(),
        }
    }

    /// Session `id`'s whole transcript, every thread included: one stored event per JSON
    /// line with `thread_id`, `parent_thread_id` and `spawning_event_id`, in order. Read a
    /// page at a time, so a long session's transcript never sits in memory whole.
    pub async fn transcript(
        &self,
        ws: &str,
        id: &str,
    ) -> Result<impl Stream<Item = Result<String, StoreError>> + Send + 'static, OpError> {
        let rec = self.session_row(ws, id).await?;
        let primary = primary_thread(&rec)?;
        let threads = self
            .inner
            .store
            .list_threads(
                id,
                &Scan {
                    after: None,
                    direction: Direction::Ascending,
                    // A session has at most a primary thread, 25 open delegates and the ended ones.
                    limit: 100_000,
                },
            )
            .await?;
        let lineage: HashMap<String, (Option<String>, Option<String>)> = threads
            .into_iter()
            .map(|t| (t.id, (t.parent_thread_id, t.spawning_event_id)))
            .collect();
        let (store, id) = (self.inner.store.clone(), id.to_string());
        Ok(futures_util::stream::unfold(Some(0i64), move |after| {
            let (store, id, primary, lineage) =
                (store.clone(), id.clone(), primary.clone(), lineage.clone());
            async move {
                let after = after?;
                let batch = match store.events_after(&id, after, &[], TRANSCRIPT_PAGE).await {
                    Ok(b) => b,
                    Err(e) => return Some((Err(e), None)),
                };
                if batch.is_empty() {
                    return None;
                }
                let next = (batch.len() as i64 == TRANSCRIPT_PAGE)
                    .then(|| batch.last().map_or(after, |e| e.seq));
                let mut chunk = String::new();
                for e in &batch {
                    let thread = e.thread_id.clone().unwrap_or_else(|| primary.clone());
                    let (parent, spawned_by) =
                        lineage.get(&thread).cloned().unwrap_or((None, None));
                    let mut line = e.wire();
                    line["thread_id"] = json!(thread);
                    line["parent_thread_id"] = json!(parent);
                    line["spawning_event_id"] = json!(spawned_by);
                    chunk.push_str(&line.to_string());
                    chunk.push('\n');
                }
                Some((Ok(chunk), next))
            }
        }))
    }
}

/// The primary thread a session's row names.
fn primary_thread(rec: &SessionRecord) -> Result<String, OpError> {
    Ok(serde_json::from_str::<SessionBodyHead>(&rec.body)
        .map_err(StoreError::from)?
        .primary_thread_id)
}
