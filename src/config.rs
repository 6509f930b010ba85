//! Server configuration, from flags and environment variables (see docs/configuration.md).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::engine::EngineConfig;
use crate::models::anthropic::AnthropicConfig;
use crate::models::registry::{ProviderConfig, ProviderSources};

/// Everything `mast serve` needs.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    /// Where the time comes from: the system clock, shifted in tests by
    /// `MAST_CLOCK_SKEW_MS`, or a test's manual clock. The store is opened with it.
    pub clock: crate::domain::clock::Clock,
    /// `postgres://...` selects Postgres; `None` uses the embedded SQLite file.
    pub database_url: Option<String>,
    pub data_dir: PathBuf,
    /// Serve without API keys on a non-loopback address.
    pub allow_unauthenticated: bool,
    /// `MAST_ALLOWED_HOSTS`: the names clients use for this server (behind a proxy, say).
    /// Set, every request must name one of them (or a loopback address); in open mode they
    /// are answered besides loopback names.
    pub allowed_hosts: Vec<String>,
    /// A key `serve` makes sure exists for the default workspace.
    pub bootstrap_api_key: Option<String>,
    pub db_max_connections: u32,
    /// SQLite's `synchronous` mode (`MAST_SQLITE_SYNCHRONOUS`): `full` (the default) makes
    /// every acknowledged write survive a power loss; `normal` is faster and can lose the
    /// last ones.
    pub sqlite_synchronous: crate::store::sqlite::Synchronous,
    pub engine: EngineConfig,
    pub anthropic: AnthropicConfig,
    /// Model providers beyond the built-in ones.
    pub providers: Vec<ProviderConfig>,
    /// Where `providers` were read from: named when no provider serves a model.
    pub provider_sources: ProviderSources,
    /// Built-in tools: sandbox override, search provider, limits.
    pub tools: crate::tools::ToolsConfig,
    /// How long shutdown waits for runners to hand their sessions back.
    pub shutdown_grace: Duration,
    /// Lease lengths of self-hosted work items.
    pub work_leases: crate::engine::work::LeaseTerms,
    /// The key vault secrets are encrypted with (`MAST_SECRET_KEY`, `MAST_SECRET_KEY_FILE`,
    /// or generated into the data directory).
    pub secret_key: crate::secrets::KeySource,
    /// Files API storage and limits (`MAST_FILES_*`).
    pub files: crate::files::FilesConfig,
    /// Hooks from the config file's `[[hooks]]` tables: the operator's, asked in
    /// every workspace before the workspaces' own.
    pub hooks: Vec<ConfiguredHook>,
    /// Webhook delivery: retries, timeouts, rotation overlap (`MAST_WEBHOOK_*`).
    pub webhooks: crate::engine::webhooks::WebhooksConfig,
    /// Webhook endpoints of the config file's `[[webhooks]]` tables, put in place at start.
    pub webhook_endpoints: Vec<ConfiguredWebhook>,
}

/// A boolean setting: `1`, `true`, `yes` or `on` turn it on; `0`, `false`, `no`, `off` or an
/// empty value leave it off (any case); anything else is an error naming the variable, so a
/// typo never silently means "off". Every boolean setting is read through this.
pub fn flag(name: &str) -> anyhow::Result<bool> {
    parse_flag(name, std::env::var(name).ok().as_deref())
}

/// `MAST_ALLOWED_HOSTS`: comma-separated names (`mast.example.com`), wildcards of whole labels
/// (`*.example.com`) and addresses, without scheme or port.
fn parse_allowed_hosts(v: &str) -> anyhow::Result<Vec<String>> {
    let mut out = Vec::new();
    for h in v.split(',').map(str::trim).filter(|h| !h.is_empty()) {
        let name = h.strip_prefix("*.").unwrap_or(h);
        let ok = !name.is_empty()
            && (name.parse::<std::net::IpAddr>().is_ok()
                || name.split('.').all(|l| {
                    !l.is_empty()
                        && l.chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                }));
        anyhow::ensure!(
            ok,
            "MAST_ALLOWED_HOSTS: `{h}` is not a host name, `*.domain` or an address (give no scheme or port)"
        );
        out.push(h.to_ascii_lowercase());
    }
    Ok(out)
}

