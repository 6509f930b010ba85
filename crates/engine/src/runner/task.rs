//! A session's runner task: take the lease, drive the threads' loops while the session has
//! work, and hand the lease back.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{Ended, RunError, RunnerHandle, supervisor};
use crate::{Inner, state};

/// A runner task: takes the lease (usually already granted by the request that woke it),
/// drives the loop until the session has no work, and exits without missing input that
/// arrives while it is exiting.
pub(crate) async fn run(inner: Arc<Inner>, sid: String, handle: Arc<RunnerHandle>) {
    let mut registration = Registration {
        inner: inner.clone(),
        sid: sid.clone(),
        removed: false,
    };
    loop {
        handle.dirty.store(false, Ordering::SeqCst);
        // Read before the row (the loop's rule): an interrupt recorded after `take_lease`
        // read the row must still cut the first model request.
        let seen = handle.interrupts_seen();
        // A handoff stands for a row read before the snapshot: see `Handoff` for why the
        // epoch, read after the snapshot, makes it as good as one read now.
        let handoff = handle.take_handoff(inner.interrupt_epoch.load(Ordering::SeqCst));
        let (taken, events) = match handoff.and_then(|h| Some((held(&inner, h.rec)?, h.events))) {
            Some((rec, events)) => (Ok(Some(rec)), Some(events)),
            None => (take_lease(&inner, &sid).await, None),
        };
        // Taken whatever this start finds: a later start no longer knows the span is new.
        let armed = handle.armed.lock().expect("armed lock").take();
        match taken {
            Ok(Some(rec)) => {
                handle.saw_seq(rec.last_seq);
                let released =
                    match supervisor::drive(&inner, &handle, rec, &seen, events, armed).await {
                        Ok(Ended::Released) => true,
                        Ok(Ended::NoWork) => false,
                        // Stopping hands the session to the next start: nothing went wrong.
                        Err(RunError::Shutdown) => false,
                        Err(e) => {
                            tracing::warn!(session_id = %sid, error = %e, "runner stopped");
                            if !matches!(e, RunError::LeaseLost) {
                                tokio::select! {
                                    _ = inner.shutdown.cancelled() => {}
                                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                                }
                            }
                            false
                        }
                    };
                if !released && let Err(e) = inner.store.release_lease(&sid, &inner.owner).await {
                    tracing::warn!(session_id = %sid, error = %e, "could not release lease; it will expire");
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(session_id = %sid, error = %e, "could not take lease"),
        }
        let mut runners = inner.runners.lock().expect("runners lock");
        if handle.dirty.load(Ordering::SeqCst) && !inner.shutdown.is_cancelled() {
            continue;
        }
        runners.remove(&sid);
        registration.removed = true;
        return;
    }
}

/// Removes a runner that died abnormally (a panic) from the map, so the next wake or the
/// reaper starts a fresh one instead of signalling a dead handle.
struct Registration {
    inner: Arc<Inner>,
    sid: String,
    removed: bool,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if !self.removed {
            tracing::error!(session_id = %self.sid, "session runner ended abnormally");
            if let Ok(mut runners) = self.inner.runners.lock() {
                runners.remove(&self.sid);
            }
        }
    }
}

/// `rec` if it shows the session active with this process's lease granted (as the
/// transaction that woke the runner leaves it).
fn held(inner: &Inner, rec: mast_store::SessionRecord) -> Option<mast_store::SessionRecord> {
    let now = inner.now();
    let ttl = inner.config.lease_ttl.as_micros() as i64;
    let held = rec.lease_owner.as_deref() == Some(inner.owner.as_str())
        && rec.lease_expires_at.is_some_and(|t| t > now + ttl / 2);
    (held && state::status_of(&rec).is_active()).then_some(rec)
}

/// The session row if this process now holds its lease: granted with the work (no write
/// needed) or claimed here.
async fn take_lease(
    inner: &Inner,
    sid: &str,
) -> Result<Option<mast_store::SessionRecord>, mast_store::StoreError> {
    let Some(rec) = inner.store.get_session_by_id(sid).await? else {
        return Ok(None);
    };
    if !state::status_of(&rec).is_active() {
        return Ok(None);
    }
    let now = inner.now();
    let ttl = inner.config.lease_ttl.as_micros() as i64;
    let held = rec.lease_owner.as_deref() == Some(inner.owner.as_str())
        && rec.lease_expires_at.is_some_and(|t| t > now + ttl / 2);
    if held {
        return Ok(Some(rec));
    }
    if inner
        .store
        .claim_lease(sid, &inner.owner, now, now + ttl)
        .await?
    {
        // The claim moved the row past any copy kept of it.
        inner.held_rows.forget(sid);
        if rec.lease_owner.as_deref().is_some_and(|o| o != inner.owner) {
            metrics::counter!(crate::telemetry::LEASE_TAKEOVERS).increment(1);
        }
        return Ok(Some(rec));
    }
    Ok(None)
}
