//! Schema migrations (`migrations/sqlite`), applied and recorded exactly as sqlx does, so a
//! database keeps working across binaries that used sqlx's migrator and this one: the same
//! `_sqlx_migrations` table and rows (version, description, success, SHA-384 checksum of the
//! file, execution time in nanoseconds), the same refusals (a dirty, changed or unknown
//! applied migration).

use std::time::Instant;

use rusqlite::{Connection, OptionalExtension, params};

/// The migrations embedded in the binary (sqlx's macro reads the directory and checksums
/// each file at compile time; nothing of sqlx runs against the database).
pub(super) static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("migrations/sqlite");

/// The newest migration this binary carries.
pub(crate) fn latest() -> i64 {
    MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0)
}

/// Brings the schema up to date; refuses a database this binary does not understand.
pub(super) fn run(conn: &mut Connection) -> anyhow::Result<()> {
    conn.execute_batch(
        "CREATE TABLE IF NOT EXISTS _sqlx_migrations (
            version BIGINT PRIMARY KEY,
            description TEXT NOT NULL,
            installed_on TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP,
            success BOOLEAN NOT NULL,
            checksum BLOB NOT NULL,
            execution_time BIGINT NOT NULL
        );",
    )?;
    // A database an earlier release migrated records its old numbers and checksums.
    let tx = conn.transaction()?;
    for r in
        crate::migration_history::rewrites(crate::migration_history::Backend::Sqlite, &MIGRATOR)
    {
        tx.execute(
            "UPDATE _sqlx_migrations SET version = ?1, checksum = ?2 \
             WHERE version = ?3 AND checksum = ?4",
            params![r.version, r.checksum, r.old_version, r.old_checksum],
        )?;
    }
    tx.commit()?;
    let dirty: Option<i64> = conn
        .query_row(
            "SELECT version FROM _sqlx_migrations WHERE success = false ORDER BY version LIMIT 1",
            [],
            |r| r.get(0),
        )
        .optional()?;
    if let Some(v) = dirty {
        anyhow::bail!("migration {v} is partially applied; try repairing the database by hand");
    }
    let applied: Vec<(i64, Vec<u8>)> = conn
        .prepare("SELECT version, checksum FROM _sqlx_migrations ORDER BY version")?
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    for (version, checksum) in &applied {
        match MIGRATOR.iter().find(|m| m.version == *version) {
            None => anyhow::bail!(
                "migration {version} was applied to this database but this binary does not know \
                 it (the database is newer than this binary)"
            ),
            Some(m) if m.checksum.as_ref() != checksum.as_slice() => anyhow::bail!(
                "migration {version} was applied to this database but it has been modified since"
            ),
            Some(_) => {}
        }
    }
    for m in MIGRATOR.iter() {
        if m.migration_type.is_down_migration() || applied.iter().any(|(v, _)| *v == m.version) {
            continue;
        }
        let started = Instant::now();
        let tx = conn.transaction()?;
        tx.execute_batch(&m.sql)
            .map_err(|e| anyhow::anyhow!("migration {} failed: {e}", m.version))?;
        tx.execute(
            "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) \
             VALUES (?1, ?2, TRUE, ?3, -1)",
            params![m.version, m.description.as_ref(), m.checksum.as_ref()],
        )?;
        tx.commit()?;
        let nanos = i64::try_from(started.elapsed().as_nanos()).unwrap_or(i64::MAX);
        conn.execute(
            "UPDATE _sqlx_migrations SET execution_time = ?1 WHERE version = ?2",
            params![nanos, m.version],
        )?;
    }
    Ok(())
}

/// The newest successfully applied migration (0 before any).
pub(super) fn applied(conn: &Connection) -> rusqlite::Result<i64> {
    conn.query_row(
        "SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations WHERE success = TRUE",
        [],
        |r| r.get(0),
    )
}