fn parse_flag(name: &str, value: Option<&str>) -> anyhow::Result<bool> {
    let Some(v) = value else {
        return Ok(false);
    };
    match v.trim().to_ascii_lowercase().as_str() {
        "1" | "true" | "yes" | "on" => Ok(true),
        "" | "0" | "false" | "no" | "off" => Ok(false),
        _ => anyhow::bail!("{name}={v:?} must be 1/true/yes/on or 0/false/no/off"),
    }
}

impl Config {
    /// Defaults for a local server on `listen` with data in `data_dir`.
    pub fn new(listen: SocketAddr, data_dir: PathBuf) -> Self {
        Config {
            listen,
            clock: crate::domain::clock::Clock::system(),
            database_url: None,
            data_dir,
            allow_unauthenticated: false,
            allowed_hosts: Vec::new(),
            bootstrap_api_key: None,
            db_max_connections: 16,
            sqlite_synchronous: crate::store::sqlite::Synchronous::default(),
            engine: EngineConfig::default(),
            anthropic: AnthropicConfig::from_env(),
            providers: Vec::new(),
            provider_sources: ProviderSources::default(),
            tools: crate::tools::ToolsConfig::default(),
            shutdown_grace: Duration::from_secs(10),
            work_leases: crate::engine::work::LeaseTerms::default(),
            secret_key: crate::secrets::KeySource::default(),
            files: crate::files::FilesConfig::default(),
            hooks: Vec::new(),
            webhooks: crate::engine::webhooks::WebhooksConfig::default(),
            webhook_endpoints: Vec::new(),
        }
    }

