//! Test support: a real server on 127.0.0.1:0 per test with a fresh store (a new SQLite file,
//! or a new Postgres database), HTTP and SSE clients, and a scripted Messages API server.

#![allow(dead_code)]

pub mod http;
pub mod mock_anthropic;
pub mod mock_openai;
pub mod scripted_provider;
pub mod sse;

use std::path::PathBuf;
use std::time::Duration;

use mast::config::Config;
use mast::models::anthropic::AnthropicConfig;
use tempfile::TempDir;

pub use http::Client;

/// Which store a test runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

/// The admin URL of the test Postgres cluster, if the test run has one.
pub fn postgres_admin_url() -> Option<String> {
    std::env::var("MAST_TEST_DATABASE_URL")
        .ok()
        .filter(|u| !u.is_empty())
}

/// Creates a fresh, empty database on the test cluster and returns its URL. Without a
/// cluster the test fails: Postgres cases are `#[ignore]`d unless asked for, and one asked
/// for (`--include-ignored`) must not pass without running.
pub async fn fresh_postgres_database() -> String {
    use sqlx::Connection;
    let admin = postgres_admin_url().expect(
        "a Postgres case needs MAST_TEST_DATABASE_URL (an admin URL of a cluster it may create \
         databases on); scripts/test sets one up",
    );
    let name = format!(
        "mast_t_{}",
        mast::domain::ids::new_secret(12).to_lowercase()
    );
    let mut conn = sqlx::PgConnection::connect(&admin)
        .await
        .expect("connect to test postgres");
    // A linguistic collation, as many production databases have: ordering by id must not
    // depend on the database's default collation.
    let icu = format!(
        "CREATE DATABASE {name} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US' LOCALE 'C.UTF-8'"
    );
    if sqlx::query(&icu).execute(&mut conn).await.is_err() {
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut conn)
            .await
            .expect("create database");
    }
    conn.close().await.ok();
    let base = admin
        .rsplit_once('/')
        .map(|(b, _)| b.to_string())
        .unwrap_or(admin);
    format!("{base}/{name}")
}

/// Where agents' turns are answered: the built-in scripted model, or the same scripts served
/// over the Anthropic or the OpenAI wire format (through Mast's real provider clients).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModelRoute {
    Builtin,
    AnthropicWire,
    OpenAiWire,
}

impl ModelRoute {
    /// The model id agents use on this route.
    pub fn model_id(self) -> &'static str {
        match self {
            ModelRoute::Builtin => "mast-scripted",
            ModelRoute::AnthropicWire => "claude-scripted-test",
            ModelRoute::OpenAiWire => "oai/scripted",
        }
    }
}

/// Runs a test body on each store and each model route (the engine suite). The Postgres
/// variants are `#[ignore]`d, so a run without a cluster reports them as ignored; a run with
/// one passes `--include-ignored` (as `scripts/test` does) and they fail without a cluster.
#[macro_export]
macro_rules! provider_tests {
    ($($name:ident),* $(,)?) => {
        $crate::provider_tests!(@backend sqlite_routes, Sqlite, [], $($name),*);
        $crate::provider_tests!(@backend postgres_routes, Postgres,
            [ignore = "Postgres: run with --include-ignored and MAST_TEST_DATABASE_URL"], $($name),*);
    };
    (@backend $module:ident, $backend:ident, $attrs:tt, $($name:ident),*) => {
        pub mod $module {
            $crate::provider_tests!(@route builtin, Builtin, $backend, $attrs, $($name),*);
            $crate::provider_tests!(@route anthropic, AnthropicWire, $backend, $attrs, $($name),*);
            $crate::provider_tests!(@route openai, OpenAiWire, $backend, $attrs, $($name),*);
        }
    };
    (@route $module:ident, $route:ident, $backend:ident, $attrs:tt, $($name:ident),*) => {
        pub mod $module {
            $($crate::provider_tests!(@case $route, $backend, $attrs, $name);)*
        }
    };
    (@case $route:ident, $backend:ident, [$($attr:meta)?], $name:ident) => {
        #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
        $(#[$attr])?
        async fn $name() {
            super::super::$name(
                $crate::support::Backend::$backend,
                $crate::support::ModelRoute::$route,
            )
            .await;
        }
    };
}

/// Runs a test body on SQLite and on Postgres. The Postgres variants are `#[ignore]`d, so a
/// run without a cluster reports them as ignored rather than passing them; a run with one
/// passes `--include-ignored` (as `scripts/test` does) and they fail without a cluster.
#[macro_export]
macro_rules! backend_tests {
    ($($name:ident),* $(,)?) => {
        pub mod sqlite {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                async fn $name() {
                    super::$name($crate::support::Backend::Sqlite).await;
                }
            )*
        }
        pub mod postgres {
            $(
                #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
                #[ignore = "Postgres: run with --include-ignored and MAST_TEST_DATABASE_URL"]
                async fn $name() {
                    super::$name($crate::support::Backend::Postgres).await;
                }
            )*
        }
    };
}

