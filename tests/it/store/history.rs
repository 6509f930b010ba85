//! A database an earlier release migrated — its migrations recorded under their old numbers
//! and old checksums — opens with this release, its history rewritten to today's numbering;
//! a recorded migration that matches neither form is still refused.

use mast::store::migration_history::{self, Rewrite};
use sqlx::Connection;

use crate::support::{Backend, Options, fresh_postgres_database, test_config};

static PG: sqlx::migrate::Migrator = sqlx::migrate!("crates/store/migrations/postgres");
static LITE: sqlx::migrate::Migrator = sqlx::migrate!("crates/store/migrations/sqlite");

fn rewrites(b: Backend) -> Vec<Rewrite> {
    match b {
        Backend::Postgres => migration_history::rewrites(migration_history::Backend::Postgres, &PG),
        Backend::Sqlite => migration_history::rewrites(migration_history::Backend::Sqlite, &LITE),
    }
}

/// Runs `sql` with three binds on the store's database.
async fn execute(b: Backend, url: &str, sql: &str, binds: (i64, &[u8], i64)) {
    match b {
        Backend::Postgres => {
            let mut c = sqlx::PgConnection::connect(url).await.unwrap();
            let sql = sql
                .replace("?1", "$1")
                .replace("?2", "$2")
                .replace("?3", "$3");
            let q = sqlx::query(&sql).bind(binds.0).bind(binds.1).bind(binds.2);
            q.execute(&mut c).await.unwrap();
        }
        Backend::Sqlite => {
            let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
            let q = sqlx::query(sql).bind(binds.0).bind(binds.1).bind(binds.2);
            q.execute(&mut c).await.unwrap();
        }
    }
}

/// The recorded (version, checksum) rows, in version order.
async fn recorded(b: Backend, url: &str) -> Vec<(i64, Vec<u8>)> {
    let sql = "SELECT version, checksum FROM _sqlx_migrations ORDER BY version";
    match b {
        Backend::Postgres => {
            let mut c = sqlx::PgConnection::connect(url).await.unwrap();
            sqlx::query_as(sql).fetch_all(&mut c).await.unwrap()
        }
        Backend::Sqlite => {
            let mut c = sqlx::SqliteConnection::connect(url).await.unwrap();
            sqlx::query_as(sql).fetch_all(&mut c).await.unwrap()
        }
    }
}

/// Migrates the database at `url` as the earlier release did: today's migrations up to
/// version `known`, read from a directory holding only those.
async fn earlier_release_schema(b: Backend, url: &str, known: i64) {
    let src = match b {
        Backend::Postgres => "crates/store/migrations/postgres",
        Backend::Sqlite => "crates/store/migrations/sqlite",
    };
    let dir = tempfile::TempDir::new().unwrap();
    for entry in
        std::fs::read_dir(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(src)).unwrap()
    {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().to_string();
        let version: i64 = name.split('_').next().unwrap().parse().unwrap();
        if version <= known {
            std::fs::copy(&path, dir.path().join(&name)).unwrap();
        }
    }
    let migrator = sqlx::migrate::Migrator::new(dir.path()).await.unwrap();
    match b {
        Backend::Postgres => {
            let mut c = sqlx::PgConnection::connect(url).await.unwrap();
            migrator.run(&mut c).await.unwrap();
        }
        Backend::Sqlite => {
            let mut c = sqlx::SqliteConnection::connect(&format!("{url}?mode=rwc"))
                .await
                .unwrap();
            migrator.run(&mut c).await.unwrap();
        }
    }
}

async fn an_earlier_releases_database_upgrades(b: Backend) {
    let dir = tempfile::TempDir::new().unwrap();
    let pg = match b {
        Backend::Postgres => Some(fresh_postgres_database().await),
        Backend::Sqlite => None,
    };
    let config = test_config(dir.path().to_path_buf(), pg.clone(), &Options::default());
    let url = pg
        .clone()
        .unwrap_or_else(|| format!("sqlite://{}", dir.path().join("mast.db").display()));
    // The earlier release had today's migrations up to the last one it renumbered; later
    // ones are this release's to apply.
    let rewrites = rewrites(b);
    let known = rewrites.iter().map(|r| r.version).max().unwrap();
    earlier_release_schema(b, &url, known).await;
    let today = recorded(b, &url).await;
    // Put the history back as the earlier release left it, newest first so no number collides.
    let migrator = match b {
        Backend::Postgres => &PG,
        Backend::Sqlite => &LITE,
    };
    assert!(!rewrites.is_empty());
    for r in rewrites.iter().rev() {
        execute(
            b,
            &url,
            "UPDATE _sqlx_migrations SET version = ?3, checksum = ?2 WHERE version = ?1",
            (r.version, &r.old_checksum, r.old_version),
        )
        .await;
    }
    let earlier = recorded(b, &url).await;
    assert_ne!(earlier, today, "the history was put back as it was");
    assert!(
        earlier.iter().any(|(v, _)| *v > today.len() as i64),
        "old numbers have gaps"
    );

    let store = mast::open_store(&config).await.unwrap();
    assert_eq!(store.count_api_keys().await.unwrap(), 0);
    drop(store);
    // The earlier history is today's, and this release's own migrations follow it.
    let upgraded = recorded(b, &url).await;
    assert_eq!(upgraded[..today.len()], today[..]);
    let all: Vec<(i64, Vec<u8>)> = migrator
        .iter()
        .map(|m| (m.version, m.checksum.to_vec()))
        .collect();
    assert_eq!(upgraded, all);

    // A recorded migration whose checksum is neither its old one nor today's is refused.
    let r = &rewrites[0];
    execute(
        b,
        &url,
        "UPDATE _sqlx_migrations SET version = ?3, checksum = ?2 WHERE version = ?1",
        (r.version, &[0u8; 48], r.old_version),
    )
    .await;
    let refused = mast::open_store(&config)
        .await
        .err()
        .expect("a changed migration is refused");
    assert!(format!("{refused:#}").contains("migration"), "{refused:#}");
}

crate::backend_tests!(an_earlier_releases_database_upgrades);
