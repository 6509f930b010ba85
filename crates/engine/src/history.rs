//! What a thread's loop knows of its log, kept between the session's wakes so a turn deep into
//! a long session costs about what an early one does.
//!
//! A loop reads its thread's events once and folds them into a [`Transcript`]; when it ends
//! cleanly it leaves both here, and the next loop of that thread on this replica starts from
//! them and reads only the events appended since ([`Known::last_seq`]). Nothing else is
//! needed to keep this correct under lease loss and replicas, because a logged event never
//! changes once it is consumed: the store appends events in sequence order under the
//! session's row lock, and the only later change to an event is queued input being consumed
//! (`processed_at` set, with its position or a discard mark). So an entry is valid exactly
//! while none of its events is unconsumed input, and:
//!
//! - an entry holding unconsumed input is never kept (another replica may consume it);
//! - an entry whose loop consumed input itself is never kept either: the loop placed that
//!   input at the position it saw, and the store records the position at commit, which may
//!   lie later, so the log — not this copy — says where it sits;
//! - a loop that ends with an error (a lost lease, a failed commit, shutdown) keeps nothing:
//!   its copy may hold changes the store never committed;
//! - an entry is taken out while a loop uses it, so two loops never share one.
//!
//! Events another replica appended meanwhile are simply the tail the next loop reads. The
//! alternative, a checkpoint of the context in the store, would put a second copy of the
//! conversation in the log's transaction; this cache costs nothing on the write path, and a
//! miss (a fresh process, an evicted entry) only means reading the log as before.
//!
//! The cache is bounded by an estimate of its entries' size and by a number of entries, and
//! evicts the least recently used. The count bounds what many small entries cost (sessions
//! idle after a turn or two, whose JSON values weigh more in memory than the estimate says):
//! a replica with more recently used threads than that reads the older ones' logs again.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use serde_json::Value;

use super::context::Transcript;
use mast_store::EventRecord;

/// Default bound on the bytes (estimated) the cache holds.
pub const DEFAULT_BUDGET: usize = 64 << 20;

/// Bound on the number of entries the cache holds.
pub const MAX_ENTRIES: usize = 4096;

/// A thread's log as one loop left it.
#[derive(Debug, Clone, Default)]
pub struct Known {
    /// The thread's events of the loop kinds, in sequence order.
    pub events: Vec<EventRecord>,
    /// The highest sequence number read (of any thread of the session).
    pub last_seq: i64,
    /// `events` folded.
    pub transcript: Transcript,
    /// The estimated size of `events` (see [`event_size`]), kept as events are added so an
    /// entry's size costs nothing to know.
    pub bytes: usize,
}

impl Known {
    /// Whether every event is settled, so the entry stays true whoever writes next.
    pub fn settled(&self) -> bool {
        self.events.iter().all(|e| e.processed_at.is_some())
    }
}

/// A rough size in bytes of an event and the transcript's copy of its content.
pub fn event_size(e: &EventRecord) -> usize {
    256 + 2 * (approx_size(&e.body) + e.internal.as_ref().map_or(0, approx_size))
}

/// A cheap estimate of a JSON value's size in memory.
fn approx_size(v: &Value) -> usize {
    match v {
        Value::String(s) => 32 + s.len(),
        Value::Array(a) => 32 + a.iter().map(approx_size).sum::<usize>(),
        Value::Object(o) => {
            32 + o
                .iter()
                .map(|(k, v)| 32 + k.len() + approx_size(v))
                .sum::<usize>()
        }
        _ => 16,
    }
}

type Key = (String, String);

/// The context size of a kept entry, as the loop would estimate it before a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Estimate {
    /// The log position the entry covers.
    pub last_seq: i64,
    /// [`Transcript::reported_estimate`].
    pub tokens: u64,
}

struct Entry {
    known: Known,
    used: u64,
}

#[derive(Default)]
struct State {
    entries: HashMap<Key, Entry>,
    /// Entries by last use, oldest first.
    order: BTreeMap<u64, Key>,
    bytes: usize,
    tick: u64,
}

/// Threads' known logs by session and thread, least recently used evicted first.
pub struct History {
    budget: usize,
    max_entries: usize,
    state: Mutex<State>,
}

impl History {
    /// An empty cache holding at most about `budget` bytes, in [`MAX_ENTRIES`] entries.
    pub fn new(budget: usize) -> Self {
        Self::bounded(budget, MAX_ENTRIES)
    }

    /// An empty cache holding at most about `budget` bytes, in `max_entries` entries.
    pub fn bounded(budget: usize, max_entries: usize) -> Self {
        History {
            budget,
            max_entries: max_entries.max(1),
            state: Mutex::new(State::default()),
        }
    }

