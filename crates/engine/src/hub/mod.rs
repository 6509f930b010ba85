//! In-process fan-out of committed events to stream subscribers, one topic per session.
//!
//! Publishing never blocks: a subscriber that falls behind the channel's capacity is told it
//! lagged and re-reads what it missed from the store, so nothing is dropped silently. With
//! several replicas, what is published here is also told to the others as a [`Signal`]
//! (through the outbox), and their subscribers read the events from the store.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;
use tokio::sync::{broadcast, mpsc};

use mast_store::EventRecord;

pub mod work;

pub use mast_store::signal::Signal;

/// Items a subscriber may fall behind before it re-reads from the store. Each topic allocates
/// this many slots, so it stays modest: many sessions may be watched at once.
const CAPACITY: usize = 256;

type Topics = Arc<Mutex<HashMap<String, Topic>>>;

/// A committed event with its wire JSON, serialized once for every subscriber.
#[derive(Debug)]
pub struct Published {
    pub seq: i64,
    pub id: String,
    pub kind: String,
    pub thread_id: Option<String>,
    /// A child thread's event that names its thread, so it shows on the session's stream
    /// too.
    pub crosspost: bool,
    /// The event as clients see it ([`EventRecord::wire_json`]).
    pub json: String,
}

/// What a topic carries.
#[derive(Debug, Clone)]
pub enum HubItem {
    /// A committed event.
    Event(Arc<Published>),
    /// Events up to this sequence number were committed elsewhere (another replica): read
    /// them from the store.
    Appended(i64),
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
    /// Where signals for the other replicas go (as payloads naming this replica), when
    /// there are others.
    outbox: OnceLock<(String, mpsc::Sender<String>)>,
    /// When another replica was last heard from (see [`since_start`]; 0 = never): a replica
    /// alone on its database sends nothing but its hellos.
    peer_heard_at: AtomicI64,
    /// Bumped whenever API keys may have changed in the store (a signal said so, or signals
    /// may have been missed): key lookups cached before then are not trusted.
    keys_epoch: AtomicU64,
    /// Whether key changes are being heard (the replica signal listener is connected).
    /// Hook changes are announced on the same channel, so this says the same of them.
    keys_heard: AtomicBool,
    /// Bumped whenever hooks may have changed in the store (see [`Hub::hooks_changed`]).
    hooks_epoch: AtomicU64,
}

/// How long after the last word from another replica this one keeps signalling.
const PEER_TTL_MICROS: i64 = 10_000_000;

