//! A client-side decision on a session row, with the decision's own result.

use tokio::sync::oneshot;

use super::OpError;
use crate::Inner;
use mast_store::{Attempt, EventRecord, SessionRecord, SessionTxn, StoreError, TxnOutput, Writer};

/// What a committed decision left: the row as committed, the events it appended, and what
/// the decision itself returned (which runners to wake, …).
pub(super) struct Committed<T> {
    pub rec: SessionRecord,
    pub events: Vec<EventRecord>,
    pub value: T,
}

/// Runs `decision` against session `id` of workspace `ws` under its row lock as a client
/// write, then publishes the appended events. A session of another workspace is not found.
pub(super) async fn decide<T: Send + 'static>(
    inner: &Inner,
    ws: &str,
    id: &str,
    decision: impl FnOnce(&mut SessionRecord) -> Result<(TxnOutput, T), StoreError> + Send + 'static,
) -> Result<Committed<T>, OpError> {
    // This write moves the row past any copy kept of it.
    inner.held_rows.forget(id);
    let (txn, rx) = boxed(ws, decision);
    let written = inner.store.transact(id, &Writer::Client, txn).await;
    finish(inner, id, written, rx).await
}

/// [`decide`], first on the row this process's runner left when it let the session go
/// (`engine::held_rows`): decided on that copy and written in one round trip if the row is
/// still at the copy's version, else decided again on the locked row, so `decision` is
/// cloned for that second chance and must not own what cannot be decided twice.
pub(super) async fn decide_held<T, F>(
    inner: &Inner,
    ws: &str,
    id: &str,
    decision: F,
) -> Result<Committed<T>, OpError>
where
    T: Send + 'static,
    F: FnOnce(&mut SessionRecord) -> Result<(TxnOutput, T), StoreError> + Clone + Send + 'static,
{
    if let Some(held) = inner.held_rows.take(id) {
        let (txn, rx) = boxed(ws, decision.clone());
        match inner
            .store
            .transact_from(id, &Writer::Client, &held, txn)
            .await
        {
            Ok(Attempt::Done(written)) => return finish(inner, id, Ok(written), rx).await,
            Ok(Attempt::Stale) => {
                metrics::counter!(crate::telemetry::STALE_SESSION_WRITES, "writer" => "client")
                    .increment(1);
            }
            Err(e) => return finish(inner, id, Err(e), rx).await,
        }
    }
    let (txn, rx) = boxed(ws, decision);
    let written = inner.store.transact(id, &Writer::Client, txn).await;
    finish(inner, id, written, rx).await
}

/// The store transaction of `decision` for a client of workspace `ws`: a session of another
/// workspace is not found. The store takes an object-safe boxed closure whose only output is
/// the row change, so the decision's own value travels back on the one-shot channel returned
/// (sent only when the decision succeeded; a failed one aborts the transaction).
fn boxed<T: Send + 'static>(
    ws: &str,
    decision: impl FnOnce(&mut SessionRecord) -> Result<(TxnOutput, T), StoreError> + Send + 'static,
) -> (SessionTxn, oneshot::Receiver<T>) {
    let (tx, rx) = oneshot::channel();
    let ws = ws.to_string();
    let txn = Box::new(move |rec: &mut SessionRecord| {
        if rec.workspace_id != ws {
            return Err(StoreError::NotFound);
        }
        let (out, value) = decision(rec)?;
        let _ = tx.send(value);
        Ok(out)
    });
    (txn, rx)
}

/// A client transaction's answer, published and paired with its decision's value.
async fn finish<T>(
    inner: &Inner,
    id: &str,
    written: Result<Option<(SessionRecord, Vec<EventRecord>)>, StoreError>,
    rx: oneshot::Receiver<T>,
) -> Result<Committed<T>, OpError> {
    match written {
        Ok(Some((rec, events))) => {
            let value = rx.await.map_err(|_| {
                OpError::Store(StoreError::Internal(anyhow::anyhow!(
                    "the store committed a session decision it never ran"
                )))
            })?;
            inner.hub.publish(id, &events);
            Ok(Committed { rec, events, value })
        }
        Ok(None) | Err(StoreError::NotFound) => Err(OpError::SessionNotFound(id.to_string())),
        Err(e) => Err(e.into()),
    }
}