    /// Takes the entry of `thread` in `session` out of the cache, if there is one.
    pub fn take(&self, session: &str, thread: &str) -> Option<Known> {
        let mut s = self.state.lock().expect("history lock");
        let e = s
            .entries
            .remove(&(session.to_string(), thread.to_string()))?;
        s.order.remove(&e.used);
        s.bytes -= e.known.bytes;
        Some(e.known)
    }

    /// What the entry of `thread` in `session` says of the thread's context, if it has a
    /// provider's count to go on, without taking it out (see `engine::fast_start`).
    pub fn estimate(&self, session: &str, thread: &str) -> Option<Estimate> {
        let s = self.state.lock().expect("history lock");
        let e = s.entries.get(&(session.to_string(), thread.to_string()))?;
        Some(Estimate {
            last_seq: e.known.last_seq,
            tokens: e.known.transcript.reported_estimate()?,
        })
    }

    /// Keeps what a loop knows of its thread, when it is settled and fits the budget.
    pub fn put(&self, session: &str, thread: &str, known: Known) {
        if !known.settled() {
            return;
        }
        let size = known.bytes;
        if size > self.budget / 4 {
            return;
        }
        let key = (session.to_string(), thread.to_string());
        let mut s = self.state.lock().expect("history lock");
        s.tick += 1;
        let used = s.tick;
        if let Some(old) = s.entries.remove(&key) {
            s.order.remove(&old.used);
            s.bytes -= old.known.bytes;
        }
        while s.bytes + size > self.budget || s.entries.len() >= self.max_entries {
            let Some((_, oldest)) = s.order.pop_first() else {
                break;
            };
            if let Some(e) = s.entries.remove(&oldest) {
                s.bytes -= e.known.bytes;
            }
        }
        s.order.insert(used, key.clone());
        s.entries.insert(key, Entry { known, used });
        s.bytes += size;
    }

    /// Estimated bytes held.
    pub fn bytes(&self) -> usize {
        self.state.lock().expect("history lock").bytes
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn known(seq: i64, processed: bool) -> Known {
        let mut k = Known {
            events: vec![EventRecord {
                session_id: "s".into(),
                seq,
                id: format!("sevt_{seq}"),
                thread_id: None,
                kind: "user.message".into(),
                body: json!({"content": [{"type": "text", "text": "x".repeat(1000)}]}),
                internal: None,
                processed_at: processed.then_some(1),
                created_at: 1,
            }],
            last_seq: seq,
            transcript: Transcript::default(),
            bytes: 0,
        };
        k.bytes = k.events.iter().map(event_size).sum();
        k
    }

    #[test]
    fn unsettled_entries_are_not_kept() {
        let h = History::new(DEFAULT_BUDGET);
        h.put("s", "t", known(1, false));
        assert!(h.take("s", "t").is_none());
        h.put("s", "t", known(1, true));
        assert_eq!(h.take("s", "t").map(|k| k.last_seq), Some(1));
        assert!(h.take("s", "t").is_none(), "taking removes the entry");
        assert_eq!(h.bytes(), 0);
    }

    #[test]
    fn an_entry_over_a_quarter_of_the_budget_is_not_kept() {
        let one = known(1, true).bytes;
        let h = History::new(one * 4);
        h.put("s", "t", known(1, true));
        assert!(h.take("s", "t").is_some(), "a quarter of the budget fits");
        let h = History::new(one * 4 - 1);
        h.put("s", "t", known(1, true));
        assert!(h.take("s", "t").is_none(), "more than a quarter is dropped");
        assert_eq!(h.bytes(), 0);
    }

    #[test]
    fn at_most_so_many_entries_are_kept() {
        let h = History::bounded(DEFAULT_BUDGET, 3);
        for s in ["a", "b", "c", "d"] {
            h.put(s, "t", known(1, true));
        }
        assert!(h.take("a", "t").is_none(), "the oldest went");
        for s in ["b", "c", "d"] {
            assert!(h.take(s, "t").is_some(), "{s} kept");
        }
        // Putting an entry back in place of itself evicts nothing.
        let h = History::bounded(DEFAULT_BUDGET, 1);
        h.put("a", "t", known(1, true));
        h.put("a", "t", known(2, true));
        assert_eq!(h.take("a", "t").map(|k| k.last_seq), Some(2));
    }

    #[test]
    fn least_recently_used_entries_go_first() {
        let one = known(1, true).bytes;
        let h = History::new(one * 4);
        for s in ["a", "b", "c", "d"] {
            h.put(s, "t", known(1, true));
        }
        // `a` is used again, so `b` is now the oldest.
        let a = h.take("a", "t").unwrap();
        h.put("a", "t", a);
        h.put("e", "t", known(1, true));
        assert!(h.take("b", "t").is_none());
        for s in ["a", "c", "d", "e"] {
            assert!(h.take(s, "t").is_some(), "{s} kept");
        }
        assert_eq!(h.bytes(), 0);
    }
}