    /// Applies the optional tuning variables (`MAST_LEASE_TTL_MS`, `MAST_MAX_RETRIES`, ...).
    pub fn with_env_tuning(mut self) -> anyhow::Result<Self> {
        fn ms(name: &str) -> anyhow::Result<Option<Duration>> {
            match std::env::var(name) {
                Ok(v) => {
                    Ok(Some(Duration::from_millis(v.parse().map_err(|_| {
                        anyhow::anyhow!("{name} must be milliseconds")
                    })?)))
                }
                Err(_) => Ok(None),
            }
        }
        fn num(name: &str) -> anyhow::Result<Option<u32>> {
            match std::env::var(name) {
                Ok(v) => Ok(Some(
                    v.parse()
                        .map_err(|_| anyhow::anyhow!("{name} must be a number"))?,
                )),
                Err(_) => Ok(None),
            }
        }
        if let Some(d) = ms("MAST_LEASE_TTL_MS")? {
            self.engine.lease_ttl = d;
        }
        if let Some(d) = ms("MAST_SHUTDOWN_GRACE_MS")? {
            self.shutdown_grace = d;
        }
        if let Some(d) = ms("MAST_REAP_INTERVAL_MS")? {
            self.engine.reap_interval = d;
        }
        if let Some(d) = ms("MAST_MCP_CONNECT_TIMEOUT_MS")? {
            self.engine.mcp_connect_timeout = d;
        }
        if let Some(d) = ms("MAST_MCP_CALL_TIMEOUT_MS")? {
            self.engine.mcp_call_timeout = d;
        }
        if let Some(d) = ms("MAST_USAGE_INTERVAL_MS")? {
            anyhow::ensure!(!d.is_zero(), "MAST_USAGE_INTERVAL_MS must be at least 1");
            self.engine.usage_interval = d;
        }
        if let Some(d) = ms("MAST_RETRY_BASE_MS")? {
            self.engine.retry_base = d;
        }
        if let Some(n) = num("MAST_MAX_RETRIES")? {
            self.engine.max_retries = n;
        }
        if let Some(n) = num("MAST_MAX_TURNS")? {
            anyhow::ensure!(n >= 1, "MAST_MAX_TURNS must be at least 1");
            self.engine.max_requests_per_turn = n;
        }
        if let Some(n) = num("MAST_MAX_TOKENS")? {
            self.engine.max_tokens = n;
        }
        let limits = &mut self.engine.workflows.limits;
        for (name, slot) in [
            ("MAST_WORKFLOW_MAX_OPEN_RUNS", &mut limits.max_open_runs),
            (
                "MAST_WORKFLOW_MAX_RUNNING_THREADS",
                &mut limits.max_running_threads,
            ),
            ("MAST_WORKFLOW_MAX_AGENTS", &mut limits.max_agents_per_run),
            (
                "MAST_WORKFLOW_LIFETIME_SECONDS",
                &mut limits.lifetime_seconds,
            ),
        ] {
            if let Some(n) = num(name)? {
                anyhow::ensure!(n >= 1, "{name} must be at least 1");
                *slot = u64::from(n);
            }
        }
        for (name, slot) in [
            ("MAST_WORKFLOW_MAX_PLAN_BYTES", &mut limits.max_plan_bytes),
            ("MAST_WORKFLOW_MAX_TEXT_CHARS", &mut limits.max_text_chars),
        ] {
            if let Some(n) = num(name)? {
                anyhow::ensure!(n >= 1, "{name} must be at least 1");
                *slot = n as usize;
            }
        }
        if flag("MAST_UNSAFE_UNSANDBOXED_TOOLS")? {
            self.tools.unsafe_unsandboxed = true;
        }
        if let Ok(url) = std::env::var("MAST_WEB_SEARCH_URL")
            && !url.is_empty()
        {
            self.tools.web_search_url = Some(url);
        }
        if let Some(n) = num("MAST_WORK_TTL_SECONDS")? {
            anyhow::ensure!(n >= 1, "MAST_WORK_TTL_SECONDS must be at least 1");
            self.work_leases.default_ttl_seconds = i64::from(n);
            self.work_leases.max_ttl_seconds = self.work_leases.max_ttl_seconds.max(i64::from(n));
        }
        if let Ok(v) = std::env::var("MAST_ALLOWED_HOSTS") {
            self.allowed_hosts = parse_allowed_hosts(&v)?;
        }
        if flag("MAST_ALLOW_PRIVATE_NETWORK")? {
            self.tools.allow_private_network = true;
        }
        if let Ok(v) = std::env::var("MAST_ALLOW_PRIVATE_HOSTS") {
            self.tools.allow_private_hosts =
                crate::tools::netguard::PrivateAllow::parse_list(&v)
                    .map_err(|e| anyhow::anyhow!("MAST_ALLOW_PRIVATE_HOSTS: {e}"))?;
        }
        let mirror = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
        let mirrors = &mut self.tools.packages.mirrors;
        mirrors.pip = mirror("MAST_PIP_INDEX_URL").or(mirrors.pip.take());
        mirrors.npm = mirror("MAST_NPM_REGISTRY").or(mirrors.npm.take());
        mirrors.cargo = mirror("MAST_CARGO_INDEX").or(mirrors.cargo.take());
        mirrors.go = mirror("MAST_GOPROXY").or(mirrors.go.take());
        mirrors.gem = mirror("MAST_GEM_SOURCE").or(mirrors.gem.take());
        if let Some(n) = num("MAST_PACKAGE_INSTALL_TIMEOUT_SECONDS")? {
            anyhow::ensure!(
                n >= 1,
                "MAST_PACKAGE_INSTALL_TIMEOUT_SECONDS must be at least 1"
            );
            self.tools.packages.install_timeout = Duration::from_secs(u64::from(n));
        }
        if let Some(n) = num("MAST_PACKAGE_LAYER_TTL_DAYS")? {
            self.tools.packages.layer_ttl = Duration::from_secs(u64::from(n) * 86_400);
        }
        if let Some(n) = num("MAST_SANDBOX_MEMORY_MB")? {
            anyhow::ensure!(n >= 16, "MAST_SANDBOX_MEMORY_MB must be at least 16");
            self.tools.limits.memory_bytes = u64::from(n) << 20;
        }
        if let Some(n) = num("MAST_SANDBOX_MAX_PROCESSES")? {
            anyhow::ensure!(n >= 8, "MAST_SANDBOX_MAX_PROCESSES must be at least 8");
            self.tools.limits.max_processes = u64::from(n);
        }
        if let Some(n) = num("MAST_WORKSPACE_QUOTA_MB")? {
            self.tools.limits.workspace_bytes = u64::from(n) << 20;
        }
        if let Some(n) = num("MAST_WORKSPACE_MAX_FILES")? {
            self.tools.limits.workspace_files = u64::from(n);
        }
        // Session fork: per-turn workspace checkpoints kept per session.
        if let Some(n) = num("MAST_WORKSPACE_CHECKPOINTS")? {
            self.tools.workspace_checkpoints = n as usize;
        }
        if let Some(n) = num("MAST_SNAPSHOT_SWEEP_SECONDS")? {
            anyhow::ensure!(n >= 1, "MAST_SNAPSHOT_SWEEP_SECONDS must be at least 1");
            self.tools.snapshot_sweep_interval = std::time::Duration::from_secs(u64::from(n));
        }
        if let Some(n) = num("MAST_DB_MAX_CONNECTIONS")? {
            self.db_max_connections = n;
        }
        if let Some(on) = caches_from_env()? {
            self.engine.caches = on;
        }
        self.clock = clock_from_env()?;
        if std::env::var("MAST_TEST_CRON_SECONDS").is_ok_and(|v| v.trim() == "1") {
            self.engine.cron_pace = crate::domain::schedule::Pace::SecondsForTests;
        }
        if let Ok(v) = std::env::var("MAST_SQLITE_SYNCHRONOUS")
            && !v.is_empty()
        {
            self.sqlite_synchronous = v
                .parse()
                .map_err(|e| anyhow::anyhow!("MAST_SQLITE_SYNCHRONOUS={v:?}: {e}"))?;
        }
        self.secret_key = secret_key_source(
            std::env::var("MAST_SECRET_KEY").ok(),
            std::env::var("MAST_SECRET_KEY_FILE").ok(),
        )?;
        self.files = self.files.with_env()?;
        self.webhooks = self.webhooks.with_env()?;
        // Context compaction.
        self.engine.compaction = self.engine.compaction.with_env(
            std::env::var("MAST_CONTEXT_WINDOW").ok().as_deref(),
            std::env::var("MAST_CONTEXT_WINDOWS").ok().as_deref(),
            std::env::var("MAST_COMPACTION_THRESHOLD").ok().as_deref(),
        )?;
        Ok(self)
    }
}

