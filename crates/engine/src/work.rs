//! The work-queue state machine of self-hosted environments: queued → (poll)
//! → starting (ack) → active (heartbeats) → stopping (stop requested) → stopped. Pure
//! decisions over a locked [`WorkRecord`]; the store persists them, the API shapes them.

use serde_json::{Value, json};

use super::state::{EngineState, work_item_for};
use mast_domain::environment::EnvironmentConfig;
use mast_domain::session::SessionBodyHead;
use mast_domain::time::{self, Micros};
use mast_domain::work::{
    NO_HEARTBEAT, Work, WorkData, WorkHeartbeat, WorkHeartbeatTag, WorkState, WorkTag,
};
use mast_store::{SessionRecord, StoreError, TxnOutput, WorkRecord};

/// How long leases last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseTerms {
    /// Lease granted at ack and by heartbeats that ask for nothing else.
    pub default_ttl_seconds: i64,
    /// Longest lease a heartbeat may ask for.
    pub max_ttl_seconds: i64,
}

impl Default for LeaseTerms {
    fn default() -> Self {
        LeaseTerms {
            default_ttl_seconds: 60,
            max_ttl_seconds: 300,
        }
    }
}

/// Why a work-queue request changes nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum Refusal {
    /// 409: the item's state does not allow it.
    Conflict(String),
    /// 412: the caller's view of the lease is stale; carries the server's lease state.
    Precondition { message: String, current: Value },
}

const SECOND: Micros = 1_000_000;

/// Acknowledges a polled item: its worker starts on it, under a fresh lease.
pub fn ack(w: &mut WorkRecord, now: Micros, terms: LeaseTerms) -> Result<(), Refusal> {
    match w.state() {
        WorkState::Queued if w.polled_at.is_some() => {
            w.state = WorkState::Starting.as_str().into();
            w.acknowledged_at = Some(now);
            w.ttl_seconds = terms.default_ttl_seconds;
            w.lease_expires_at = Some(now + terms.default_ttl_seconds * SECOND);
            w.updated_at = now;
            Ok(())
        }
        WorkState::Queued => Err(Refusal::Conflict(format!(
            "work item `{}` has not been polled; poll before acknowledging",
            w.id
        ))),
        // A retried ack of the same claim.
        WorkState::Starting => Ok(()),
        s => Err(Refusal::Conflict(format!(
            "work item `{}` is {} and can no longer be acknowledged",
            w.id,
            s.as_str()
        ))),
    }
}

/// The lease as the server sees it (`error.details.current_state` of a 412).
pub fn lease_state(w: &WorkRecord) -> Value {
    json!({
        "state": w.state(),
        "lease_extended": false,
        "ttl_seconds": w.ttl_seconds,
        "last_heartbeat": time::format_opt(w.latest_heartbeat_at),
    })
}

/// A heartbeat: extends the lease of a held item whose last beat the worker names exactly
/// (or names none);
/// reports a requested stop without extending anything.
pub fn heartbeat(
    w: &mut WorkRecord,
    expected_last: Option<&str>,
    desired_ttl: Option<i64>,
    now: Micros,
    terms: LeaseTerms,
) -> Result<WorkHeartbeat, Refusal> {
    let state = w.state();
    if matches!(state, WorkState::Stopping | WorkState::Stopped) {
        return Ok(WorkHeartbeat {
            tag: WorkHeartbeatTag::Tag,
            last_heartbeat: time::format_opt(w.latest_heartbeat_at).unwrap_or_default(),
            lease_extended: false,
            state,
            ttl_seconds: w.ttl_seconds,
        });
    }
    let current = time::format_opt(w.latest_heartbeat_at);
    // Without a precondition the beat is unconditional.
    let matches = match (expected_last, &current) {
        (None, _) => true,
        (Some(expected), None) => expected == NO_HEARTBEAT,
        (Some(expected), Some(last)) => expected == last,
    };
    if state == WorkState::Queued || !matches {
        let message = if state == WorkState::Queued {
            format!(
                "work item `{}` is not leased: its lease expired and it went back to the queue",
                w.id
            )
        } else {
            format!(
                "`expected_last_heartbeat` does not match the lease's last heartbeat ({}); another worker may hold it",
                current.as_deref().unwrap_or(NO_HEARTBEAT)
            )
        };
        return Err(Refusal::Precondition {
            message,
            current: lease_state(w),
        });
    }
    let ttl = desired_ttl
        .map(|t| t.clamp(1, terms.max_ttl_seconds))
        .unwrap_or(if w.ttl_seconds > 0 {
            w.ttl_seconds
        } else {
            terms.default_ttl_seconds
        });
    w.state = WorkState::Active.as_str().into();
    w.started_at.get_or_insert(now);
    w.latest_heartbeat_at = Some(now);
    w.ttl_seconds = ttl;
    w.lease_expires_at = Some(now + ttl * SECOND);
    w.updated_at = now;
    Ok(WorkHeartbeat {
        tag: WorkHeartbeatTag::Tag,
        last_heartbeat: time::format(now),
        lease_extended: true,
        state: WorkState::Active,
        ttl_seconds: ttl,
    })
}

