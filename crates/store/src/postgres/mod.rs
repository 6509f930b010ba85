//! The Postgres store: [`PgStore`], typed statements on a [`PgPool`], migrations from
//! `migrations/postgres`, lease times on the database's clock ([`clock`]). Why it is shaped
//! so: `docs/store.md`.

use crate::HealthStore;
mod agents;
mod body_table;
mod clock;
mod deployments;
mod environments;
mod events;
mod files;
mod fork;
mod hot;
mod keys;
mod known_bodies;
mod leases;
mod memory;
mod reach;
mod rows;
mod sessions;
mod sink;
mod skills;
mod transact;
mod vaults;
// Hooks.
mod hooks;
mod webhooks;
mod work;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, Postgres};
use sqlx::{Encode, QueryBuilder, Type};

use super::{Direction, OpsCounts, Scan, Store, StoreResult};
use clock::DbClock;
use mast_domain::clock::Clock;

/// Migrations embedded in the binary.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

/// The origin named in the change signals the store sends: not a replica, since any process
/// writing the store (the CLI included) sends them.
const STORE_SIGNAL_ORIGIN: &str = "store";

/// Tells every replica on this database of a change (API keys, hooks) when `tx` commits:
/// Postgres delivers a notification only on commit (never for a rollback), after the change
/// is visible, so a replica that hears it and looks again finds the new state.
async fn announce(
    tx: &mut sqlx::Transaction<'_, sqlx::Postgres>,
    signal: crate::signal::Signal,
) -> StoreResult<()> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(crate::notify::CHANNEL)
        .bind(signal.encode(STORE_SIGNAL_ORIGIN))
        .execute(&mut **tx)
        .await?;
    Ok(())
}

/// The [`Store`] on Postgres. Cheap to clone (a pool, a shared clock and shared caches).
#[derive(Clone)]
pub struct PgStore {
    pool: PgPool,
    /// The session transaction's and the runner's reads' own connections (see [`hot`]).
    hot: Arc<hot::HotConns>,
    clock: Arc<DbClock>,
    /// The session bodies this process read, so hot reads leave out an unchanged one.
    bodies: Arc<known_bodies::KnownBodies>,
}

impl PgStore {
    /// The store without its cache of session bodies (`MAST_CACHES=off`): every hot read
    /// sends the body again. Nothing else changes.
    pub fn without_caches(mut self) -> Self {
        self.bodies = Arc::new(known_bodies::KnownBodies::new(0));
        self
    }
}

/// Connects to `url`, runs pending migrations, and returns the store, which stamps rows
/// with `clock`.
pub async fn connect(url: &str, max_connections: u32, clock: Clock) -> StoreResult<PgStore> {
    use sqlx::ConnectOptions as _;
    use std::str::FromStr as _;
    // Statements are logged at `trace` only (noise at `debug`, and they may carry user
    // data); slow ones (over a second) at `warn`.
    let options = PgConnectOptions::from_str(url)?
        .log_statements(tracing::log::LevelFilter::Trace)
        .log_slow_statements(tracing::log::LevelFilter::Warn, Duration::from_secs(1));
    reach::check(&options).await?;
    // Three quarters of the connections serve the engine's hot path, the rest everything else.
    let hot_size = (max_connections * 3 / 4).max(1);
    let pool = PgPoolOptions::new()
        .max_connections(max_connections.saturating_sub(hot_size).max(2))
        // Fail fast while the database is down instead of hanging requests.
        .acquire_timeout(Duration::from_secs(5))
        // A connection used a moment ago is alive; sqlx's own check pings on every use.
        .test_before_acquire(false)
        .before_acquire(|conn, meta| {
            Box::pin(async move {
                if meta.idle_for > Duration::from_secs(1) {
                    sqlx::Connection::ping(conn).await?;
                }
                Ok(true)
            })
        })
        .connect_with(options.clone())
        .await?;
    let hot = Arc::new(hot::HotConns::new(
        options,
        hot_size,
        transact::prepared_at_connect(),
    ));
    rewrite_history(&pool).await?;
    MIGRATOR
        .run(&pool)
        .await
        .map_err(|e| anyhow::anyhow!("postgres migrations failed: {e}"))?;
    let clock = Arc::new(DbClock::new(clock));
    clock.sync(&pool).await?;
    Ok(PgStore {
        pool,
        hot,
        clock,
        bodies: Arc::new(known_bodies::KnownBodies::new(known_bodies::DEFAULT_BUDGET)),
    })
}