/// The process's clock: the system clock, shifted by `MAST_CLOCK_SKEW_MS` when set (a test
/// knob that runs a replica whose clock is off, to prove leases follow the database's clock).
pub fn clock_from_env() -> anyhow::Result<crate::domain::clock::Clock> {
    let Ok(v) = std::env::var("MAST_CLOCK_SKEW_MS") else {
        return Ok(crate::domain::clock::Clock::system());
    };
    let ms: i64 = v
        .trim()
        .parse()
        .map_err(|_| anyhow::anyhow!("MAST_CLOCK_SKEW_MS={v:?} must be milliseconds"))?;
    Ok(crate::domain::clock::Clock::skewed(ms * 1000))
}

/// `MAST_CACHES`: `on` (the default) or `off`, which turns every cache of the engine and
/// the store off to show they change nothing but cost; None when unset.
pub fn caches_from_env() -> anyhow::Result<Option<bool>> {
    match std::env::var("MAST_CACHES") {
        Err(_) => Ok(None),
        Ok(v) => match v.trim().to_ascii_lowercase().as_str() {
            "" => Ok(None),
            "on" | "true" | "1" => Ok(Some(true)),
            "off" | "false" | "0" => Ok(Some(false)),
            _ => anyhow::bail!("MAST_CACHES={v:?} must be `on` or `off`"),
        },
    }
}

