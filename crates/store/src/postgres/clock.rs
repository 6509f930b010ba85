//! Lease times on the database's clock.
//!
//! The [`Store`](crate::Store) trait speaks the caller's clock, but replicas' clocks
//! drift. So every lease deadline, un-acknowledged poll and worker poll is stored on the
//! database's clock (`mast_clock()`, migration 0006), and every comparison of them happens in
//! SQL against it. A caller's time `t` is carried over as `t + offset`, where `offset` is
//! this process's measured distance to `mast_clock()`: differences between caller times stay
//! exact (a deadline one second after `now` is one second after it on the database too), and
//! values read back convert to the caller's clock exactly. Each statement also sends what it
//! believes `mast_clock()` reads now, and SQL's `mast_time()` re-bases the time on the
//! database's clock when that belief is off (this process's clock stepped since it measured),
//! so a wrong clock never decides a lease even before the offset is measured again.

use std::sync::atomic::{AtomicI64, Ordering};

use mast_domain::clock::Clock;
use mast_domain::time::Micros;

/// SQL for "`$pinned` and `$expected` as one time on the database's clock": see [`Stamp`].
/// Wrapped in a scalar sub-select so a scan evaluates it once, not per row.
macro_rules! db_time {
    ($pinned:literal, $expected:literal) => {
        concat!("(SELECT mast_time(", $pinned, ", ", $expected, "))")
    };
}
pub(super) use db_time;

/// A new measurement replaces the offset only when it differs by more than this: jitter
/// (network latency) must not move it, so times a process compares stay exact.
const RESYNC_OVER: Micros = 50_000;
/// A measurement whose round trip took longer than this is too coarse to use.
const MAX_ROUND_TRIP: Micros = 20_000;

/// This process's clock and its offset to the database's.
#[derive(Debug, Default)]
pub(super) struct DbClock {
    local: Clock,
    offset: AtomicI64,
}

/// One statement's view of the clock: how to carry caller times over.
#[derive(Debug, Clone, Copy)]
pub(super) struct Stamp {
    offset: i64,
    /// What `mast_clock()` should read now, by this process's clock and offset.
    pub expected: i64,
    /// This process's clock when the stamp was taken.
    pub now: Micros,
}

impl Stamp {
    /// A caller time on the database's clock (the `pinned` argument of `mast_time`).
    pub fn at(&self, t: Micros) -> i64 {
        t + self.offset
    }

    /// A database time on the caller's clock.
    pub fn back(&self, t: i64) -> Micros {
        t - self.offset
    }
}

impl DbClock {
    /// Carries `local` (the store's clock) over to the database's; the offset is measured
    /// by [`DbClock::sync`].
    pub fn new(local: Clock) -> Self {
        DbClock {
            local,
            offset: AtomicI64::new(0),
        }
    }

    /// The store's clock.
    pub fn local(&self) -> &Clock {
        &self.local
    }

    /// The store's clock's reading.
    pub fn now(&self) -> Micros {
        self.local.now()
    }

    /// The stamp for a statement about to be sent.
    pub fn stamp(&self) -> Stamp {
        let offset = self.offset.load(Ordering::Relaxed);
        let now = self.now();
        Stamp {
            offset,
            expected: now + offset,
            now,
        }
    }

    /// Takes in a reading of `mast_clock()` made between `before` and `after` (this
    /// process's clock): moves the offset when it is clearly wrong. Returns whether it moved.
    pub fn observe(&self, db_now: i64, before: Micros, after: Micros) -> bool {
        if after - before > MAX_ROUND_TRIP {
            return false;
        }
        let measured = db_now - (before + after) / 2;
        let current = self.offset.load(Ordering::Relaxed);
        if (measured - current).abs() <= RESYNC_OVER {
            return false;
        }
        self.offset.store(measured, Ordering::Relaxed);
        true
    }

    /// Measures the offset now (at connect), retrying a few times for a quick round trip.
    pub async fn sync(&self, pool: &sqlx::PgPool) -> Result<(), sqlx::Error> {
        let mut best: Option<(Micros, i64)> = None;
        for _ in 0..5 {
            let before = self.now();
            let db_now: i64 = sqlx::query_scalar("SELECT mast_clock()")
                .fetch_one(pool)
                .await?;
            let after = self.now();
            let rtt = after - before;
            if best.is_none_or(|(r, _)| rtt < r) {
                best = Some((rtt, db_now - (before + after) / 2));
            }
        }
        if let Some((_, offset)) = best {
            self.offset.store(offset, Ordering::Relaxed);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_carry_times_over_exactly_and_back() {
        let clock = DbClock::default();
        clock.offset.store(-3_600_000_000, Ordering::Relaxed);
        let s = clock.stamp();
        assert_eq!(s.at(10), 10 - 3_600_000_000);
        assert_eq!(s.back(s.at(12_345)), 12_345);
        assert!((s.expected - (clock.now() - 3_600_000_000)).abs() < 1_000_000);
    }

    #[test]
    fn observations_move_the_offset_only_when_clearly_wrong_and_precise() {
        let clock = DbClock::default();
        // Jitter: ignored, so compared times stay exact.
        assert!(!clock.observe(1_000 + 10_000, 1_000, 1_000 + 100));
        // A slow round trip says too little.
        assert!(!clock.observe(5_000_000_000, 0, MAX_ROUND_TRIP + 1));
        // A clock an hour off is corrected.
        assert!(clock.observe(3_600_000_000 + 1_000, 1_000, 1_000));
        assert_eq!(clock.stamp().offset, 3_600_000_000);
    }
}
