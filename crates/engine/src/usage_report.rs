//! Periodic `session.usage` while a session works: a long turn reports its usage and list
//! cost every `MAST_USAGE_INTERVAL_MS` (default a minute), not only when it ends, so a
//! client watching spend sees it grow. A turn shorter than the interval reports once, at its
//! end (see `turn_end`).

use std::time::Duration;

use super::intake::server_event;
use super::state::EngineState;
use mast_domain::events::kind;
use mast_domain::time::Micros;
use mast_store::{NewEvent, SessionRecord, StoreError};

/// A `session.usage` on the primary thread when the session has run for `every` since it
/// started running or last reported, whichever is later; None otherwise.
pub(super) fn periodic(
    rec: &SessionRecord,
    st: &mut EngineState,
    primary: &str,
    every: Duration,
    now: Micros,
) -> Result<Option<NewEvent>, StoreError> {
    let Some(running_since) = rec.running_since else {
        return Ok(None);
    };
    let since = st
        .usage_reported_at
        .map_or(running_since, |r| r.max(running_since));
    if now - since < every.as_micros() as Micros {
        return Ok(None);
    }
    st.usage_reported_at = Some(now);
    Ok(Some(server_event(
        kind::SESSION_USAGE,
        super::budget::usage_event(rec, st, now)?,
        primary,
        now,
    )))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::{NOW, session};
    use mast_domain::session::SessionStatus;

    const MINUTE: Duration = Duration::from_secs(60);
    const MINUTE_MICROS: Micros = 60_000_000;

    #[test]
    fn reports_once_per_interval_of_running() {
        let mut st = EngineState::default();
        let mut rec = session(SessionStatus::Running, &st, false);
        rec.running_since = Some(NOW);
        assert!(
            periodic(&rec, &mut st, "sthr_p", MINUTE, NOW + 1)
                .unwrap()
                .is_none()
        );
        let due = NOW + MINUTE_MICROS;
        let e = periodic(&rec, &mut st, "sthr_p", MINUTE, due)
            .unwrap()
            .unwrap();
        assert_eq!(e.kind, kind::SESSION_USAGE);
        assert!(e.body["usage"].is_object());
        assert_eq!(st.usage_reported_at, Some(due));
        assert!(
            periodic(&rec, &mut st, "sthr_p", MINUTE, due + MINUTE_MICROS - 1)
                .unwrap()
                .is_none(),
            "the next report waits a whole interval"
        );
        assert!(
            periodic(&rec, &mut st, "sthr_p", MINUTE, due + MINUTE_MICROS)
                .unwrap()
                .is_some()
        );
    }

    #[test]
    fn a_new_run_starts_its_own_interval_and_idle_sessions_never_report() {
        let mut st = EngineState {
            usage_reported_at: Some(NOW),
            ..Default::default()
        };
        let mut rec = session(SessionStatus::Running, &st, false);
        // Reported long ago, then idle; the session runs again from `later`.
        let later = NOW + 10 * MINUTE_MICROS;
        rec.running_since = Some(later);
        assert!(
            periodic(&rec, &mut st, "sthr_p", MINUTE, later + 5)
                .unwrap()
                .is_none()
        );
        rec.running_since = None;
        assert!(
            periodic(&rec, &mut st, "sthr_p", MINUTE, later + 2 * MINUTE_MICROS)
                .unwrap()
                .is_none()
        );
    }
}
