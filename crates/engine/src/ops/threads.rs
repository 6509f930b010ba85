//! A session's threads: listing and reading them as the engine state shows them, and
//! archiving a delegate's thread.

use super::txn::decide;
use super::{OpError, views};
use crate::Engine;
use crate::intake;
use crate::state::{EngineState, ThreadStatus};
use mast_domain::thread::SessionThread;
use mast_store::{Scan, SessionRecord, TxnOutput};

impl Engine {
    /// The session row of workspace `ws` with its engine state, decoded once.
    async fn session_state(
        &self,
        ws: &str,
        id: &str,
    ) -> Result<(SessionRecord, EngineState), OpError> {
        let rec = self
            .inner
            .store
            .get_session(ws, id)
            .await?
            .ok_or_else(|| OpError::SessionNotFound(id.to_string()))?;
        let st = EngineState::of(&rec)?;
        Ok((rec, st))
    }

    /// Up to `scan.limit` threads of session `id` beyond the scan's cursor whose shown
    /// status is one of `statuses` (any when empty).
    ///
    /// The status shown comes from the engine state, not the thread row, so the filter runs
    /// here and the store is scanned on until the page is full: a page is short only at
    /// the end of the list.
    pub async fn list_threads(
        &self,
        ws: &str,
        id: &str,
        statuses: &[ThreadStatus],
        scan: Scan<String>,
    ) -> Result<Vec<SessionThread>, OpError> {
        let (rec, st) = self.session_state(ws, id).await?;
        let now = self.now();
        let want = usize::try_from(scan.limit).unwrap_or(0);
        let mut scan = scan;
        let mut out = Vec::new();
        loop {
            let rows = self.inner.store.list_threads(id, &scan).await?;
            let exhausted = (rows.len() as i64) < scan.limit;
            for t in &rows {
                let v = views::thread(&rec, &st, t, now)?;
                if statuses.is_empty() || statuses.contains(&v.status) {
                    out.push(v);
                    if out.len() >= want {
                        return Ok(out);
                    }
                }
            }
            match rows.last() {
                Some(last) if !exhausted => scan.after = Some(last.id.clone()),
                _ => return Ok(out),
            }
        }
    }

    /// Thread `tid` of session `id`.
    pub async fn thread(&self, ws: &str, id: &str, tid: &str) -> Result<SessionThread, OpError> {
        let (rec, st) = self.session_state(ws, id).await?;
        let t = self
            .inner
            .store
            .get_thread(id, tid)
            .await?
            .ok_or_else(|| OpError::ThreadNotFound(tid.to_string()))?;
        Ok(views::thread(&rec, &st, &t, self.now())?)
    }

    /// Archives delegate thread `tid` of session `id` (see [`intake::archive_thread`]) and
    /// wakes the runner when that let the session go back to work.
    pub async fn archive_thread(
        &self,
        ws: &str,
        id: &str,
        tid: &str,
    ) -> Result<SessionThread, OpError> {
        let not_found = || OpError::ThreadNotFound(tid.to_string());
        let t = self
            .inner
            .store
            .get_thread(id, tid)
            .await?
            .ok_or_else(not_found)?;
        let lease = self.lease_grant();
        let target = tid.to_string();
        let clock = self.inner.store.clock().clone();
        let committed = decide(&self.inner, ws, id, move |rec| {
            if rec.archived_at.is_some() {
                return Err(intake::archived(&rec.id, "its threads cannot be archived").into());
            }
            match intake::archive_thread(rec, &target, lease.as_ref(), clock.now())? {
                Some((out, wake)) => Ok((out, Some(wake))),
                None => Ok((TxnOutput::default(), None)),
            }
        })
        .await
        .map_err(|e| match e {
            // The thread row was there; the session is not the caller's.
            OpError::SessionNotFound(_) => not_found(),
            e => e,
        })?;
        match committed.value {
            None => return Err(not_found()),
            Some(true) => self.wake(id),
            Some(false) => {}
        }
        let st = EngineState::of(&committed.rec)?;
        let t = self.inner.store.get_thread(id, tid).await?.unwrap_or(t);
        Ok(views::thread(&committed.rec, &st, &t, self.now())?)
    }
}