/// A server under test.
pub struct TestServer {
    pub url: String,
    pub client: Client,
    pub backend: Backend,
    pub data_dir: PathBuf,
    pub database_url: Option<String>,
    /// The configuration it runs with (for restarts on the same store).
    pub config: Config,
    running: Option<mast::Running>,
    _dir: Option<TempDir>,
}

/// Options for [`TestServer::start_with`].
#[derive(Clone)]
pub struct Options {
    pub anthropic_base_url: Option<String>,
    pub api_key: Option<String>,
    pub max_retries: u32,
    pub max_requests_per_turn: u32,
    pub route: ModelRoute,
    /// Base URL (with `/v1`) of an OpenAI-compatible endpoint serving `oai/...` models.
    pub openai_base_url: Option<String>,
    /// A SearXNG-compatible endpoint for `web_search`.
    pub web_search_url: Option<String>,
    /// Default lease of self-hosted work items.
    pub work_ttl_seconds: Option<i64>,
    /// Tools may reach loopback and private addresses (on by default: the tests' stand-in
    /// remote servers listen on loopback).
    pub allow_private_network: bool,
    /// Internal hosts tools may reach anyway (`MAST_ALLOW_PRIVATE_HOSTS`).
    pub allow_private_hosts: Vec<String>,
    /// How long a model stream may stay silent.
    pub model_read_timeout: Duration,
    /// How often a running session reports its usage (`MAST_USAGE_INTERVAL_MS`).
    pub usage_interval: Duration,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            anthropic_base_url: None,
            api_key: None,
            max_retries: 3,
            max_requests_per_turn: 100,
            route: ModelRoute::Builtin,
            openai_base_url: None,
            web_search_url: None,
            work_ttl_seconds: None,
            allow_private_network: true,
            allow_private_hosts: Vec::new(),
            model_read_timeout: Duration::from_secs(30),
            usage_interval: Duration::from_secs(60),
        }
    }
}

/// A config tuned for tests: short leases and retry delays.
pub fn test_config(data_dir: PathBuf, database_url: Option<String>, opts: &Options) -> Config {
    let mut c = Config::new("127.0.0.1:0".parse().unwrap(), data_dir);
    c.database_url = database_url;
    // Tests run in parallel against one Postgres and its connection limit.
    c.db_max_connections = 6;
    c.engine.lease_ttl = Duration::from_secs(2);
    c.engine.reap_interval = Duration::from_millis(200);
    c.engine.retry_base = Duration::from_millis(20);
    c.engine.retry_cap = Duration::from_millis(100);
    c.engine.max_retries = opts.max_retries;
    c.engine.max_requests_per_turn = opts.max_requests_per_turn;
    c.engine.usage_interval = opts.usage_interval;
    // A silent MCP server costs a test this long.
    c.engine.mcp_connect_timeout = Duration::from_secs(2);
    c.bootstrap_api_key = opts.api_key.clone();
    // The suite runs again with MAST_CACHES=off to prove the caches change nothing.
    if let Some(on) = mast::config::caches_from_env().unwrap() {
        c.engine.caches = on;
    }
    c.anthropic = AnthropicConfig {
        base_url: opts
            .anthropic_base_url
            .clone()
            .unwrap_or_else(|| "http://127.0.0.1:9".into()),
        api_key: Some("test-key".into()),
        auth_token: None,
        read_timeout: opts.model_read_timeout,
    };
    if let Some(base) = &opts.openai_base_url {
        c.providers = vec![mast::models::registry::ProviderConfig {
            name: "test-openai".into(),
            kind: mast::models::registry::ProviderKind::Openai,
            base_url: Some(base.clone()),
            api_key_env: None,
            models: vec![],
            model_prefix: Some("oai/".into()),
            strip_prefix: true,
        }];
    }
    // The in-sandbox proxy forwarder is a subcommand of the real binary.
    c.tools.helper = PathBuf::from(env!("CARGO_BIN_EXE_mast"));
    c.tools.web_search_url = opts.web_search_url.clone();
    c.tools.allow_private_network = opts.allow_private_network;
    c.tools.allow_private_hosts =
        mast::tools::netguard::PrivateAllow::parse_list(&opts.allow_private_hosts.join(","))
            .unwrap();
    c.shutdown_grace = Duration::from_secs(5);
    // Small in-memory tmpfs mounts, so filling one is cheap to test.
    c.tools.limits.tmpfs_bytes = 32 << 20;
    if let Some(ttl) = opts.work_ttl_seconds {
        c.work_leases.default_ttl_seconds = ttl;
    }
    c
}