/// Microseconds on a monotonic clock since this process first asked, plus one (so never 0).
/// Whether a peer spoke lately is a duration this process measures, which a step of the wall
/// clock must not change, and no timestamp anyone sees; so it is not read from the store's
/// clock.
fn since_start() -> i64 {
    static START: OnceLock<std::time::Instant> = OnceLock::new();
    START
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_micros() as i64
        + 1
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

/// One log line per session status change: every committed event passes through
/// [`Hub::publish`], so this is where an operator's `info` log learns what sessions do.
fn log_status_changes(session_id: &str, events: &[EventRecord]) {
    for e in events {
        let Some(status) = e.kind.strip_prefix("session.status_") else {
            continue;
        };
        match e.body.pointer("/stop_reason/type").and_then(|v| v.as_str()) {
            Some(reason) => tracing::info!(
                session_id,
                status,
                stop_reason = reason,
                "session is {status} ({reason})"
            ),
            None => tracing::info!(session_id, status, "session is {status}"),
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

    /// Sends what this replica (`origin`) publishes to the other replicas too.
    pub fn connect_outbox(&self, origin: &str, tx: mpsc::Sender<String>) {
        let _ = self.outbox.set((origin.to_string(), tx));
    }

    /// Tells the other replicas, if any. Never waits: when the outbox is full the signal is
    /// dropped, and the others' periodic check finds what it said.
    pub fn tell(&self, signal: Signal) {
        let heard = self.peer_heard_at.load(Ordering::Relaxed);
        let alone = heard == 0 || since_start() - heard > PEER_TTL_MICROS;
        if alone && !matches!(signal, Signal::Hello { .. }) {
            return;
        }
        if let Some((origin, tx)) = self.outbox.get()
            && tx.try_send(signal.encode(origin)).is_err()
        {
            tracing::debug!(?signal, "replica outbox full; the others will catch up");
        }
    }

    /// Notes that another replica spoke; true when none had for a while (a newcomer, which
    /// deserves a hello at once).
    pub fn heard_peer(&self) -> bool {
        let now = since_start();
        let heard = self.peer_heard_at.swap(now, Ordering::Relaxed);
        heard == 0 || now - heard > PEER_TTL_MICROS
    }

    /// Publishes committed events, in order. Sessions nobody watches cost a map lookup.
    pub fn publish(&self, session_id: &str, events: &[EventRecord]) {
        log_status_changes(session_id, events);
        if let Some(last) = events.last() {
            self.tell(Signal::Appended {
                session_id: session_id.to_string(),
                seq: last.seq,
            });
        }
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
            let json = e.wire_json();
            self.send(
                session_id,
                HubItem::Event(Arc::new(Published {
                    seq: e.seq,
                    id: e.id.clone(),
                    kind: e.kind.clone(),
                    thread_id: e.thread_id.clone(),
                    crosspost: e.crossposts(),
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

    /// Tells this replica's subscribers that events up to `seq` were committed elsewhere.
    pub fn poke(&self, session_id: &str, seq: i64) {
        self.send(session_id, HubItem::Appended(seq));
    }

    /// Sessions with subscribers here.
    pub fn watched(&self) -> Vec<String> {
        self.topics
            .lock()
            .expect("hub lock")
            .keys()
            .cloned()
            .collect()
    }

    /// Tells subscribers (here and on the other replicas) the session is gone.
    pub fn deleted(&self, session_id: &str) {
        self.tell(Signal::Deleted {
            session_id: session_id.to_string(),
        });
        self.deleted_here(session_id);
    }

    /// Tells this replica's subscribers the session is gone.
    pub fn deleted_here(&self, session_id: &str) {
        self.send(session_id, HubItem::Deleted);
        self.topics.lock().expect("hub lock").remove(session_id);
    }

    /// Wakes polls waiting on the environment's queue, here and on the other replicas.
    pub fn work_queued(&self, environment_id: &str) {
        self.tell(Signal::WorkQueued {
            environment_id: environment_id.to_string(),
        });
        self.work.queued(environment_id);
    }

    /// Notes that API keys may have changed: cached lookups from before are stale.
    pub fn keys_changed(&self) {
        self.keys_epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// The current key epoch (see [`Hub::keys_changed`]), or None while key changes cannot be
    /// heard (nothing cached may be trusted then).
    pub fn keys_epoch(&self) -> Option<u64> {
        self.keys_heard
            .load(Ordering::SeqCst)
            .then(|| self.keys_epoch.load(Ordering::SeqCst))
    }

    /// Notes that hooks may have changed: cached hook lists from before are stale.
    pub fn hooks_changed(&self) {
        self.hooks_epoch.fetch_add(1, Ordering::SeqCst);
    }

    /// The current hook epoch (see [`Hub::hooks_changed`]), or None while changes cannot be
    /// heard (nothing cached may be trusted then).
    pub fn hooks_epoch(&self) -> Option<u64> {
        self.keys_heard
            .load(Ordering::SeqCst)
            .then(|| self.hooks_epoch.load(Ordering::SeqCst))
    }

    /// Notes whether key and hook changes are heard from now on; either way, what was
    /// cached before may have missed one.
    pub fn keys_heard(&self, heard: bool) {
        self.keys_changed();
        self.hooks_changed();
        self.keys_heard.store(heard, Ordering::SeqCst);
    }

    /// Number of stream subscribers connected here.
    pub fn subscriber_count(&self) -> usize {
        let topics = self.topics.lock().expect("hub lock");
        topics.values().map(|t| t.tx.receiver_count()).sum()
    }

    /// Number of sessions with live subscribers (for metrics and tests).
    pub fn topic_count(&self) -> usize {
        self.topics.lock().expect("hub lock").len()
    }
}
