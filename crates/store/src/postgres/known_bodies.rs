//! The session bodies this process read, each with its revision (`sessions.body_rev`, which
//! every write of the body bumps; migration 0020), so the engine's hot reads of a session —
//! the locking read of every client's write and the runner's read on each wake — ask for the
//! body only when it changed. A large agent's body (its prompt and tool schemas, tens of
//! kilobytes) otherwise crossed the connection on every write, was decrypted, copied into
//! the record and compared with the engine's kept parse. An entry is kept only from a row
//! that carried both the body and its revision, and the revision moves with every change, so
//! an entry can be evicted early but never be wrong.

use std::sync::{Arc, Mutex};

use sqlx::postgres::PgRow;

use super::clock::Stamp;
use super::rows;
use crate::lru::Lru;
use crate::{SessionRecord, StoreResult};

/// Default bound on the bytes the kept bodies hold (shared with the records and the engine's
/// parsed bodies, which point at the same text).
pub(super) const DEFAULT_BUDGET: usize = 16 << 20;

/// A session's body as this process last read it.
#[derive(Clone)]
pub(super) struct Known {
    /// Its revision.
    pub(super) rev: i64,
    /// Its text.
    pub(super) text: Arc<str>,
}

/// Kept bodies by session id.
pub(super) struct KnownBodies {
    inner: Mutex<Lru<Known>>,
}

impl KnownBodies {
    /// Keeps at most about `budget` bytes of bodies.
    pub(super) fn new(budget: usize) -> Self {
        KnownBodies {
            inner: Mutex::new(Lru::new(budget)),
        }
    }

    /// The body kept for `session_id`, if any.
    pub(super) fn get(&self, session_id: &str) -> Option<Known> {
        self.inner
            .lock()
            .expect("known bodies")
            .get_mut(session_id)
            .map(|known| known.clone())
    }

    /// The revision to send with a read of `session_id` (`-1`, which no row has, when no
    /// body is kept) beside what is kept.
    pub(super) fn ask(&self, session_id: &str) -> (i64, Option<Known>) {
        let known = self.get(session_id);
        (known.as_ref().map_or(-1, |k| k.rev), known)
    }

    /// The session in `row`, read with [`rows::SESSION_COLS_UNLESS_REV_2`] given `known`'s
    /// revision; a body the row carried is kept for the next read.
    pub(super) fn session(
        &self,
        row: &PgRow,
        stamp: &Stamp,
        known: Option<Known>,
    ) -> StoreResult<SessionRecord> {
        let rec = rows::session(row, stamp, known.as_ref().map(|k| &k.text))?;
        let (rev, carried) = rows::session_body_rev(row)?;
        if carried {
            self.keep(&rec.id, rev, &rec.body);
        }
        Ok(rec)
    }

    /// Keeps `text` as `session_id`'s body at revision `rev`: only ever what one row held
    /// together.
    pub(super) fn keep(&self, session_id: &str, rev: i64, text: &Arc<str>) {
        let known = Known {
            rev,
            text: text.clone(),
        };
        let bytes = 64 + session_id.len() + text.len();
        self.inner
            .lock()
            .expect("known bodies")
            .insert(session_id.to_string(), known, bytes);
    }
}
