//! Postgres LISTEN/NOTIFY as the replicas' signal channel: a sender that turns payloads into
//! `pg_notify` calls, and a listener on a dedicated connection that reconnects with backoff
//! and says when it may have missed something (so its owner can re-check the store).

use std::time::Duration;

use sqlx::postgres::{PgListener, PgPoolOptions};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// The channel every replica listens on.
pub const CHANNEL: &str = "mast_signals";
/// Largest payload Postgres accepts is 8000 bytes; ours are a few ids.
const MAX_PAYLOAD: usize = 7900;
/// Signals sent in one round trip at most.
const BATCH: usize = 256;

/// What the listener hands its owner.
pub enum Heard {
    /// A payload from some replica (this one included).
    Payload(String),
    /// The connection was (re)established: anything sent meanwhile may be lost.
    Connected,
    /// The connection dropped: nothing is heard until [`Heard::Connected`].
    Lost,
}

/// Sends queued payloads with `pg_notify` until `stop`; a failed send is logged and dropped
/// (receivers re-check the store periodically).
pub async fn send_forever(url: String, mut rx: mpsc::Receiver<String>, stop: CancellationToken) {
    let pool = match PgPoolOptions::new()
        .max_connections(1)
        .acquire_timeout(Duration::from_secs(5))
        .connect_lazy(&url)
    {
        Ok(p) => p,
        Err(e) => {
            tracing::error!(error = %e, "cannot signal other replicas: bad database URL");
            return;
        }
    };
    let mut batch = Vec::with_capacity(BATCH);
    loop {
        let first = tokio::select! {
            _ = stop.cancelled() => return,
            p = rx.recv() => match p {
                Some(p) => p,
                None => return,
            },
        };
        // Under load, whatever queued meanwhile goes in the same round trip.
        batch.clear();
        batch.push(first);
        while batch.len() < BATCH
            && let Ok(p) = rx.try_recv()
        {
            batch.push(p);
        }
        batch.retain(|p| p.len() <= MAX_PAYLOAD);
        if let Err(e) = sqlx::query("SELECT pg_notify($1, p) FROM unnest($2::text[]) AS p")
            .bind(CHANNEL)
            .bind(&batch)
            .execute(&pool)
            .await
        {
            tracing::debug!(error = %e, "could not signal other replicas");
        }
    }
}

/// Listens on [`CHANNEL`] until `stop`, reconnecting with backoff (0.1 s doubling to 5 s).
pub async fn listen_forever(url: String, tx: mpsc::Sender<Heard>, stop: CancellationToken) {
    let mut backoff = Duration::from_millis(100);
    loop {
        let connected = async {
            let mut l = PgListener::connect(&url).await?;
            l.listen(CHANNEL).await?;
            Ok::<_, sqlx::Error>(l)
        };
        let listener = tokio::select! {
            _ = stop.cancelled() => return,
            l = connected => l,
        };
        match listener {
            Ok(mut l) => {
                backoff = Duration::from_millis(100);
                if tx.send(Heard::Connected).await.is_err() {
                    return;
                }
                loop {
                    let next = tokio::select! {
                        _ = stop.cancelled() => return,
                        n = l.try_recv() => n,
                    };
                    match next {
                        Ok(Some(n)) => {
                            if tx
                                .send(Heard::Payload(n.payload().to_string()))
                                .await
                                .is_err()
                            {
                                return;
                            }
                            continue;
                        }
                        Ok(None) => {
                            tracing::warn!("replica signal listener lost its connection");
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "replica signal listener lost its connection");
                        }
                    }
                    // The connection dropped: say so now (nothing is heard until it is back),
                    // connect afresh below, and say that too, since whatever was sent in
                    // between is gone.
                    if tx.send(Heard::Lost).await.is_err() {
                        return;
                    }
                    break;
                }
            }
            Err(e) => tracing::warn!(error = %e, "replica signal listener cannot connect"),
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(Duration::from_secs(5));
    }
}