/// A stop request: a held item winds down through `stopping` unless `force`; anything
/// else stops at once. Once stopped, its token only reaches the item's heartbeat and stop.
pub fn stop(w: &mut WorkRecord, force: bool, now: Micros) -> Result<(), Refusal> {
    match w.state() {
        WorkState::Stopped => Err(Refusal::Conflict(format!(
            "work item `{}` is already stopped",
            w.id
        ))),
        WorkState::Starting | WorkState::Active if !force => {
            w.state = WorkState::Stopping.as_str().into();
            w.stop_requested_at = Some(now);
            w.updated_at = now;
            Ok(())
        }
        WorkState::Stopping if !force => Ok(()),
        _ => {
            w.state = WorkState::Stopped.as_str().into();
            w.stop_requested_at.get_or_insert(now);
            w.stopped_at = Some(now);
            w.lease_expires_at = None;
            w.updated_at = now;
            Ok(())
        }
    }
}

/// The wire object; `secret` only on poll responses.
pub fn view(w: &WorkRecord, secret: Option<String>) -> Result<Work, StoreError> {
    Ok(Work {
        tag: WorkTag::Tag,
        id: w.id.clone(),
        environment_id: w.environment_id.clone(),
        state: w.state(),
        data: WorkData {
            tag: mast_domain::work::SessionDataTag::Tag,
            id: w.session_id.clone(),
        },
        metadata: serde_json::from_str(&w.metadata)?,
        created_at: time::format(w.created_at),
        acknowledged_at: time::format_opt(w.acknowledged_at),
        started_at: time::format_opt(w.started_at),
        latest_heartbeat_at: time::format_opt(w.latest_heartbeat_at),
        stop_requested_at: time::format_opt(w.stop_requested_at),
        stopped_at: time::format_opt(w.stopped_at),
        secret,
    })
}