/// The price table: built-in Claude prices, under the `[prices]` table of the config file,
/// under `MAST_PRICES` (JSON: model id → `{"input", "output", "cache_write_5m"?,
/// "cache_write_1h"?, "cache_read"?, "long_prompt"?}` in dollars per million tokens).
pub fn load_prices(
    env_json: Option<&str>,
    file: Option<&std::path::Path>,
) -> anyhow::Result<crate::domain::prices::Prices> {
    use crate::domain::prices::{PriceConfig, Prices};
    use std::collections::BTreeMap;
    #[derive(serde::Deserialize)]
    struct PricesFile {
        #[serde(default)]
        prices: BTreeMap<String, PriceConfig>,
    }
    let mut entries = BTreeMap::new();
    if let Some(path) = file {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        let parsed: PricesFile =
            toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        entries.extend(parsed.prices);
    }
    if let Some(json) = env_json.filter(|j| !j.trim().is_empty()) {
        let parsed: BTreeMap<String, PriceConfig> =
            serde_json::from_str(json).map_err(|e| anyhow::anyhow!("MAST_PRICES: {e}"))?;
        entries.extend(parsed);
    }
    Prices::parse(entries).map_err(|e| anyhow::anyhow!("prices: {e}"))
}

pub use crate::engine::hooks::ConfiguredHook;

/// Reads the `[[hooks]]` tables of the config file; each is validated like an API request,
/// so a bad one stops the start with a message naming it.
pub fn load_hooks(file: Option<&std::path::Path>) -> anyhow::Result<Vec<ConfiguredHook>> {
    #[derive(serde::Deserialize)]
    struct HooksFile {
        #[serde(default)]
        hooks: Vec<toml::Table>,
    }
    let Some(path) = file else {
        return Ok(Vec::new());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let parsed: HooksFile =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, mut table) in parsed.hooks.into_iter().enumerate() {
        let n = i + 1;
        let fail = |why: String| anyhow::anyhow!("{}: [[hooks]] #{n}: {why}", path.display());
        let secret = match table.remove("signing_secret") {
            Some(toml::Value::String(s)) => {
                crate::standard_webhooks::SigningSecret::parse(&s).map_err(fail)?
            }
            _ => return Err(fail("`signing_secret` (`whsec_…`) is required".into())),
        };
        let create: crate::domain::hook::HookCreate = toml::Value::Table(table)
            .try_into()
            .map_err(|e| fail(e.to_string()))?;
        let mut hook = create.validate().map_err(|e| fail(e.message))?;
        hook.id = format!("hook_config_{n}");
        out.push(ConfiguredHook { hook, secret });
    }
    Ok(out)
}

pub use crate::engine::webhooks::ConfiguredWebhook;

