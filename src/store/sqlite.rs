//! The embedded SQLite store: one file under the data directory, WAL mode, a single writer
//! connection and a small pool of readers; migrations from `migrations/sqlite`.

use std::path::Path;
use std::time::Duration;

use sqlx::Executor;
use sqlx::any::AnyPoolOptions;

use super::StoreResult;
use super::sql::{Dialect, SqlStore};

/// Migrations embedded in the binary.
static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");

const PRAGMAS: &str = "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; \
    PRAGMA busy_timeout = 10000; PRAGMA foreign_keys = ON;";

/// Opens (creating if needed) `<data_dir>/mast.db`, migrates it and returns the store.
pub async fn open(data_dir: &Path) -> StoreResult<SqlStore> {
    std::fs::create_dir_all(data_dir)
        .map_err(|e| anyhow::anyhow!("cannot create data directory {}: {e}", data_dir.display()))?;
    let path = data_dir.join("mast.db");
    let url = format!("sqlite://{}?mode=rwc", path.display());
    sqlx::any::install_default_drivers();
    let options = |n: u32| {
        AnyPoolOptions::new()
            .max_connections(n)
            .acquire_timeout(Duration::from_secs(30))
            .after_connect(|conn, _| {
                Box::pin(async move { conn.execute(PRAGMAS).await.map(|_| ()) })
            })
    };
    let write = options(1)
        .connect_with(super::sql::connect_options(&url)?)
        .await?;
    // The database is the server's alone (SQLite gives its WAL files the same mode).
    for name in ["mast.db", "mast.db-wal", "mast.db-shm"] {
        use std::os::unix::fs::PermissionsExt;
        let file = data_dir.join(name);
        if file.exists() {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| anyhow::anyhow!("cannot restrict {}: {e}", file.display()))?;
        }
    }
    MIGRATOR
        .run(&write)
        .await
        .map_err(|e| anyhow::anyhow!("sqlite migrations failed: {e}"))?;
    let read = options(4)
        .connect_with(super::sql::connect_options(&url)?)
        .await?;
    Ok(SqlStore::new(write, read, Dialect::Sqlite))
}

/// The newest migration this binary carries.
pub(crate) fn latest_migration() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}
