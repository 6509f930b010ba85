//! Where the time comes from. A process has one [`Clock`]: the binary builds it, the store is
//! constructed with it (it stamps rows) and everything above reads it through the store, so
//! every timestamp a process writes comes from one source. Tests build a server on a
//! [`Clock::manual`] clock and move it, instead of waiting for real time to pass.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tokio::sync::watch;

use crate::time::Micros;

/// A source of the current time; cheap to clone (clones share the source).
#[derive(Clone)]
pub struct Clock(Arc<Source>);

enum Source {
    /// The system clock, shifted by `skew` microseconds (zero outside tests).
    System { skew: Micros },
    /// A clock that stands still until a test moves it; waiters watch it move.
    Manual(watch::Sender<Micros>),
}

impl Clock {
    /// The system clock.
    pub fn system() -> Self {
        Self::skewed(0)
    }

    /// The system clock shifted by `skew` microseconds: a test knob (the binary reads
    /// `MAST_CLOCK_SKEW_MS`) that runs a replica whose clock is off, to prove leases follow
    /// the database's clock.
    pub fn skewed(skew: Micros) -> Self {
        Clock(Arc::new(Source::System { skew }))
    }

    /// A clock that reads `start` until [`Clock::advance`] or [`Clock::set`] moves it.
    pub fn manual(start: Micros) -> Self {
        Clock(Arc::new(Source::Manual(watch::Sender::new(start))))
    }

    /// A manual clock that starts at the system clock's reading.
    pub fn manual_from_now() -> Self {
        Self::manual(system_now())
    }

    /// The current time in microseconds since the Unix epoch.
    pub fn now(&self) -> Micros {
        match &*self.0 {
            Source::System { skew } => system_now() + skew,
            Source::Manual(at) => *at.borrow(),
        }
    }

    /// How far a system clock is shifted (zero for a manual one).
    pub fn skew(&self) -> Micros {
        match &*self.0 {
            Source::System { skew } => *skew,
            Source::Manual(_) => 0,
        }
    }

    /// Whether this is a manual clock (a test's).
    pub fn is_manual(&self) -> bool {
        matches!(&*self.0, Source::Manual(_))
    }

    /// Moves a manual clock forward by `by`, waking whoever waits for a time it reaches.
    ///
    /// # Panics
    /// On a system clock: only a test moves time, and a test that meant a manual clock and
    /// got the system one must fail, not pass by waiting for real time.
    pub fn advance(&self, by: Duration) {
        let micros = Micros::try_from(by.as_micros()).unwrap_or(Micros::MAX);
        self.manual_source()
            .send_modify(|at| *at = at.saturating_add(micros));
    }

    /// Sets a manual clock to `to` (which may be earlier: a clock that steps back).
    ///
    /// # Panics
    /// On a system clock, as [`Clock::advance`].
    pub fn set(&self, to: Micros) {
        self.manual_source().send_replace(to);
    }

    /// Waits until the clock reads `at` or later: real time on a system clock, a test's
    /// moves on a manual one.
    pub async fn sleep_until(&self, at: Micros) {
        match &*self.0 {
            Source::System { .. } => {
                let left = at.saturating_sub(self.now());
                if left > 0 {
                    tokio::time::sleep(Duration::from_micros(left as u64)).await;
                }
            }
            Source::Manual(tx) => {
                let mut rx = tx.subscribe();
                // The sender lives as long as this clock, so the wait ends only when reached.
                let _ = rx.wait_for(|now| *now >= at).await;
            }
        }
    }

    /// Waits for `d` to pass on this clock.
    pub async fn sleep(&self, d: Duration) {
        let micros = Micros::try_from(d.as_micros()).unwrap_or(Micros::MAX);
        self.sleep_until(self.now().saturating_add(micros)).await
    }

    fn manual_source(&self) -> &watch::Sender<Micros> {
        match &*self.0 {
            Source::Manual(tx) => tx,
            Source::System { .. } => panic!("only a manual clock is moved by hand"),
        }
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

impl fmt::Debug for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &*self.0 {
            Source::System { skew } => f.debug_struct("SystemClock").field("skew", skew).finish(),
            Source::Manual(at) => f.debug_tuple("ManualClock").field(&*at.borrow()).finish(),
        }
    }
}

/// The system clock's reading in microseconds since the Unix epoch.
fn system_now() -> Micros {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as Micros)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_skewed_clock_is_off_by_its_skew() {
        let (plain, ahead) = (Clock::system(), Clock::skewed(3_600_000_000));
        let d = ahead.now() - plain.now();
        assert!((d - 3_600_000_000).abs() < 1_000_000, "{d}");
    }

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let c = Clock::manual(1_000);
        assert_eq!(c.now(), 1_000);
        c.advance(Duration::from_millis(2));
        assert_eq!(c.clone().now(), 3_000, "clones share the source");
        c.set(500);
        assert_eq!(c.now(), 500);
    }

    #[tokio::test]
    async fn a_waiter_on_a_manual_clock_wakes_when_it_is_moved_past() {
        let c = Clock::manual(0);
        let hour = 3_600_000_000;
        let waiter = tokio::spawn({
            let c = c.clone();
            async move { c.sleep_until(hour).await }
        });
        c.advance(Duration::from_secs(1800));
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "half way is not there yet");
        c.advance(Duration::from_secs(1800));
        waiter.await.unwrap();
    }

    #[test]
    #[should_panic(expected = "only a manual clock")]
    fn moving_the_system_clock_is_a_test_bug() {
        Clock::system().advance(Duration::from_secs(1));
    }
}