/// Reads the `[[webhooks]]` tables of the config file. Each is checked fully when the server
/// puts it in place; here only its shape, so a bad one stops the start naming it.
pub fn load_webhooks(file: Option<&std::path::Path>) -> anyhow::Result<Vec<ConfiguredWebhook>> {
    #[derive(serde::Deserialize)]
    struct WebhooksFile {
        #[serde(default)]
        webhooks: Vec<toml::Table>,
    }
    let Some(path) = file else {
        return Ok(Vec::new());
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
    let parsed: WebhooksFile =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let mut out = Vec::new();
    for (i, mut table) in parsed.webhooks.into_iter().enumerate() {
        let n = i + 1;
        let fail = |why: String| anyhow::anyhow!("{}: [[webhooks]] #{n}: {why}", path.display());
        let workspace = match table.remove("workspace") {
            None => crate::domain::keys::DEFAULT_WORKSPACE.to_string(),
            Some(toml::Value::String(w)) if !w.is_empty() => w,
            Some(_) => return Err(fail("`workspace` is a workspace id".into())),
        };
        let endpoint: crate::domain::webhook::WebhookEndpointCreate = toml::Value::Table(table)
            .try_into()
            .map_err(|e| fail(e.to_string()))?;
        if endpoint.signing_secret.is_none() {
            return Err(fail("`signing_secret` (`whsec_…`) is required".into()));
        }
        out.push(ConfiguredWebhook {
            id: format!("whep_config_{n}"),
            workspace,
            endpoint,
        });
    }
    Ok(out)
}

/// Where the vault key comes from: `MAST_SECRET_KEY` (base64 of 32 bytes) or
/// `MAST_SECRET_KEY_FILE` (a file holding it), not both; neither means a key generated into
/// the data directory.
fn secret_key_source(
    inline: Option<String>,
    file: Option<String>,
) -> anyhow::Result<crate::secrets::KeySource> {
    use crate::secrets::KeySource;
    let inline = inline.filter(|v| !v.trim().is_empty());
    let file = file.filter(|v| !v.trim().is_empty());
    Ok(match (inline, file) {
        (Some(_), Some(_)) => {
            anyhow::bail!("set MAST_SECRET_KEY or MAST_SECRET_KEY_FILE, not both")
        }
        (Some(k), None) => {
            // Checked now, so a bad key stops the start with a clear message.
            crate::secrets::decode_key(&k)
                .map_err(|e| anyhow::anyhow!("MAST_SECRET_KEY must be base64 of 32 bytes: {e}"))?;
            KeySource::Inline(k)
        }
        (None, Some(f)) => KeySource::File(PathBuf::from(f)),
        (None, None) => KeySource::DataDir,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_take_every_usual_spelling_and_refuse_others() {
        for (v, on) in [
            (Some("1"), true),
            (Some("TRUE"), true),
            (Some("yes"), true),
            (Some("On"), true),
            (Some("0"), false),
            (Some("false"), false),
            (Some("no"), false),
            (Some(""), false),
            (None, false),
        ] {
            assert_eq!(parse_flag("X", v).unwrap(), on, "{v:?}");
        }
        let err = parse_flag("MAST_X", Some("maybe")).unwrap_err().to_string();
        assert!(err.contains("MAST_X=\"maybe\" must be"), "{err}");
    }

    #[test]
    fn prices_come_from_the_file_then_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("mast.toml");
        std::fs::write(
            &path,
            "[[providers]]\nname = \"x\"\nkind = \"openai\"\n\n[prices.\"gpt-4o\"]\ninput = 2.5\noutput = \"10\"\n\n[prices.\"m\"]\ninput = 1\noutput = 1\n",
        )
        .unwrap();
        let p = load_prices(Some(r#"{"m": {"input": 4, "output": 8}}"#), Some(&path)).unwrap();
        assert_eq!(p.of("gpt-4o").unwrap().rates.input, 2_500);
        assert_eq!(p.of("m").unwrap().rates.output, 8_000);
        let e = load_prices(Some(r#"{"m": {"input": 1}}"#), None).unwrap_err();
        assert!(format!("{e:#}").contains("MAST_PRICES"), "{e:#}");
    }

    #[test]
    fn the_secret_key_comes_from_one_place() {
        use crate::secrets::KeySource;
        let key = crate::secrets::generate_key_text();
        assert!(matches!(
            secret_key_source(None, None).unwrap(),
            KeySource::DataDir
        ));
        assert!(matches!(
            secret_key_source(Some(key.clone()), None).unwrap(),
            KeySource::Inline(_)
        ));
        assert!(matches!(
            secret_key_source(None, Some("/k".into())).unwrap(),
            KeySource::File(_)
        ));
        assert!(secret_key_source(Some(key.clone()), Some("/k".into())).is_err());
        let e = secret_key_source(Some("c2hvcnQ=".into()), None).unwrap_err();
        assert!(format!("{e:#}").contains("32 bytes"), "{e:#}");
        // The key never shows through Debug.
        let shown = format!("{:?}", KeySource::Inline(key.clone()));
        assert!(!shown.contains(&key), "{shown}");
    }
}
