//! Mast: a self-hostable server for the Claude Managed Agents API.
//!
//! [`start`] assembles the store, hub, engine and HTTP router and serves them on a listener;
//! the binary and the integration tests both go through it. It opens the configured store
//! (Postgres when a database URL is set, else SQLite in the data directory, which it locks),
//! builds the hub, the models, the tools, the engine with its vaults, hooks and Files services,
//! and the router, and starts what a server owns besides: the engine's reaper and scheduler,
//! the replica listener on Postgres, the Files sweep, the key watch and the webhook sender.
//!
//! This package is the top of the workspace. The layers are the crates under `crates/`; this
//! one holds only what assembles and drives them: `main.rs`, the command line (`cli`: `serve`,
//! `migrate`, `keys`, `doctor`, `agents`, `sessions`, `send`, `openapi` and the rest),
//! configuration from file, environment and flags (`config`), and the benchmark harness
//! (`src/bin/mast-bench`). Engine or store logic does not belong here.

pub mod cli;
pub mod config;
pub mod logging;

// The layers, each a crate of its own, under the names they had when they were modules of
// this one: the CLI, the tests and the benchmark harness reach them as `mast::store` and so on.
pub use mast_api as api;
pub use mast_domain as domain;
pub use mast_domain::{error_chain, private_fs};
pub use mast_engine as engine;
pub use mast_engine::{files, hub, secrets, standard_webhooks, telemetry};
pub use mast_models as models;
pub use mast_sandbox as tools;
pub use mast_store as store;
pub use mast_store::{blobs, lru};

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context as _;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::api::auth::{Authenticator, DEFAULT_WORKSPACE, hash_key};
use crate::api::{AppState, Shared};
use crate::config::Config;
use crate::engine::Engine;
use crate::hub::Hub;
use crate::models::Models;
use crate::store::Store;

/// Opens the configured store (Postgres when `database_url` is set, else SQLite), migrated.
pub async fn open_store(config: &Config) -> anyhow::Result<Arc<dyn Store>> {
    Ok(match &config.database_url {
        Some(url) => Arc::new({
            let store =
                store::postgres::connect(url, config.db_max_connections, config.clock.clone())
                    .await
                    .with_context(|| "could not open the Postgres store (DATABASE_URL)")?;
            if config.engine.caches {
                store
            } else {
                store.without_caches()
            }
        }),
        None => Arc::new(
            store::sqlite::open(
                &config.data_dir,
                config.sqlite_synchronous,
                config.clock.clone(),
            )
            .await
            .with_context(|| {
                format!(
                    "could not open the SQLite store in {}",
                    config.data_dir.display()
                )
            })?,
        ),
    })
}

pub use mast_engine::keys::NewKey;

/// Creates a new API key for a workspace (created if missing); returns the key, shown once.
pub async fn create_api_key(store: &dyn Store, workspace: &str) -> anyhow::Result<String> {
    Ok(mint_api_key(store, workspace).await?.key)
}

/// Creates a new API key for a workspace (created if missing), with its id.
pub async fn mint_api_key(store: &dyn Store, workspace: &str) -> anyhow::Result<NewKey> {
    Ok(engine::keys::mint_api_key(store, workspace).await?)
}

/// Creates a worker key for a self-hosted environment of a workspace; returns it, shown once.
pub async fn create_environment_key(
    store: &dyn Store,
    workspace: &str,
    environment_id: &str,
) -> anyhow::Result<String> {
    Ok(mint_environment_key(store, workspace, environment_id)
        .await?
        .key)
}

/// Creates a worker key for a self-hosted environment of a workspace, with its id.
pub async fn mint_environment_key(
    store: &dyn Store,
    workspace: &str,
    environment_id: &str,
) -> anyhow::Result<NewKey> {
    let ws = store.ensure_workspace(workspace).await?;
    let env = store
        .get_environment(&ws, environment_id)
        .await?
        .ok_or_else(|| {
            anyhow::anyhow!("environment `{environment_id}` not found in workspace `{workspace}`")
        })?;
    anyhow::ensure!(
        matches!(
            env.config,
            domain::environment::EnvironmentConfig::SelfHosted
        ),
        "environment `{environment_id}` is not self_hosted; only self-hosted environments have worker keys"
    );
    let key = engine::keys::mint_environment_key(store, &ws, environment_id).await?;
    Ok(NewKey {
        id: key.id,
        workspace_id: ws,
        key: key.key.unwrap_or_default(),
    })
}

