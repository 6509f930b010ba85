//! A client-side decision on a locked session row, with the decision's own result.

use tokio::sync::oneshot;

use super::OpError;
use crate::engine::Inner;
use crate::store::{EventRecord, SessionRecord, StoreError, TxnOutput, Writer};

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
    // The store takes an object-safe boxed closure whose only output is the row change, so
    // the decision's own value travels back on a one-shot channel (sent only when the
    // decision succeeded; a failed one aborts the transaction).
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
    match inner.store.transact(id, &Writer::Client, txn).await {
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