impl TestServer {
    /// A server with default options.
    pub async fn start(backend: Backend) -> Self {
        Self::start_with(backend, Options::default()).await
    }

    /// A server with a fresh store of `backend`, its config adjusted by `tune` (settings the
    /// options do not cover).
    pub async fn start_tuned(
        backend: Backend,
        opts: Options,
        tune: impl FnOnce(&mut Config),
    ) -> Self {
        let dir = TempDir::new().unwrap();
        let database_url = match backend {
            Backend::Sqlite => None,
            Backend::Postgres => Some(fresh_postgres_database().await),
        };
        let mut config = test_config(dir.path().to_path_buf(), database_url.clone(), &opts);
        tune(&mut config);
        let mut s = Self::boot(config, backend).await;
        s.data_dir = dir.path().to_path_buf();
        s.database_url = database_url;
        s._dir = Some(dir);
        if let Some(k) = opts.api_key {
            s.client = s.client.with_key(&k);
        }
        s.client.model = opts.route.model_id().to_string();
        s
    }

    /// A server with a fresh store of `backend`.
    pub async fn start_with(backend: Backend, mut opts: Options) -> Self {
        match opts.route {
            ModelRoute::Builtin => {}
            ModelRoute::AnthropicWire => {
                opts.anthropic_base_url =
                    Some(scripted_provider::start(scripted_provider::Wire::Anthropic).await);
            }
            ModelRoute::OpenAiWire => {
                let base = scripted_provider::start(scripted_provider::Wire::OpenAi).await;
                opts.openai_base_url = Some(format!("{base}/v1"));
            }
        }
        Self::start_tuned(backend, opts, |_| {}).await
    }

    /// A server whose agents answer over `route`.
    pub async fn start_routed(backend: Backend, route: ModelRoute) -> Self {
        Self::start_with(
            backend,
            Options {
                route,
                ..Default::default()
            },
        )
        .await
    }

    /// Boots a server on an existing config (used to restart on the same store).
    pub async fn boot(config: Config, backend: Backend) -> Self {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let data_dir = config.data_dir.clone();
        let database_url = config.database_url.clone();
        let running = mast::start(config.clone(), listener)
            .await
            .expect("server starts");
        let url = format!("http://{}", running.addr);
        TestServer {
            client: Client::new(&url),
            url,
            backend,
            data_dir,
            database_url,
            config,
            running: Some(running),
            _dir: None,
        }
    }

    /// Stops the server gracefully (the store stays for a restart).
    pub async fn stop(&mut self) {
        if let Some(r) = self.running.take() {
            r.stop().await;
        }
    }

    /// Sessions with live stream subscribers in this server.
    pub fn stream_topics(&self) -> usize {
        self.running.as_ref().map_or(0, |r| r.stream_topics())
    }

    /// Whether this server keeps a copy of session `id`'s row for its next client write.
    pub fn holds_row(&self, id: &str) -> bool {
        self.running.as_ref().is_some_and(|r| r.holds_row(id))
    }

    /// Runner tasks alive in this server.
    pub fn active_runners(&self) -> usize {
        self.running.as_ref().map_or(0, |r| r.active_runners())
    }
}

/// Polls `f` until it returns Some, failing after `secs`.
pub async fn eventually<T, F, Fut>(secs: u64, what: &str, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    match try_eventually(secs, f).await {
        Some(v) => v,
        None => panic!("timed out waiting for {what}"),
    }
}

/// Polls `f` until it returns Some; None after `secs` (the caller says what was missing).
pub async fn try_eventually<T, F, Fut>(secs: u64, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if tokio::time::Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Bytes of disk the files under `dir` take (without following links).
pub fn dir_bytes(dir: &std::path::Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let Ok(meta) = entry.path().symlink_metadata() else {
                continue;
            };
            total += meta.blocks() * 512;
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    total
}

/// The system clock's reading: the clock test stores and servers are opened with, unless a
/// test gives one a manual clock.
pub fn now() -> mast::domain::time::Micros {
    mast::domain::clock::Clock::system().now()
}