/// A running server.
pub struct Running {
    /// The address it listens on.
    pub addr: SocketAddr,
    shutdown: CancellationToken,
    engine: Engine,
    hub: Arc<Hub>,
    server: JoinHandle<std::io::Result<()>>,
    /// The Files API's sweep task (expired files, orphan blobs).
    files_sweeper: JoinHandle<()>,
    /// The sweep of workspace snapshot objects no checkpoint refers to.
    snapshot_sweeper: JoinHandle<()>,
    /// Publishes the keys that stand to open streams (see `api::key_watch`).
    key_watch: JoinHandle<()>,
    /// The webhook delivery task.
    webhook_sender: JoinHandle<()>,
    grace: std::time::Duration,
    /// The SQLite data directory, held until the server stops.
    _data_dir_lock: Option<store::lock::DataDirLock>,
    /// What the start-up banner says, as (label, text) lines.
    banner: Vec<(&'static str, String)>,
}

impl Running {
    /// Graceful stop: no new connections, streams end, runners hand their sessions back.
    pub async fn stop(self) {
        self.shutdown.cancel();
        self.engine.shutdown(self.grace).await;
        let _ = tokio::time::timeout(self.grace, self.server).await;
        let _ = tokio::time::timeout(self.grace, self.files_sweeper).await;
        let _ = tokio::time::timeout(self.grace, self.snapshot_sweeper).await;
        let _ = tokio::time::timeout(self.grace, self.key_watch).await;
        let _ = tokio::time::timeout(self.grace, self.webhook_sender).await;
    }

    /// The start-up banner: where the server listens, its store, its model providers, its
    /// sandbox, and where the docs and metrics are. Printed to stderr for people, or logged
    /// as one structured event with `MAST_LOG_FORMAT=json`.
    pub fn announce(&self) {
        if std::env::var("MAST_LOG_FORMAT").is_ok_and(|f| f == "json") {
            let fields: serde_json::Map<String, serde_json::Value> = self
                .banner
                .iter()
                .map(|(k, v)| ((*k).to_string(), v.clone().into()))
                .collect();
            tracing::info!(banner = %serde_json::Value::Object(fields), "mast is ready");
            return;
        }
        let mut text = format!("\n  Mast {} is ready\n\n", env!("CARGO_PKG_VERSION"));
        for (label, line) in &self.banner {
            text.push_str(&format!("  {label:<9} {line}\n"));
        }
        eprintln!("{text}");
    }

    /// Number of session runners alive (for tests and metrics).
    pub fn active_runners(&self) -> usize {
        self.engine.active_runners()
    }

    /// Whether the engine keeps a copy of session `id`'s row for the next client write (for
    /// tests).
    pub fn holds_row(&self, id: &str) -> bool {
        self.engine.holds_row(id)
    }

