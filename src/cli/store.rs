//! Where the admin commands find the store, and saying so: a key written to the wrong data
//! directory is a key the server never sees, so every command that writes names the store,
//! and creating a new, empty one is worth a warning.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context as _;

use super::StoreArgs;
use crate::config::Config;
use crate::store::Store;

/// A store opened by an admin command.
pub struct Opened {
    /// The store, migrated.
    pub store: Arc<dyn Store>,
    /// What it is, for messages: `the SQLite store /abs/mast.db` or `the Postgres store …`.
    pub place: String,
    /// Whether there was no store before this command (it is new and empty).
    pub created: bool,
    location: String,
}

impl StoreArgs {
    /// A config that only carries the store settings.
    pub fn config(&self) -> Config {
        let mut c = Config::new(SocketAddr::from(([127, 0, 0, 1], 0)), self.data_dir.clone());
        c.database_url = self.database_url.clone().filter(|u| !u.is_empty());
        // The CLI stamps what it writes (keys, skills) with the same clock a server would.
        if let Ok(clock) = crate::config::clock_from_env() {
            c.clock = clock;
        }
        c
    }

    /// The SQLite file, when SQLite is the store.
    pub fn sqlite_file(&self) -> Option<PathBuf> {
        self.config().database_url.is_none().then(|| {
            std::path::absolute(&self.data_dir)
                .unwrap_or_else(|_| self.data_dir.clone())
                .join("mast.db")
        })
    }

    /// Where the store is: the SQLite file, or the Postgres URL without its password.
    pub fn location(&self) -> String {
        match (self.sqlite_file(), self.config().database_url) {
            (Some(file), _) => file.display().to_string(),
            (None, url) => crate::store::redacted_url(&url.unwrap_or_default()),
        }
    }

    /// What the store is, for messages: `the SQLite store /abs/mast.db`.
    pub fn place(&self) -> String {
        let kind = if self.sqlite_file().is_some() {
            "SQLite"
        } else {
            "Postgres"
        };
        format!("the {kind} store {}", self.location())
    }

    /// Whether a store (a migrated schema) is there already.
    pub async fn exists(&self) -> anyhow::Result<bool> {
        if let Some(file) = self.sqlite_file() {
            return Ok(file.exists());
        }
        let url = self.config().database_url.unwrap_or_default();
        let probe = async {
            use sqlx::Connection as _;
            let mut conn = sqlx::PgConnection::connect(&url).await?;
            let (found,): (bool,) =
                sqlx::query_as("SELECT to_regclass('_sqlx_migrations') IS NOT NULL")
                    .fetch_one(&mut conn)
                    .await?;
            conn.close().await.ok();
            Ok::<_, sqlx::Error>(found)
        };
        tokio::time::timeout(Duration::from_secs(10), probe)
            .await
            .map_err(|_| anyhow::anyhow!("timed out"))
            .and_then(|r| Ok(r?))
            .with_context(|| format!("could not reach {} (DATABASE_URL)", self.place()))
    }

    /// Opens the store, creating and migrating it when needed (say so with
    /// [`Opened::warn_if_created`]).
    pub async fn open(&self) -> anyhow::Result<Opened> {
        let created = !self.exists().await?;
        let store = crate::open_store(&self.config()).await?;
        Ok(Opened {
            store,
            place: self.place(),
            created,
            location: self.location(),
        })
    }

    /// Opens an existing store; refuses to create one (listing or revoking keys in a store
    /// that does not exist is a mistake about where the store is, not a wish for a new one).
    pub async fn open_existing(&self) -> anyhow::Result<Opened> {
        if !self.exists().await? {
            anyhow::bail!("there is no store at {}: {WHERE_HINT}", self.location());
        }
        self.open().await
    }
}

/// How to point a command at the server's store.
const WHERE_HINT: &str = "pass the same --data-dir (MAST_DATA_DIR) or DATABASE_URL as `mast serve`";

impl Opened {
    /// Warns on stderr when this command created the store: the server may well be using
    /// another one.
    pub fn warn_if_created(&self) {
        if self.created {
            eprintln!(
                "warning: there was no store at {}, so a new, empty one was created. If your server keeps \
                 its data elsewhere, {WHERE_HINT}.",
                self.location
            );
        }
    }
}
