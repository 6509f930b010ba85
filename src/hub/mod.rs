//! In-process fan-out of committed events to stream subscribers, one topic per session.
//!
//! Publishing never blocks: a subscriber that falls behind the channel's capacity is told it
//! lagged and re-reads what it missed from the store, so nothing is dropped silently.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::broadcast;

use crate::store::EventRecord;

pub mod work;

/// Items a subscriber may fall behind before it re-reads from the store. Each topic allocates
/// this many slots, so it stays modest: many sessions may be watched at once.
const CAPACITY: usize = 256;

type Topics = Arc<Mutex<HashMap<String, Topic>>>;

/// A committed event with its wire JSON, serialized once for every subscriber.
#[derive(Debug)]
pub struct Published {
    pub record: EventRecord,
    pub json: String,
}

/// What a topic carries.
#[derive(Debug, Clone)]
pub enum HubItem {
    /// A committed event.
    Event(Arc<Published>),
    /// A stream-only preview frame (`event_start` / `event_delta`) of a thread; never stored.
    Preview {
        thread_id: String,
        of: &'static str,
        frame: Arc<Value>,
    },
    /// The session was deleted: send `session.deleted` and close.
    Deleted,
}

struct Topic {
    tx: broadcast::Sender<HubItem>,
    previewers: Arc<AtomicUsize>,
}

/// The fan-out hub shared by the API and the engine.
#[derive(Default)]
pub struct Hub {
    topics: Topics,
    /// Wake-ups for workers polling self-hosted environments.
    pub work: work::WorkSignals,
}

/// A live subscription to a session's topic; the topic goes away with its last subscriber.
pub struct Subscription {
    rx: Option<broadcast::Receiver<HubItem>>,
    previewers: Option<Arc<AtomicUsize>>,
    topics: Topics,
    session_id: String,
}

impl Subscription {
    /// The next item (or how far this subscriber fell behind).
    pub async fn recv(&mut self) -> Result<HubItem, broadcast::error::RecvError> {
        match &mut self.rx {
            Some(rx) => rx.recv().await,
            None => Err(broadcast::error::RecvError::Closed),
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(p) = &self.previewers {
            p.fetch_sub(1, Ordering::Relaxed);
        }
        drop(self.rx.take());
        let mut topics = self.topics.lock().expect("hub lock");
        if topics
            .get(&self.session_id)
            .is_some_and(|t| t.tx.receiver_count() == 0)
        {
            topics.remove(&self.session_id);
        }
    }
}

impl Hub {
    /// Subscribes to a session; `previews` marks a subscriber that wants preview frames.
    pub fn subscribe(&self, session_id: &str, previews: bool) -> Subscription {
        let mut topics = self.topics.lock().expect("hub lock");
        let topic = topics
            .entry(session_id.to_string())
            .or_insert_with(|| Topic {
                tx: broadcast::channel(CAPACITY).0,
                previewers: Arc::new(AtomicUsize::new(0)),
            });
        let previewers = previews.then(|| {
            topic.previewers.fetch_add(1, Ordering::Relaxed);
            topic.previewers.clone()
        });
        Subscription {
            rx: Some(topic.tx.subscribe()),
            topics: self.topics.clone(),
            session_id: session_id.to_string(),
            previewers,
        }
    }

    fn send(&self, session_id: &str, item: HubItem) {
        let mut topics = self.topics.lock().expect("hub lock");
        if let Some(topic) = topics.get(session_id)
            && topic.tx.send(item).is_err()
        {
            // Nobody listens any more; drop the topic so idle sessions hold nothing.
            topics.remove(session_id);
        }
    }

    /// Publishes committed events, in order. Sessions nobody watches cost a map lookup.
    pub fn publish(&self, session_id: &str, events: &[EventRecord]) {
        if events.is_empty()
            || !self
                .topics
                .lock()
                .expect("hub lock")
                .contains_key(session_id)
        {
            return;
        }
        for e in events {
            let json = e.wire().to_string();
            self.send(
                session_id,
                HubItem::Event(Arc::new(Published {
                    record: e.clone(),
                    json,
                })),
            );
        }
    }

    /// Whether any subscriber of the session wants preview frames (so the engine can skip
    /// building them otherwise).
    pub fn wants_previews(&self, session_id: &str) -> bool {
        let topics = self.topics.lock().expect("hub lock");
        topics
            .get(session_id)
            .is_some_and(|t| t.previewers.load(Ordering::Relaxed) > 0)
    }

    /// Publishes a preview frame of `of` (`agent.message` or `agent.thinking`).
    pub fn preview(&self, session_id: &str, thread_id: &str, of: &'static str, frame: Value) {
        self.send(
            session_id,
            HubItem::Preview {
                thread_id: thread_id.to_string(),
                of,
                frame: Arc::new(frame),
            },
        );
    }

    /// Tells subscribers the session is gone.
    pub fn deleted(&self, session_id: &str) {
        self.send(session_id, HubItem::Deleted);
        self.topics.lock().expect("hub lock").remove(session_id);
    }

    /// Number of sessions with live subscribers (for metrics and tests).
    pub fn topic_count(&self) -> usize {
        self.topics.lock().expect("hub lock").len()
    }
}
