//! Connecting to Postgres: pool settings and migrations (`migrations/postgres`).

use std::time::Duration;

use sqlx::any::AnyPoolOptions;

use super::StoreResult;
use super::sql::{Dialect, SqlStore};

/// Migrations embedded in the binary.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/postgres");

/// Connects to `url`, runs pending migrations, and returns the store.
pub async fn connect(url: &str, max_connections: u32) -> StoreResult<SqlStore> {
    sqlx::any::install_default_drivers();
    let pool = AnyPoolOptions::new()
        .max_connections(max_connections)
        // Fail fast while the database is down instead of hanging requests.
        .acquire_timeout(Duration::from_secs(5))
        .connect_with(super::sql::connect_options(url)?)
        .await?;
    MIGRATOR
        .run(&pool)
        .await
        .map_err(|e| anyhow::anyhow!("postgres migrations failed: {e}"))?;
    Ok(SqlStore::new(pool.clone(), pool, Dialect::Postgres))
}

/// The newest migration this binary carries.
pub(crate) fn latest_migration() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}