/// Rewrites the rows an earlier release recorded for migrations since renumbered or
/// reworded (see `migration_history`), once, under a lock of its own so replicas starting
/// together do not interleave.
async fn rewrite_history(pool: &PgPool) -> anyhow::Result<()> {
    let mut tx = pool.begin().await?;
    sqlx::query("SELECT pg_advisory_xact_lock(hashtext('mast: migration history'))")
        .execute(&mut *tx)
        .await?;
    let recorded: bool = sqlx::query_scalar("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
        .fetch_one(&mut *tx)
        .await?;
    if recorded {
        for r in crate::migration_history::rewrites(
            crate::migration_history::Backend::Postgres,
            &MIGRATOR,
        ) {
            sqlx::query(
                "UPDATE _sqlx_migrations SET version = $1, checksum = $2 \
                 WHERE version = $3 AND checksum = $4",
            )
            .bind(r.version)
            .bind(&r.checksum)
            .bind(r.old_version)
            .bind(&r.old_checksum)
            .execute(&mut *tx)
            .await?;
        }
    }
    tx.commit().await?;
    Ok(())
}

/// The newest of the `recorded` (version, checksum) migration rows, in this binary's
/// numbering (a database an earlier release migrated records older numbers).
pub fn newest_applied(recorded: &[(i64, Vec<u8>)]) -> i64 {
    crate::migration_history::newest_applied(
        crate::migration_history::Backend::Postgres,
        &MIGRATOR,
        recorded,
    )
}

/// The newest migration this binary carries.
pub fn latest_migration() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}

/// Appends a keyset page to a list query: rows beyond `scan.after`, ordered, limited.
fn push_scan<'a, K>(qb: &mut QueryBuilder<'a, Postgres>, column: &str, scan: &Scan<K>)
where
    K: Clone + Send + Encode<'a, Postgres> + Type<Postgres> + 'a,
{
    let (op, order) = match scan.direction {
        Direction::Ascending => (" > ", " ASC"),
        Direction::Descending => (" < ", " DESC"),
    };
    if let Some(after) = &scan.after {
        qb.push(" AND ")
            .push(column)
            .push(op)
            .push_bind(after.clone());
    }
    qb.push(" ORDER BY ").push(column).push(order);
    qb.push(" LIMIT ").push_bind(scan.limit);
}

impl Store for PgStore {
    fn backend(&self) -> &'static str {
        "postgres"
    }

    fn clock(&self) -> &Clock {
        self.clock.local()
    }
}

#[async_trait]
impl HealthStore for PgStore {
    async fn readiness(&self) -> Option<String> {
        let latest = latest_migration();
        let v = sqlx::query_scalar::<_, i64>(
            "SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations WHERE success = TRUE",
        )
        .fetch_one(&self.pool)
        .await;
        match v {
            Err(e) => Some(format!("the database is unreachable: {e}")),
            Ok(v) if v < latest => Some(format!(
                "the database schema is at migration {v}, this binary needs {latest}"
            )),
            Ok(_) => None,
        }
    }

    async fn ops_counts(&self) -> StoreResult<OpsCounts> {
        let sessions_by_status = sqlx::query_as::<_, (String, i64)>(
            "SELECT status, COUNT(*) FROM sessions GROUP BY status",
        )
        .fetch_all(&self.pool)
        .await?;
        let queued_work =
            sqlx::query_scalar("SELECT COUNT(*) FROM work_items WHERE state = 'queued'")
                .fetch_one(&self.pool)
                .await?;
        Ok(OpsCounts {
            sessions_by_status,
            queued_work,
        })
    }
}
