//! The store check: what the store holds (schema version, API keys), read without changing
//! it, and whether the server would start open or closed.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use super::{Finding, Setup};

/// What the store holds, read without changing it.
struct StoreState {
    migration: i64,
    keys: i64,
    /// Unrevoked keys (None before the schema had revocation).
    active: Option<i64>,
}

impl StoreState {
    /// A store not created yet: no key in it.
    const EMPTY: StoreState = StoreState {
        migration: 0,
        keys: 0,
        active: None,
    };
}

/// Reads the schema version and key counts of a Postgres database (`exists` says whether
/// Mast's schema is there at all).
async fn read_postgres_state(
    conn: &mut sqlx::PgConnection,
    exists: &str,
) -> Result<Option<StoreState>, sqlx::Error> {
    let exists: bool = sqlx::query_scalar(exists).fetch_one(&mut *conn).await?;
    if !exists {
        return Ok(None);
    }
    let recorded: Vec<(i64, Vec<u8>)> =
        sqlx::query_as("SELECT version, checksum FROM _sqlx_migrations WHERE success = TRUE")
            .fetch_all(&mut *conn)
            .await?;
    let migration = crate::store::postgres::newest_applied(&recorded);
    let keys: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM api_keys")
        .fetch_one(&mut *conn)
        .await
        .unwrap_or(0);
    let active: Option<i64> =
        sqlx::query_scalar("SELECT COUNT(*) FROM api_keys WHERE revoked_at IS NULL")
            .fetch_one(&mut *conn)
            .await
            .ok();
    Ok(Some(StoreState {
        migration,
        keys,
        active,
    }))
}

/// Reads the schema version and key counts of a SQLite file, opened read-only.
fn read_sqlite_state(file: &Path) -> Result<Option<StoreState>, String> {
    use rusqlite::OpenFlags;
    let read = || -> rusqlite::Result<Option<StoreState>> {
        let conn = rusqlite::Connection::open_with_flags(
            file,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )?;
        conn.busy_timeout(Duration::from_secs(10))?;
        let exists: bool = conn.query_row(
            "SELECT EXISTS (SELECT 1 FROM sqlite_master WHERE name = '_sqlx_migrations')",
            [],
            |r| r.get(0),
        )?;
        if !exists {
            return Ok(None);
        }
        let recorded: Vec<(i64, Vec<u8>)> = conn
            .prepare("SELECT version, checksum FROM _sqlx_migrations WHERE success = TRUE")?
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
            .collect::<Result<_, _>>()?;
        let migration = crate::store::sqlite::newest_applied(&recorded);
        let keys: i64 = conn
            .query_row("SELECT COUNT(*) FROM api_keys", [], |r| r.get(0))
            .unwrap_or(0);
        let active: Option<i64> = conn
            .query_row(
                "SELECT COUNT(*) FROM api_keys WHERE revoked_at IS NULL",
                [],
                |r| r.get(0),
            )
            .ok();
        Ok(Some(StoreState {
            migration,
            keys,
            active,
        }))
    };
    read().map_err(|e| e.to_string())
}

pub(super) async fn store_check(setup: &Setup) -> Vec<Finding> {
    const NAME: &str = "store";
    let place = setup.store.place();
    let (state, latest) = match setup.store.sqlite_file() {
        Some(file) => {
            if !file.exists() {
                return vec![
                    Finding::warn(
                        NAME,
                        format!("there is no store yet at {}", file.display()),
                        "`mast serve` (or `mast migrate`) creates it; if your data is elsewhere, pass its \
                         --data-dir (MAST_DATA_DIR) or DATABASE_URL",
                    ),
                    auth_finding(&StoreState::EMPTY, setup.listen),
                ];
            }
            let read = {
                let file = file.clone();
                tokio::task::spawn_blocking(move || read_sqlite_state(&file))
            };
            let read = read.await.unwrap_or_else(|e| Err(e.to_string()));
            (read, crate::store::sqlite::latest_migration())
        }
        None => {
            let url = setup.store.config().database_url.unwrap_or_default();
            let read = async {
                use sqlx::Connection as _;
                let mut conn = sqlx::PgConnection::connect(&url).await?;
                read_postgres_state(
                    &mut conn,
                    "SELECT to_regclass('_sqlx_migrations') IS NOT NULL",
                )
                .await
            };
            let read = match tokio::time::timeout(Duration::from_secs(10), read).await {
                Ok(r) => r.map_err(|e| e.to_string()),
                Err(_) => Err(sqlx::Error::PoolTimedOut.to_string()),
            };
            (read, crate::store::postgres::latest_migration())
        }
    };
    let state = match state {
        Err(e) => {
            return vec![Finding::fail(
                NAME,
                format!("cannot read {place}: {e}"),
                if setup.store.sqlite_file().is_some() {
                    "check the file's owner and mode, and that the disk is not full"
                } else {
                    "check DATABASE_URL (host, port, database, user and password) and that Postgres runs and \
                     accepts connections from here"
                },
            )];
        }
        Ok(None) => {
            return vec![
                Finding::warn(
                    NAME,
                    format!("{place} is reachable but empty (no Mast schema)"),
                    "`mast serve` (or `mast migrate`) creates the schema; if your data is elsewhere, fix \
                     DATABASE_URL",
                ),
                auth_finding(&StoreState::EMPTY, setup.listen),
            ];
        }
        Ok(Some(s)) => s,
    };
    let mut out = vec![match state.migration.cmp(&latest) {
        std::cmp::Ordering::Equal => Finding::ok(
            NAME,
            format!("{place} is reachable, schema up to date (migration {latest})"),
        ),
        std::cmp::Ordering::Less => Finding::warn(
            NAME,
            format!(
                "{place} is at migration {}; this binary needs {latest}",
                state.migration
            ),
            "stop every server still on the older binary (migration 6 reshapes the sessions and events \
             tables, which older binaries cannot read), then `mast serve` migrates it on start, or run \
             `mast migrate`",
        ),
        std::cmp::Ordering::Greater => Finding::fail(
            NAME,
            format!(
                "{place} was migrated by a newer Mast (migration {}; this binary knows {latest})",
                state.migration
            ),
            "run the newer mast binary",
        ),
    }];
    out.push(auth_finding(&state, setup.listen));
    out
}

fn auth_finding(state: &StoreState, listen: SocketAddr) -> Finding {
    const NAME: &str = "auth";
    let loopback = listen.ip().is_loopback();
    match (state.keys, state.active) {
        (0, _) if loopback => Finding::warn(
            NAME,
            "no API key yet: the server accepts unauthenticated requests (loopback only)",
            "create one with `mast keys create` before anyone else can reach the server",
        ),
        (0, _) => Finding::fail(
            NAME,
            format!("no API key: `mast serve` refuses to listen on {listen} without one"),
            "create one with `mast keys create` (or set MAST_BOOTSTRAP_API_KEY)",
        ),
        (_, Some(0)) => Finding::fail(
            NAME,
            "every API key is revoked: every request is refused",
            "create one with `mast keys create`",
        ),
        (n, active) => Finding::ok(NAME, format!("{} active API key(s)", active.unwrap_or(n))),
    }
}
