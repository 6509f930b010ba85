//! Connections for the engine's hot path (the session transaction and the runner's reads),
//! kept apart from sqlx's pool.
//!
//! sqlx 0.8's pool pings a connection when it hands it out and again when it comes back: two
//! round trips to the server around every statement or transaction, which cost as much as the
//! work itself on a local database. Here a connection that finished its work cleanly goes
//! straight back; one dropped mid-use (an error, or a caller's future cancelled, which may
//! leave a transaction open) is closed instead. A connection is checked only after sitting
//! idle a while, when the server or a proxy may have dropped it.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sqlx::postgres::{PgConnectOptions, PgConnection};
use sqlx::{Connection as _, Executor as _};
use tokio::sync::{Semaphore, SemaphorePermit};

use crate::{StoreError, StoreResult};

/// How long a connection may sit idle before it is checked on its way out.
const CHECK_AFTER_IDLE: Duration = Duration::from_secs(1);

/// How long a caller waits for a connection (as sqlx's pool is configured): fail fast while
/// the database is away instead of hanging requests.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(5);

/// A small pool of connections that skips sqlx's per-use pings.
pub(super) struct HotConns {
    options: PgConnectOptions,
    /// What every new connection runs first (statements it prepares).
    setup: String,
    idle: Mutex<Vec<(PgConnection, Prepared, Instant)>>,
    permits: Semaphore,
}

/// A connection taken from [`HotConns`]; closed on drop unless [`HotConn::release`]d.
pub(super) struct HotConn<'a> {
    conn: Option<(PgConnection, Prepared)>,
    home: &'a HotConns,
    _permit: SemaphorePermit<'a>,
}

/// How many statements a connection keeps prepared by name (beyond sqlx's own cache).
const MAX_PREPARED: usize = 200;

/// The statements this code prepared by name (`PREPARE`) on one connection, by their text:
/// they live as long as the connection, and outlive a rolled-back transaction.
#[derive(Debug, Default)]
pub(super) struct Prepared {
    names: HashMap<String, String>,
    /// Names handed out so far; a name is never handed out twice, so one a failed query
    /// may have prepared is never prepared again.
    issued: u64,
}

impl Prepared {
    /// The name `text` is prepared under, if it is.
    pub(super) fn name_of(&self, text: &str) -> Option<&str> {
        self.names.get(text).map(String::as_str)
    }

    /// A name never used on this connection.
    pub(super) fn next_name(&mut self) -> String {
        self.issued += 1;
        format!("mast_w_{}", self.issued)
    }

    /// Whether another statement may be kept prepared.
    pub(super) fn has_room(&self) -> bool {
        self.names.len() < MAX_PREPARED
    }

    /// Notes that `text` is prepared as `name`.
    pub(super) fn remember(&mut self, text: String, name: String) {
        self.names.insert(text, name);
    }
}

impl HotConns {
    /// Up to `size` connections to the server `options` names, opened when first needed;
    /// each runs `setup` when it opens.
    pub(super) fn new(options: PgConnectOptions, size: u32, setup: String) -> Self {
        HotConns {
            options,
            setup,
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(size.max(1) as usize),
        }
    }

    /// A connection: the most recently used idle one (checked if it idled long), or a new one.
    pub(super) async fn get(&self) -> StoreResult<HotConn<'_>> {
        let permit = tokio::time::timeout(ACQUIRE_TIMEOUT, self.permits.acquire())
            .await
            .map_err(|_| sqlx::Error::PoolTimedOut)?
            .map_err(|_| sqlx::Error::PoolClosed)?;
        loop {
            let next = self.idle.lock().expect("hot connections").pop();
            let Some((mut conn, prepared, since)) = next else {
                break;
            };
            if since.elapsed() < CHECK_AFTER_IDLE || conn.ping().await.is_ok() {
                return Ok(HotConn {
                    conn: Some((conn, prepared)),
                    home: self,
                    _permit: permit,
                });
            }
            // The server dropped this one (a restart, an idle timeout): the others idled
            // as long or longer, so they go too.
            self.idle.lock().expect("hot connections").clear();
        }
        let conn = tokio::time::timeout(ACQUIRE_TIMEOUT, async {
            let mut conn = PgConnection::connect_with(&self.options).await?;
            conn.execute(sqlx::raw_sql(&self.setup)).await?;
            Ok::<_, sqlx::Error>(conn)
        })
        .await
        .map_err(|_| sqlx::Error::PoolTimedOut)??;
        Ok(HotConn {
            conn: Some((conn, Prepared::default())),
            home: self,
            _permit: permit,
        })
    }
}

impl HotConn<'_> {
    /// The connection, for running statements on.
    pub(super) fn conn(&mut self) -> &mut PgConnection {
        self.parts().0
    }

    /// The connection and what is prepared on it.
    pub(super) fn parts(&mut self) -> (&mut PgConnection, &mut Prepared) {
        let (conn, prepared) = self
            .conn
            .as_mut()
            .expect("a hot connection is held until released");
        (conn, prepared)
    }

    /// Hands the connection back for reuse: call only when its last statement finished and
    /// no transaction is open on it.
    pub(super) fn release(mut self) {
        if let Some((conn, prepared)) = self.conn.take() {
            self.home
                .idle
                .lock()
                .expect("hot connections")
                .push((conn, prepared, Instant::now()));
        }
    }

    /// Hands the connection back after `result`, or closes it when the result is an error
    /// that may have left it unusable (anything but a refusal by the database itself, which
    /// leaves a connection outside a transaction as good as before).
    pub(super) fn finish<T>(self, result: StoreResult<T>) -> StoreResult<T> {
        match &result {
            Ok(_) | Err(StoreError::Conflict(_) | StoreError::Invalid(_)) => self.release(),
            Err(StoreError::Unavailable(_)) => {
                // The database went away: every idle connection is as dead as this one.
                self.home.idle.lock().expect("hot connections").clear();
            }
            Err(_) => {}
        }
        result
    }
}