    /// Number of sessions with live stream subscribers (for tests and metrics).
    pub fn stream_topics(&self) -> usize {
        self.hub.topic_count()
    }
}

/// The banner's lines (see [`Running::announce`]).
fn banner(
    config: &Config,
    addr: SocketAddr,
    app: &AppState,
    models: &Models,
    toolbox: &tools::Toolbox,
    open: bool,
) -> Vec<(&'static str, String)> {
    let host = match addr.ip() {
        ip if ip.is_unspecified() => "127.0.0.1".to_string(),
        std::net::IpAddr::V6(ip) => format!("[{ip}]"),
        ip => ip.to_string(),
    };
    let url = format!("http://{host}:{}", addr.port());
    let mut lines = vec![("API", url.clone())];
    if addr.ip().is_unspecified() {
        lines.push(("listening", format!("on every interface ({addr})")));
    }
    let data_dir =
        std::path::absolute(&config.data_dir).unwrap_or_else(|_| config.data_dir.clone());
    lines.push(match &config.database_url {
        None => (
            "store",
            format!("SQLite, {}", data_dir.join("mast.db").display()),
        ),
        Some(url) => ("store", format!("Postgres, {}", store::redacted_url(url))),
    });
    lines.push(("data", data_dir.display().to_string()));
    for (i, line) in models.describe().into_iter().enumerate() {
        lines.push((if i == 0 { "models" } else { "" }, line));
    }
    lines.push(("tools", toolbox.describe()));
    lines.push(("files", app.files.describe()));
    lines.push((
        "auth",
        if open {
            "open while no API key exists (loopback only); create one with `mast keys create`"
                .into()
        } else {
            "API keys (`x-api-key` or `Authorization: Bearer`)".into()
        },
    ));
    lines.push(("console", format!("{url}/console")));
    lines.push(("docs", format!("{url}/docs")));
    lines.push((
        "metrics",
        format!("{url}/metrics  (also /healthz, /readyz)"),
    ));
    lines
}

/// Starts serving on `listener` with `config`.
pub async fn start(config: Config, listener: TcpListener) -> anyhow::Result<Running> {
    // Installed before anything records, so no early measurement is lost.
    telemetry::handle();
    let data_dir_lock = match config.database_url {
        None => Some(store::lock::DataDirLock::acquire(&config.data_dir)?),
        Some(_) => None,
    };
    let store = open_store(&config).await?;
    let addr = listener.local_addr()?;
    if let Some(key) = &config.bootstrap_api_key
        && store.workspace_for_key(&hash_key(key)).await?.is_none()
    {
        let inserted = store
            .insert_api_key(
                &domain::ids::new_id("apikey"),
                DEFAULT_WORKSPACE,
                &hash_key(key),
            )
            .await;
        // Replicas starting together race to register the same key; one of them wins.
        if let Err(e) = inserted
            && store.workspace_for_key(&hash_key(key)).await?.is_none()
        {
            return Err(e.into());
        }
        tracing::info!("bootstrap API key registered for the default workspace");
    }
    let keys = store.count_api_keys().await?;
    let loopback = addr.ip().is_loopback();
    if keys == 0 {
        if !loopback && !config.allow_unauthenticated {
            anyhow::bail!(
                "refusing to serve on {addr} without API keys: create one with `mast keys create`, set MAST_BOOTSTRAP_API_KEY, \
                 or pass --allow-unauthenticated"
            );
        }
        tracing::warn!(
            "no API keys exist: accepting unauthenticated requests into the default workspace"
        );
    }
    let mut engine_config = config.engine.clone();
    engine_config.single_replica = config.database_url.is_none();
    let hub = Arc::new(Hub::default());
    let models = Arc::new(
        Models::new(config.anthropic.clone(), &config.providers)?
            .configured_in(config.provider_sources.clone()),
    );
    models.check_not_self(addr, tools::netguard::is_local)?;
    let shutdown = CancellationToken::new();
    {
        // Says early which providers do not answer; ends with the server.
        let (models, token) = (models.clone(), shutdown.clone());
        tokio::spawn(async move {
            tokio::select! {
                _ = token.cancelled() => {}
                _ = models.probe() => {}
            }
        });
    }
    let toolbox = Arc::new(tools::Toolbox::new(&config.data_dir, config.tools.clone()).await);
    let guard = toolbox.netguard();
    let vaults = Arc::new(
        match secrets::Cipher::load(&config.secret_key, &config.data_dir) {
            Ok(cipher) => engine::vaults::Vaults::new(store.clone(), cipher, guard),
            // A key that was configured and does not load stops the start; a generated one
            // that cannot be written (a read-only directory beside Postgres) leaves the
            // server up with credentials refused until a key is configured.
            Err(e) if matches!(config.secret_key, secrets::KeySource::DataDir) => {
                tracing::error!(
                    error = %format!("{e:#}"),
                    "no key for vault credentials: set MAST_SECRET_KEY or MAST_SECRET_KEY_FILE; \
                     until then creating or using vault credentials is refused"
                );
                engine::vaults::Vaults::without_key(store.clone(), format!("{e:#}"), guard)
            }
            Err(e) => return Err(e),
        },
    );
    let files = Arc::new(
        files::Files::open(&config.files, &config.data_dir, store.clone())
            .await
            .context("could not open the file storage")?,
    );
    let engine = Engine::new(
        store.clone(),
        hub.clone(),
        models.clone(),
        toolbox.clone(),
        engine_config,
    )
    .with_credentials(Arc::new(engine::vaults::VaultBearers(vaults.clone())))
    .with_files(files.clone())
    .with_secrets(vaults.secret_cipher());
    // Hooks: their signing secrets are sealed with the vaults' key.
    let hooks =
        engine::hooks::Hooks::new(store.clone(), vaults.secret_cipher(), toolbox.netguard())
            .with_configured(config.hooks.clone());
    // On Postgres other replicas change hooks too: the cache trusts only what it hears.
    let hooks = match config.database_url {
        Some(_) => hooks.with_changes(hub.clone()),
        None => hooks,
    };
    let hooks = Arc::new(if config.engine.caches {
        hooks
    } else {
        hooks.without_cache()
    });
    let engine = engine.with_hooks(hooks.clone());
    // Webhooks: secrets sealed with the vaults' key; deliveries pass the tools' egress rules.
    let state_guard = toolbox.netguard();
    let webhooks = Arc::new(engine::webhooks::Webhooks::new(
        store.clone(),
        vaults.secret_cipher(),
        state_guard,
        config.webhooks.clone(),
    ));
    webhooks
        .put_configured(&config.webhook_endpoints)
        .await
        .map_err(|e| anyhow::anyhow!("the config file's [[webhooks]]: {e}"))?;
    let state = AppState(Arc::new(Shared {
        // Replicas on Postgres hear every key change (the store announces it), so they may
        // cache lookups; a SQLite server cannot hear the CLI and looks every key up.
        auth: Authenticator::new(
            loopback || config.allow_unauthenticated,
            (config.database_url.is_some() && config.engine.caches).then(|| hub.clone()),
            api::browser_guard::HostRules::new(addr.ip(), config.allowed_hosts.clone()),
        ),
        engine: engine.clone(),
        files: files.clone(),
        work_leases: config.work_leases,
        vaults,
        shutdown: shutdown.clone(),
        hooks,
        webhooks: webhooks.clone(),
    }));
    if let Some(url) = &config.database_url {
        engine.join_replicas(url);
    }
    engine.start().await?;
    let files_sweeper = files.spawn_sweeper(shutdown.clone());
    let snapshot_sweeper = toolbox.spawn_snapshot_sweeper(shutdown.clone());
    let key_watch = state
        .auth
        .key_watch()
        .spawn(engine.keys(), shutdown.clone());
    let webhook_sender = webhooks.spawn_sender(domain::ids::new_id("whsender"), shutdown.clone());
    let banner = banner(&config, addr, &state, &models, &toolbox, keys == 0);
    let app = api::router(state);
    let token = shutdown.clone();
    // Small SSE frames must leave immediately, not wait on Nagle's algorithm.
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        if let Err(e) = tcp.set_nodelay(true) {
            tracing::debug!(error = %e, "could not set TCP_NODELAY");
        }
    });
    let listener = api::edge::EdgeListener(listener);
    let server = tokio::spawn(async move {
        axum::serve(listener, app)
            .with_graceful_shutdown(async move { token.cancelled().await })
            .await
    });
    tracing::info!(%addr, store = store.backend(), "mast is listening");
    if config.clock.skew() != 0 {
        tracing::warn!(
            skew_ms = config.clock.skew() / 1000,
            "MAST_CLOCK_SKEW_MS shifts this server's clock: a test knob, never for production"
        );
    }
    Ok(Running {
        addr,
        shutdown,
        engine,
        hub,
        server,
        files_sweeper,
        snapshot_sweeper,
        key_watch,
        webhook_sender,
        grace: config.shutdown_grace,
        _data_dir_lock: data_dir_lock,
        banner,
    })
}
