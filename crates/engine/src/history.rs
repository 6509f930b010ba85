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
//! The cache is bounded by the heap its entries hold (`engine::heap_size`, held to a counting
//! allocator by the tests) and by a number of entries, and evicts the least recently used.
//! The count bounds what many small entries cost (sessions idle after a turn or two): a
//! replica with more recently used threads than that reads the older ones' logs again. An
//! entry holds what follows the thread's last compaction boundary (`engine::trim`), so a long
//! session that compacts keeps a bounded entry.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use super::context::Transcript;
use mast_store::EventRecord;

/// Default bound on the heap the cache's entries hold, in bytes.
pub const DEFAULT_BUDGET: usize = 64 << 20;

/// Bound on the number of entries the cache holds.
pub const MAX_ENTRIES: usize = 4096;

/// A thread's log as one loop left it.
#[derive(Debug, Clone, Default)]
pub struct Known {
    /// The thread's events of the loop kinds, in sequence order, from the last compaction
    /// boundary on (see `engine::trim`).
    pub events: Vec<EventRecord>,
    /// The highest sequence number read (of any thread of the session).
    pub last_seq: i64,
    /// `events` folded.
    pub transcript: Transcript,
    /// The heap of `events`' contents (their slots in the vector aside), kept as events are
    /// added so it costs nothing to know.
    pub bytes: usize,
    /// The whole entry's heap ([`Known::heap_size`]) as of when it was put in the cache.
    pub size: usize,
}

impl Known {
    /// Whether every event is settled, so the entry stays true whoever writes next.
    pub fn settled(&self) -> bool {
        self.events.iter().all(|e| e.processed_at.is_some())
    }

    /// The heap the entry holds: its events and its transcript.
    pub fn heap_size(&mut self) -> usize {
        self.bytes
            + self.events.capacity() * std::mem::size_of::<EventRecord>()
            + self.transcript.heap_size()
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
        s.bytes -= e.known.size;
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

    /// Keeps what a loop knows of its thread, when it is settled and fits the budget; its
    /// size is [`Known::size`].
    pub fn put(&self, session: &str, thread: &str, known: Known) {
        if !known.settled() {
            return;
        }
        let size = known.size;
        if size > self.budget / 4 {
            return;
        }
        let key = (session.to_string(), thread.to_string());
        let mut s = self.state.lock().expect("history lock");
        s.tick += 1;
        let used = s.tick;
        if let Some(old) = s.entries.remove(&key) {
            s.order.remove(&old.used);
            s.bytes -= old.known.size;
        }
        while s.bytes + size > self.budget || s.entries.len() >= self.max_entries {
            let Some((_, oldest)) = s.order.pop_first() else {
                break;
            };
            if let Some(e) = s.entries.remove(&oldest) {
                s.bytes -= e.known.size;
            }
        }
        s.order.insert(used, key.clone());
        s.entries.insert(key, Entry { known, used });
        s.bytes += size;
    }

    /// The heap the entries hold, in bytes.
    pub fn bytes(&self) -> usize {
        self.state.lock().expect("history lock").bytes
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;
    use crate::heap_size::HeapSize;

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
            size: 0,
        };
        k.bytes = k.events.iter().map(HeapSize::heap_size).sum();
        k.size = k.heap_size();
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
        let one = known(1, true).size;
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
        let one = known(1, true).size;
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

    /// The next event of a session's log, numbered after `seq`.
    fn logged(seq: &mut i64, kind: &str, body: Value, internal: Option<Value>) -> EventRecord {
        *seq += 1;
        EventRecord {
            session_id: "sesn_011CZkZmKVhYR6EdVzQ1vH3a".into(),
            seq: *seq,
            id: format!("sevt_011CZkZmKVhYR6Ed{seq:08}"),
            thread_id: None,
            kind: kind.into(),
            body,
            internal,
            processed_at: Some(1_765_000_000_000_000),
            created_at: 1_765_000_000_000_000,
        }
    }

    /// A model response's `span.model_request_end`, with its content kept privately.
    fn response(seq: &mut i64, start: &str, content: Value, stop: &str) -> EventRecord {
        logged(
            seq,
            "span.model_request_end",
            json!({"model_request_start_id": start, "is_error": false,
                "model_usage": {"input_tokens": 1200, "output_tokens": 20,
                "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}}),
            Some(json!({"content": content, "stop_reason": stop})),
        )
    }

    /// What a loop knows after `n` custom-tool round trips, folded as a loop folds them.
    fn round_trips(n: i64) -> Known {
        let mut k = Known::default();
        let mut seq = 0;
        for _ in 0..n {
            let text = json!({"type": "text", "text": "call get_weather {}\n---\nsay {{result}}"});
            let after = json!({"after_seq": seq});
            let input = logged(
                &mut seq,
                "user.message",
                json!({"content": [text]}),
                Some(after),
            );
            let start = logged(&mut seq, "span.model_request_start", json!({}), None);
            let use_id = format!("sevt_use_{seq}");
            let call =
                json!([{"type": "tool_use", "id": use_id, "name": "get_weather", "input": {}}]);
            let call = response(&mut seq, &start.id, call, "tool_use");
            let result = logged(
                &mut seq,
                "user.custom_tool_result",
                json!({"custom_tool_use_id": use_id, "content": [{"type": "text", "text": "sunny, 21 degrees"}]}),
                None,
            );
            let again = logged(&mut seq, "span.model_request_start", json!({}), None);
            let said = json!([{"type": "text", "text": "sunny, 21 degrees"}]);
            let answer = response(&mut seq, &again.id, said, "end_turn");
            for e in [input, start, call, result, again, answer] {
                k.transcript.apply(&e);
                k.bytes += e.heap_size();
                k.events.push(e);
            }
        }
        k
    }

    #[test]
    fn an_entry_counts_the_heap_it_holds() {
        for n in [1, 50, 500] {
            let (mut k, real) = crate::heap_size::tests::measured(|| round_trips(n));
            let counted = k.heap_size();
            assert!(
                crate::heap_size::tests::close(counted, real, 0.1),
                "{n} round trips: counted {counted}, allocated {real}"
            );
        }
    }
}
