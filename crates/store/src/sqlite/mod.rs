//! The embedded SQLite store: one file under the data directory, in WAL mode, served by
//! threads that own their connections (see [`db`]): one writer, which runs each operation
//! whole (read, decide, write, commit) in one hop from the async side, and a few readers.
//! Built on rusqlite: typed columns, cached prepared statements, no per-statement thread hop.

use crate::HealthStore;
mod body_table;
mod catalog;
mod clock;
mod db;
mod deployments;
mod error;
mod files;
mod fork;
mod memory;
mod migrate;
mod rows;
mod sessions;
mod skills;
mod vaults;
// Hooks.
mod hooks;
mod webhooks;
mod work;

use std::path::Path;

use async_trait::async_trait;
use mast_domain::clock::Clock;
use rusqlite::{Connection, OpenFlags};

use self::db::Db;
use super::{OpsCounts, Store, StoreResult};

/// Reader threads (and connections); WAL lets them read while the writer writes.
const READERS: usize = 4;
/// Prepared statements each connection keeps (every fixed statement fits, and the common
/// shapes of the filtered lists).
const STATEMENT_CACHE: usize = 128;

/// SQLite's `synchronous` setting, which decides what a power loss (or an OS crash) can take
/// back. A crash of Mast alone loses nothing acknowledged under either.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// Every commit is synced to disk before it is acknowledged: nothing acknowledged is lost.
    #[default]
    Full,
    /// The WAL is synced only at checkpoints: faster commits, but a power loss can take back
    /// the last transactions, events clients were told are stored included.
    Normal,
}

impl std::str::FromStr for Synchronous {
    type Err = anyhow::Error;

    fn from_str(s: &str) -> anyhow::Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "full" => Ok(Synchronous::Full),
            "normal" => Ok(Synchronous::Normal),
            _ => anyhow::bail!("must be `full` or `normal`"),
        }
    }
}

impl Synchronous {
    /// The value of `PRAGMA synchronous` for this setting.
    pub fn pragma(self) -> &'static str {
        match self {
            Synchronous::Full => "FULL",
            Synchronous::Normal => "NORMAL",
        }
    }
}

/// The SQLite [`Store`].
#[derive(Clone)]
pub struct SqliteStore {
    db: Db,
    /// Where the time comes from; every connection reads it through `mast_now()`.
    clock: Clock,
}

/// The newest of the `recorded` (version, checksum) migration rows, in this binary's
/// numbering (a database an earlier release migrated records older numbers).
pub fn newest_applied(recorded: &[(i64, Vec<u8>)]) -> i64 {
    crate::migration_history::newest_applied(
        crate::migration_history::Backend::Sqlite,
        &migrate::MIGRATOR,
        recorded,
    )
}

/// The newest migration this binary carries.
pub fn latest_migration() -> i64 {
    migrate::latest()
}

fn connect(
    path: &Path,
    flags: OpenFlags,
    synchronous: Synchronous,
    clock: &Clock,
) -> rusqlite::Result<Connection> {
    let conn = Connection::open_with_flags(path, flags)?;
    clock::install(&conn, clock.clone())?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    conn.busy_timeout(std::time::Duration::from_secs(10))?;
    conn.execute_batch(&format!(
        "PRAGMA synchronous = {}; PRAGMA foreign_keys = ON;",
        synchronous.pragma()
    ))?;
    Ok(conn)
}

/// Opens (creating if needed) `<data_dir>/mast.db`, migrates it and returns the store, which
/// stamps rows with `clock`.
pub async fn open(
    data_dir: &Path,
    synchronous: Synchronous,
    clock: Clock,
) -> StoreResult<SqliteStore> {
    let data_dir = data_dir.to_path_buf();
    // Opening and migrating do blocking I/O (and a migration may take a while).
    tokio::task::spawn_blocking(move || open_blocking(&data_dir, synchronous, clock))
        .await
        .map_err(|e| anyhow::anyhow!("opening the SQLite store panicked: {e}"))?
}

fn open_blocking(
    data_dir: &Path,
    synchronous: Synchronous,
    clock: Clock,
) -> StoreResult<SqliteStore> {
    std::fs::create_dir_all(data_dir)
        .map_err(|e| anyhow::anyhow!("cannot create data directory {}: {e}", data_dir.display()))?;
    let path = data_dir.join("mast.db");
    let mut writer = connect(
        &path,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        synchronous,
        &clock,
    )?;
    let mode: String = writer.query_row("PRAGMA journal_mode = WAL", [], |r| r.get(0))?;
    if !mode.eq_ignore_ascii_case("wal") {
        return Err(
            anyhow::anyhow!("{} cannot use WAL (journal mode {mode})", path.display()).into(),
        );
    }
    // The database is the server's alone (SQLite gives its WAL files the same mode).
    for name in ["mast.db", "mast.db-wal", "mast.db-shm"] {
        use std::os::unix::fs::PermissionsExt;
        let file = data_dir.join(name);
        if file.exists() {
            std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| anyhow::anyhow!("cannot restrict {}: {e}", file.display()))?;
        }
    }
    migrate::run(&mut writer).map_err(|e| anyhow::anyhow!("sqlite migrations failed: {e}"))?;
    let readers = (0..READERS)
        .map(|_| {
            connect(
                &path,
                OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
                synchronous,
                &clock,
            )
        })
        .collect::<Result<Vec<_>, _>>()?;
    let db = Db::start(writer, readers)
        .map_err(|e| anyhow::anyhow!("cannot start the SQLite threads: {e}"))?;
    Ok(SqliteStore { db, clock })
}

impl Store for SqliteStore {
    fn backend(&self) -> &'static str {
        "sqlite"
    }

    fn clock(&self) -> &Clock {
        &self.clock
    }
}

#[cfg(test)]
mod tests;

#[async_trait]
impl HealthStore for SqliteStore {
    async fn readiness(&self) -> Option<String> {
        let latest = latest_migration();
        match self.db.read(|c| Ok(migrate::applied(c)?)).await {
            Err(e) => Some(format!("the database is unreachable: {e}")),
            Ok(v) if v < latest => Some(format!(
                "the database schema is at migration {v}, this binary needs {latest}"
            )),
            Ok(_) => None,
        }
    }

    async fn ops_counts(&self) -> StoreResult<OpsCounts> {
        self.db.read(sessions::ops_counts).await
    }
}