/// After a session's item stopped: when the session still waits on a worker's tool result
/// (the worker let go mid-turn), queue a fresh item so another worker finishes the call.
pub fn requeue_if_awaiting(rec: &mut SessionRecord, now: Micros) -> Result<TxnOutput, StoreError> {
    let body: SessionBodyHead = serde_json::from_str(&rec.body)?;
    let waiting = matches!(body.environment, EnvironmentConfig::SelfHosted)
        && rec.archived_at.is_none()
        && EngineState::of(rec)?.awaits_worker();
    Ok(TxnOutput {
        ensure_work: waiting.then(|| work_item_for(rec, now)),
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const T: Micros = 1_800_000_000_000_000;

    fn polled() -> WorkRecord {
        let mut w = WorkRecord::queued("work_1".into(), "ws", "env", "sesn", T);
        w.polled_at = Some(T);
        w
    }

    #[test]
    fn ack_starts_a_polled_item_under_the_default_lease() {
        let mut w = polled();
        ack(&mut w, T + 1, LeaseTerms::default()).unwrap();
        assert_eq!(w.state(), WorkState::Starting);
        assert_eq!(w.lease_expires_at, Some(T + 1 + 60 * SECOND));
        // A retried ack is harmless.
        ack(&mut w, T + 2, LeaseTerms::default()).unwrap();
        assert_eq!(w.acknowledged_at, Some(T + 1));
    }

    #[test]
    fn ack_refuses_unpolled_and_stopped_items() {
        let mut w = WorkRecord::queued("work_1".into(), "ws", "env", "sesn", T);
        assert!(matches!(
            ack(&mut w, T, LeaseTerms::default()),
            Err(Refusal::Conflict(_))
        ));
        let mut w = polled();
        stop(&mut w, true, T).unwrap();
        assert!(matches!(
            ack(&mut w, T, LeaseTerms::default()),
            Err(Refusal::Conflict(_))
        ));
    }

    #[test]
    fn heartbeats_chain_on_the_exact_last_beat() {
        let terms = LeaseTerms::default();
        let mut w = polled();
        ack(&mut w, T, terms).unwrap();
        let first = heartbeat(&mut w, Some(NO_HEARTBEAT), Some(10), T + SECOND, terms).unwrap();
        assert!(first.lease_extended);
        assert_eq!(first.state, WorkState::Active);
        assert_eq!(first.ttl_seconds, 10);
        assert_eq!(w.lease_expires_at, Some(T + 11 * SECOND));
        // The same precondition twice: the second worker loses.
        let stale = heartbeat(&mut w, Some(NO_HEARTBEAT), None, T + 2 * SECOND, terms).unwrap_err();
        let Refusal::Precondition { current, .. } = stale else {
            panic!("expected a precondition failure")
        };
        assert_eq!(current["state"], "active");
        assert_eq!(current["last_heartbeat"], first.last_heartbeat);
        assert_eq!(current["lease_extended"], false);
        let second = heartbeat(
            &mut w,
            Some(&first.last_heartbeat),
            None,
            T + 3 * SECOND,
            terms,
        )
        .unwrap();
        assert_eq!(second.ttl_seconds, 10, "the lease keeps its length");
        assert_eq!(w.started_at, Some(T + SECOND));
    }

    #[test]
    fn desired_ttl_is_bounded() {
        let terms = LeaseTerms::default();
        let mut w = polled();
        ack(&mut w, T, terms).unwrap();
        let hb = heartbeat(&mut w, Some(NO_HEARTBEAT), Some(100_000), T, terms).unwrap();
        assert_eq!(hb.ttl_seconds, 300);
    }

    #[test]
    fn a_requeued_item_refuses_its_old_holder() {
        let terms = LeaseTerms::default();
        let mut w = polled();
        ack(&mut w, T, terms).unwrap();
        let hb = heartbeat(&mut w, Some(NO_HEARTBEAT), None, T, terms).unwrap();
        // What the reaper does when the lease runs out.
        w.state = "queued".into();
        w.latest_heartbeat_at = None;
        let err = heartbeat(&mut w, Some(&hb.last_heartbeat), None, T + SECOND, terms).unwrap_err();
        assert!(matches!(err, Refusal::Precondition { .. }));
        let err = heartbeat(&mut w, Some(NO_HEARTBEAT), None, T + SECOND, terms).unwrap_err();
        assert!(
            matches!(err, Refusal::Precondition { .. }),
            "not leased at all"
        );
    }

    #[test]
    fn stop_winds_down_a_held_item_and_force_ends_it() {
        let terms = LeaseTerms::default();
        let mut w = polled();
        w.token_hash = Some("h".into());
        ack(&mut w, T, terms).unwrap();
        heartbeat(&mut w, Some(NO_HEARTBEAT), None, T, terms).unwrap();
        stop(&mut w, false, T + 1).unwrap();
        assert_eq!(w.state(), WorkState::Stopping);
        assert!(
            w.token_hash.is_some(),
            "the worker still needs its token to wind down"
        );
        // Heartbeats now report the stop without checking or extending anything.
        let hb = heartbeat(&mut w, Some("whatever"), None, T + 2, terms).unwrap();
        assert!(!hb.lease_extended);
        assert_eq!(hb.state, WorkState::Stopping);
        stop(&mut w, true, T + 3).unwrap();
        assert_eq!(w.state(), WorkState::Stopped);
        assert_eq!(w.stop_requested_at, Some(T + 1));
        assert!(matches!(
            stop(&mut w, true, T + 4),
            Err(Refusal::Conflict(_))
        ));
    }

    #[test]
    fn a_queued_item_stops_at_once() {
        let mut w = WorkRecord::queued("work_1".into(), "ws", "env", "sesn", T);
        stop(&mut w, false, T).unwrap();
        assert_eq!(w.state(), WorkState::Stopped);
    }
}
