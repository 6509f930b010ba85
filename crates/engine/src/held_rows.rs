//! Session rows as this process's runners last committed them when they let the session go,
//! so a client's next write to the session can decide on the copy and commit in one round trip
//! (`SessionTransactions::transact_from`) instead of reading the row under its lock first.
//!
//! A copy is only ever a guess: the store writes it only if the row is still at the copy's
//! version, so a copy another replica, a worker or a lease sweep made stale costs one refused
//! attempt and the ordinary locking write after it, never a wrong decision. A copy is taken
//! out when a write uses it (two writers never start from one copy), and only stores whose
//! locking read costs a round trip keep any (`SessionTransactions::decides_on_held_rows`).
//!
//! The cache is bounded by entries and by the heap the rows hold, evicting the oldest put. A row
//! with its agent snapshot is a few KB, so the default bound costs a few MB at most (the idle
//! scenario in BENCHMARKS.md); input to a session whose copy was evicted simply takes the
//! locking way, one round trip more.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use mast_store::SessionRecord;

/// Default bound on the number of rows kept.
pub const MAX_ROWS: usize = 1024;

/// Default bound on the heap the kept rows hold (mostly their body, engine state and usage), in bytes.
pub const DEFAULT_BUDGET: usize = 4 << 20;

/// The rows this process committed last, by session id.
pub struct HeldRows {
    max_rows: usize,
    budget: usize,
    rows: Mutex<Rows>,
}

#[derive(Default)]
struct Rows {
    by_id: HashMap<String, Held>,
    /// Session ids in the order their rows were put, each with the put's number; an id whose
    /// number no longer matches its entry was taken or put again since.
    order: VecDeque<(String, u64)>,
    next: u64,
    bytes: usize,
}

struct Held {
    rec: SessionRecord,
    put: u64,
    bytes: usize,
}

impl HeldRows {
    /// A cache of at most `max_rows` rows holding `budget` bytes of heap.
    pub fn new(max_rows: usize, budget: usize) -> Self {
        HeldRows {
            max_rows,
            budget,
            rows: Mutex::new(Rows::default()),
        }
    }

    /// Keeps `rec` as the session's row as last committed here, replacing any older copy.
    pub fn put(&self, rec: SessionRecord) {
        let bytes = size_of(&rec);
        if bytes > self.budget {
            return;
        }
        let mut rows = self.rows.lock().expect("held rows lock");
        rows.next += 1;
        let put = rows.next;
        let id = rec.id.clone();
        if let Some(old) = rows.by_id.insert(id.clone(), Held { rec, put, bytes }) {
            rows.bytes -= old.bytes;
        }
        rows.bytes += bytes;
        rows.order.push_back((id, put));
        while rows.by_id.len() > self.max_rows || rows.bytes > self.budget {
            let Some((id, put)) = rows.order.pop_front() else {
                break;
            };
            if rows.by_id.get(&id).is_some_and(|h| h.put == put)
                && let Some(old) = rows.by_id.remove(&id)
            {
                rows.bytes -= old.bytes;
            }
        }
        // Ids of entries taken or put again pile up in `order` between evictions; drop them
        // once they outnumber the live ones.
        if rows.order.len() > 2 * rows.by_id.len() + 64 {
            let Rows { by_id, order, .. } = &mut *rows;
            order.retain(|(id, put)| by_id.get(id).is_some_and(|h| h.put == *put));
        }
    }

    /// Takes the session's kept row out, for one write to decide on.
    pub fn take(&self, session_id: &str) -> Option<SessionRecord> {
        let mut rows = self.rows.lock().expect("held rows lock");
        let held = rows.by_id.remove(session_id)?;
        rows.bytes -= held.bytes;
        Some(held.rec)
    }

    /// Whether a row of the session is kept.
    pub fn holds(&self, session_id: &str) -> bool {
        self.rows
            .lock()
            .expect("held rows lock")
            .by_id
            .contains_key(session_id)
    }

    /// Forgets the session's kept row (it changed in a way this process did not commit).
    pub fn forget(&self, session_id: &str) {
        let _ = self.take(session_id);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.rows.lock().expect("held rows lock").by_id.len()
    }
}

/// What a row holds on the heap, for the budget.
fn size_of(rec: &SessionRecord) -> usize {
    super::heap_size::session_record_bytes(rec)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A session row of id `id` whose body is `body` bytes long.
    fn row(id: &str, body: usize) -> SessionRecord {
        let mut rec = crate::fixtures::session(
            mast_domain::session::SessionStatus::Idle,
            &Default::default(),
            false,
        );
        rec.id = id.into();
        rec.body = "x".repeat(body).into();
        rec.engine.clear();
        rec.usage.clear();
        rec
    }

    #[test]
    fn a_row_is_taken_once() {
        let rows = HeldRows::new(8, 1 << 20);
        rows.put(row("s1", 10));
        assert_eq!(rows.take("s1").map(|r| r.id), Some("s1".to_string()));
        assert!(rows.take("s1").is_none());
        assert_eq!(rows.len(), 0);
    }

    #[test]
    fn a_newer_put_replaces_the_older() {
        let rows = HeldRows::new(8, 1 << 20);
        let mut r = row("s1", 10);
        rows.put(r.clone());
        r.version = 2;
        rows.put(r);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows.take("s1").map(|r| r.version), Some(2));
    }

    #[test]
    fn the_oldest_rows_go_first_past_either_bound() {
        let rows = HeldRows::new(2, 1 << 20);
        for id in ["s1", "s2", "s3"] {
            rows.put(row(id, 10));
        }
        assert!(rows.take("s1").is_none());
        assert!(rows.take("s2").is_some() && rows.take("s3").is_some());

        // A budget of about two rows of this size.
        let rows = HeldRows::new(100, 2 * size_of(&row("s1", 1000)) + 10);
        rows.put(row("s1", 1000));
        rows.put(row("s2", 1000));
        // s1 put again is the newest; s2 is now the oldest.
        rows.put(row("s1", 1000));
        rows.put(row("s3", 1000));
        assert!(rows.take("s2").is_none());
        assert!(rows.take("s1").is_some() && rows.take("s3").is_some());
        // A row larger than the whole budget is not kept.
        rows.put(row("big", 10_000));
        assert_eq!(rows.len(), 0);
    }

    #[test]
    fn a_row_counts_the_heap_it_holds() {
        for body in [10, 25_000] {
            let (rec, real) = crate::heap_size::tests::measured(|| Box::new(row("s1", body)));
            let counted = size_of(&rec);
            assert!(
                crate::heap_size::tests::close(counted, real, 0.1),
                "body of {body} bytes: counted {counted}, allocated {real}"
            );
        }
    }

    #[test]
    fn taken_ids_do_not_pile_up() {
        let rows = HeldRows::new(8, 1 << 20);
        for i in 0..10_000 {
            rows.put(row("s1", 10));
            if i % 2 == 0 {
                rows.take("s1");
            }
        }
        // One live entry: at most twice that and the slack, plus the put just made.
        assert!(rows.rows.lock().unwrap().order.len() <= 2 + 64 + 1);
    }
}
