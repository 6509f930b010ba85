//! `mast doctor`: checks what `mast serve` needs from this host and configuration, one line
//! per finding (ok / warn / FAIL) with what to fix, and exits non-zero when something fails.
//!
//! Checks are independent of each other and change nothing they look at (no store is created
//! or migrated); a new one is one more entry in [`checks`].

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::Value;

use super::StoreArgs;
use crate::models::anthropic::AnthropicConfig;
use crate::models::registry::{Models, ProviderConfig, ProviderKind};
use crate::tools::sandbox::{self, Isolation};

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// Nothing to do.
    Ok,
    /// Works, but worth knowing or fixing.
    Warn,
    /// `mast serve` would not work as meant.
    Fail,
}

/// One finding of a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// What was checked (`sandbox`, `store`, `provider anthropic`, …).
    pub check: String,
    /// How it came out.
    pub status: Status,
    /// What was found.
    pub detail: String,
    /// What to do about it, when something is to be done.
    pub fix: Option<String>,
}

impl Finding {
    fn ok(check: impl Into<String>, detail: impl Into<String>) -> Self {
        Finding {
            check: check.into(),
            status: Status::Ok,
            detail: detail.into(),
            fix: None,
        }
    }

    fn warn(check: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Finding {
            check: check.into(),
            status: Status::Warn,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }

    fn fail(check: impl Into<String>, detail: impl Into<String>, fix: impl Into<String>) -> Self {
        Finding {
            check: check.into(),
            status: Status::Fail,
            detail: detail.into(),
            fix: Some(fix.into()),
        }
    }
}

/// What the checks look at: the settings `mast serve` would run with.
pub struct Setup {
    /// Where the server would listen.
    pub listen: SocketAddr,
    /// Where its store is.
    pub store: StoreArgs,
    /// Configured providers, or why their configuration cannot be read.
    pub providers: Result<Vec<ProviderConfig>, String>,
    /// The built-in Anthropic provider's settings.
    pub anthropic: AnthropicConfig,
    /// `MAST_UNSAFE_UNSANDBOXED_TOOLS=1`.
    pub unsafe_unsandboxed: bool,
}

impl Setup {
    /// The settings of `mast serve` with these flags, read from the same places.
    pub fn new(listen: SocketAddr, store: StoreArgs, config_file: Option<PathBuf>) -> Self {
        let file = config_file.or_else(|| {
            let default = PathBuf::from("mast.toml");
            default.exists().then_some(default)
        });
        let providers_env = std::env::var("MAST_PROVIDERS").ok();
        let providers =
            crate::models::registry::load_providers(providers_env.as_deref(), file.as_deref())
                .map_err(|e| format!("{e:#}"));
        Setup {
            listen,
            store,
            providers,
            anthropic: AnthropicConfig::from_env(),
            unsafe_unsandboxed: std::env::var("MAST_UNSAFE_UNSANDBOXED_TOOLS")
                .is_ok_and(|v| v == "1"),
        }
    }
}

type Check<'a> = Pin<Box<dyn Future<Output = Vec<Finding>> + Send + 'a>>;

/// Every check, in the order they are printed.
fn checks(setup: &Setup) -> Vec<Check<'_>> {
    vec![
        Box::pin(sandbox_check(setup)),
        Box::pin(user_check()),
        Box::pin(cgroup_check()),
        Box::pin(seccomp_check()),
        Box::pin(data_dir_check(setup)),
        Box::pin(store_check(setup)),
        Box::pin(listen_check(setup)),
        Box::pin(provider_checks(setup)),
    ]
}

/// Runs every check (concurrently: several wait on the network).
pub async fn run(setup: &Setup) -> Vec<Finding> {
    futures_util::future::join_all(checks(setup))
        .await
        .into_iter()
        .flatten()
        .collect()
}

/// The report, one finding a line (and its fix indented below).
pub fn report(findings: &[Finding]) -> String {
    let width = findings
        .iter()
        .map(|f| f.check.chars().count())
        .max()
        .unwrap_or(0);
    let mut out = String::new();
    for f in findings {
        let status = match f.status {
            Status::Ok => "ok",
            Status::Warn => "warn",
            Status::Fail => "FAIL",
        };
        out.push_str(&format!("{status:<5} {:<width$}  {}\n", f.check, f.detail));
        if let Some(fix) = &f.fix {
            out.push_str(&format!("{:<5} {:<width$}  fix: {fix}\n", "", ""));
        }
    }
    let count = |s| findings.iter().filter(|f| f.status == s).count();
    let (fails, warns) = (count(Status::Fail), count(Status::Warn));
    out.push_str(&match (fails, warns) {
        (0, 0) => "\nall good\n".to_string(),
        (0, w) => format!("\n{w} warning(s), nothing failing\n"),
        (f, w) => format!("\n{f} failing, {w} warning(s)\n"),
    });
    out
}

/// `mast doctor`: prints the report; exit 1 when a check fails.
pub async fn doctor(setup: &Setup) -> ExitCode {
    let findings = run(setup).await;
    print!("{}", report(&findings));
    if findings.iter().any(|f| f.status == Status::Fail) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

/// `bwrap --version`, as (`0.8.0`, parsed major and minor).
async fn bwrap_version() -> Option<(String, (u32, u32))> {
    let out = tokio::process::Command::new("bwrap")
        .arg("--version")
        .output()
        .await
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text.split_whitespace().last()?.to_string();
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    let parsed = (parts.next()?, parts.next().unwrap_or(0));
    Some((version, parsed))
}

async fn sandbox_check(setup: &Setup) -> Vec<Finding> {
    const NAME: &str = "sandbox";
    let version = bwrap_version().await;
    match sandbox::detect(false).await {
        Isolation::Bubblewrap => {
            let v = version.as_ref().map_or("?", |(v, _)| v.as_str());
            if version.as_ref().is_some_and(|(_, parsed)| *parsed < (0, 8)) {
                return vec![Finding::warn(
                    NAME,
                    format!(
                        "bubblewrap {v} works, but cannot forbid nested user namespaces inside sandboxes"
                    ),
                    "upgrade bubblewrap to 0.8 or later",
                )];
            }
            vec![Finding::ok(
                NAME,
                format!("bubblewrap {v} creates user, pid, ipc, uts and network namespaces"),
            )]
        }
        _ if version.is_none() => sandbox_missing(
            setup,
            "bubblewrap (`bwrap`) is not installed".into(),
            "install the `bubblewrap` package (apt-get install bubblewrap, dnf install bubblewrap)",
        ),
        Isolation::Unavailable(why) => sandbox_missing(
            setup,
            why,
            "allow unprivileged user namespaces: `sysctl kernel.unprivileged_userns_clone=1` (older Debian), \
             `sysctl kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu 23.10+), `user.max_user_namespaces` \
             above 0; in a container, relax its seccomp and AppArmor profiles (or run it privileged)",
        ),
        Isolation::Unsandboxed => unreachable!("detect(false) never answers unsandboxed"),
    }
}

fn sandbox_missing(setup: &Setup, why: String, fix: &str) -> Vec<Finding> {
    if setup.unsafe_unsandboxed {
        vec![Finding::warn(
            "sandbox",
            format!(
                "{why}; MAST_UNSAFE_UNSANDBOXED_TOOLS=1, so built-in tools run DIRECTLY on this host"
            ),
            fix,
        )]
    } else {
        vec![Finding::fail(
            "sandbox",
            format!("{why}: built-in tools (bash, files, …) would be off"),
            fix,
        )]
    }
}

/// The effective uid of this process (std has no geteuid; `/proc/self` belongs to it).
fn uid() -> Option<u32> {
    use std::os::unix::fs::MetadataExt as _;
    std::fs::metadata("/proc/self").ok().map(|m| m.uid())
}

async fn user_check() -> Vec<Finding> {
    if crate::tools::identity::running_as_root() {
        return vec![Finding::ok(
            "user",
            "root: each session's sandbox runs as a host user of its own",
        )];
    }
    vec![Finding::warn(
        "user",
        format!(
            "not root (uid {}): every session's sandbox runs as this same user, so sessions are kept apart by \
             namespaces only",
            uid().map_or("?".into(), |u| u.to_string())
        ),
        "run `mast serve` as root for a host user per session (and its own process count)",
    )]
}

async fn cgroup_check() -> Vec<Finding> {
    let cg = crate::tools::cgroup::host();
    let fix = "run `mast serve` as root with /sys/fs/cgroup writable (cgroup v1, or v2 with the server alone in its \
               cgroup: systemd `Delegate=yes`, or the container's only process)";
    [
        (
            "memory",
            cg.memory(),
            "each session's memory",
            "each process gets `ulimit -v` instead",
        ),
        (
            "pids",
            cg.pids(),
            "each session's process count",
            "only a per-user `ulimit -u`, or nothing for a non-root server",
        ),
    ]
    .into_iter()
    .map(|(controller, version, what, fallback)| match version {
        Some(v) => Finding::ok(
            "cgroups",
            format!("{v} `{controller}` controller is writable: {what} is limited"),
        ),
        None => Finding::warn(
            "cgroups",
            format!(
                "no `{controller}` cgroup ({}): {fallback}",
                cg.problem(controller).unwrap_or("not available here")
            ),
            fix,
        ),
    })
    .collect()
}

/// Whether bubblewrap loads the sandbox's seccomp filter here (tried in a scratch directory).
async fn seccomp_check() -> Vec<Finding> {
    if !matches!(
        sandbox::detect(false).await,
        crate::tools::sandbox::Isolation::Bubblewrap
    ) {
        return vec![];
    }
    let dir = std::env::temp_dir().join(format!("mast-doctor-seccomp-{}", std::process::id()));
    let checked = match std::fs::create_dir_all(&dir) {
        Ok(()) => sandbox::enable_seccomp(&dir).await,
        Err(e) => Err(format!("cannot create {}: {e}", dir.display())),
    };
    let _ = std::fs::remove_dir_all(&dir);
    vec![match checked {
        Ok(()) => Finding::ok(
            "seccomp",
            "bubblewrap loads the sandbox's seccomp filter (ptrace, keyrings, BPF, mounts, namespaces… denied)",
        ),
        Err(why) => Finding::warn(
            "seccomp",
            format!("sandboxes run without a seccomp filter: {why}"),
            "use bubblewrap 0.4 or later on x86_64 or aarch64",
        ),
    }]
}

/// The nearest directory at or above `path` that exists.
fn existing_ancestor(path: &Path) -> Option<&Path> {
    path.ancestors().find(|p| p.is_dir())
}

/// Whether this process can create files in `dir` (tried, not guessed from modes: root, ACLs
/// and read-only mounts all differ from what the bits say).
fn writable(dir: &Path) -> std::io::Result<()> {
    let probe = dir.join(format!(".mast-doctor-{}", std::process::id()));
    std::fs::write(&probe, b"")?;
    std::fs::remove_file(&probe)
}

async fn data_dir_check(setup: &Setup) -> Vec<Finding> {
    const NAME: &str = "data dir";
    let dir =
        std::path::absolute(&setup.store.data_dir).unwrap_or_else(|_| setup.store.data_dir.clone());
    let fix =
        "pick a directory this user may write with --data-dir (MAST_DATA_DIR), or fix its owner";
    if dir.exists() && !dir.is_dir() {
        return vec![Finding::fail(
            NAME,
            format!("{} is not a directory", dir.display()),
            fix,
        )];
    }
    let Some(probe_dir) = existing_ancestor(&dir) else {
        return vec![Finding::fail(
            NAME,
            format!("no part of {} exists", dir.display()),
            fix,
        )];
    };
    if let Err(e) = writable(probe_dir) {
        return vec![Finding::fail(
            NAME,
            format!("cannot write in {}: {e}", probe_dir.display()),
            fix,
        )];
    }
    let mut detail = if probe_dir == dir {
        format!("{} is writable", dir.display())
    } else {
        format!("{} will be created", dir.display())
    };
    if let Some(pid) = serving_pid(&dir) {
        detail.push_str(&format!(" (a server, pid {pid}, serves from it now)"));
    }
    vec![Finding::ok(NAME, detail)]
}

/// The pid of the `mast serve` holding the SQLite data directory's lock, if one does.
fn serving_pid(dir: &Path) -> Option<String> {
    let file = std::fs::File::open(dir.join("mast.lock")).ok()?;
    match file.try_lock() {
        Ok(()) => None,
        Err(std::fs::TryLockError::WouldBlock) => {
            let pid = std::fs::read_to_string(dir.join("mast.lock")).unwrap_or_default();
            Some(pid.trim().to_string()).filter(|p| !p.is_empty())
        }
        Err(_) => None,
    }
}

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

/// Reads the schema version and key counts over any connection.
macro_rules! read_state {
    ($conn:expr, $exists:expr) => {{
        async {
            let exists: bool = sqlx::query_scalar($exists).fetch_one(&mut *$conn).await?;
            if !exists {
                return Ok::<_, sqlx::Error>(None);
            }
            let migration: i64 = sqlx::query_scalar(
                "SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations WHERE success = TRUE",
            )
            .fetch_one(&mut *$conn)
            .await?;
            let keys: i64 = sqlx::query_scalar("SELECT COUNT(*) FROM api_keys")
                .fetch_one(&mut *$conn)
                .await
                .unwrap_or(0);
            let active: Option<i64> =
                sqlx::query_scalar("SELECT COUNT(*) FROM api_keys WHERE revoked_at IS NULL")
                    .fetch_one(&mut *$conn)
                    .await
                    .ok();
            Ok(Some(StoreState {
                migration,
                keys,
                active,
            }))
        }
        .await
    }};
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
        let migration: i64 = conn.query_row(
            "SELECT COALESCE(MAX(version), 0) FROM _sqlx_migrations WHERE success = TRUE",
            [],
            |r| r.get(0),
        )?;
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

async fn store_check(setup: &Setup) -> Vec<Finding> {
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
                read_state!(
                    &mut conn,
                    "SELECT to_regclass('_sqlx_migrations') IS NOT NULL"
                )
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

async fn listen_check(setup: &Setup) -> Vec<Finding> {
    const NAME: &str = "listen";
    let addr = setup.listen;
    let fix = "pick another address with --listen or MAST_LISTEN";
    match tokio::net::TcpListener::bind(addr).await {
        Ok(_) => vec![Finding::ok(NAME, format!("{addr} is free"))],
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => {
            let mut probe = addr;
            if probe.ip().is_unspecified() {
                probe.set_ip([127, 0, 0, 1].into());
            }
            let mast = reqwest::Client::new()
                .get(format!("http://{probe}/healthz"))
                .timeout(Duration::from_secs(3))
                .send()
                .await
                .ok()
                .filter(|r| r.status().is_success());
            let is_mast = match mast {
                Some(r) => r.json::<Value>().await.is_ok_and(|v| v["status"] == "ok"),
                None => false,
            };
            if is_mast {
                vec![Finding::ok(
                    NAME,
                    format!("a Mast server is already listening on {addr}"),
                )]
            } else {
                vec![Finding::fail(
                    NAME,
                    format!("{addr} is in use by another program"),
                    fix,
                )]
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => vec![Finding::fail(
            NAME,
            format!(
                "cannot listen on {addr}: permission denied (ports below 1024 need privileges)"
            ),
            fix,
        )],
        Err(e) => vec![Finding::fail(
            NAME,
            format!("cannot listen on {addr}: {e}"),
            fix,
        )],
    }
}

/// How a provider answered its model list.
async fn probe_models(
    check: String,
    url: String,
    headers: Vec<(&'static str, String)>,
    key_hint: String,
) -> Finding {
    let mut req = reqwest::Client::new()
        .get(&url)
        .timeout(Duration::from_secs(10));
    for (k, v) in headers {
        req = req.header(k, v);
    }
    match req.send().await {
        Ok(r) if r.status().is_success() => {
            let n = r
                .json::<Value>()
                .await
                .ok()
                .and_then(|v| v["data"].as_array().map(Vec::len));
            let models = n.map(|n| format!(", {n} models")).unwrap_or_default();
            Finding::ok(check, format!("{url} answers{models}"))
        }
        Ok(r) if matches!(r.status().as_u16(), 401 | 403) => Finding::fail(
            check,
            format!("{url} refused the credentials ({})", r.status()),
            format!("check {key_hint}"),
        ),
        Ok(r) => Finding::fail(
            check,
            format!("{url} answered {}", r.status()),
            "check the provider's base URL, and its status",
        ),
        Err(e) => {
            let cause = crate::error_chain::root_cause(&e);
            Finding::fail(
                check,
                format!("cannot reach {url}: {cause}"),
                "check the base URL, DNS, proxies and firewalls between this host and the provider",
            )
        }
    }
}

/// Headers that authenticate to the Anthropic API.
fn anthropic_headers(key: Option<&str>, token: Option<&str>) -> Vec<(&'static str, String)> {
    let mut h = vec![("anthropic-version", "2023-06-01".to_string())];
    if let Some(k) = key {
        h.push(("x-api-key", k.to_string()));
    }
    if let Some(t) = token {
        h.push(("authorization", format!("Bearer {t}")));
    }
    h
}

async fn provider_checks(setup: &Setup) -> Vec<Finding> {
    let configured = match &setup.providers {
        Ok(p) => p.clone(),
        Err(e) => {
            return vec![Finding::fail(
                "providers",
                format!("cannot read the provider configuration: {e}"),
                "fix MAST_PROVIDERS or the config file's [[providers]] tables",
            )];
        }
    };
    // The same checks `mast serve` makes before it starts.
    if let Err(e) = Models::new(setup.anthropic.clone(), &configured)
        .and_then(|m| m.check_not_self(setup.listen))
    {
        return vec![Finding::fail(
            "providers",
            format!("{e:#}"),
            "fix the provider configuration",
        )];
    }
    let mut probes: Vec<Pin<Box<dyn Future<Output = Finding> + Send>>> = Vec::new();
    let a = &setup.anthropic;
    if a.api_key.is_some() || a.auth_token.is_some() || a.base_url_is_custom() {
        let base = a.base_url.trim_end_matches('/');
        probes.push(Box::pin(probe_models(
            "provider anthropic".into(),
            format!("{base}/v1/models"),
            anthropic_headers(a.api_key.as_deref(), a.auth_token.as_deref()),
            "ANTHROPIC_API_KEY (or MAST_ANTHROPIC_API_KEY) or ANTHROPIC_AUTH_TOKEN".into(),
        )));
    } else {
        probes.push(Box::pin(async {
            Finding::warn(
                "provider anthropic",
                "off: Claude models (claude-…) are not available, only configured providers and mast-scripted",
                "set ANTHROPIC_API_KEY (or MAST_ANTHROPIC_API_KEY) for the server",
            )
        }));
    }
    for p in configured {
        let check = format!("provider {}", p.name);
        let key = p
            .api_key_env
            .as_ref()
            .and_then(|v| std::env::var(v).ok())
            .filter(|k| !k.is_empty());
        let hint = match &p.api_key_env {
            Some(var) => format!("the key in {var}"),
            None => "the provider's api_key_env setting".into(),
        };
        if let (Some(var), None) = (&p.api_key_env, &key) {
            probes.push(Box::pin(std::future::ready(Finding::fail(
                check,
                format!("its key variable {var} is not set"),
                format!("set {var} for the server"),
            ))));
            continue;
        }
        let (url, headers) = match p.kind {
            ProviderKind::Anthropic => (
                format!(
                    "{}/v1/models",
                    p.base_url
                        .as_deref()
                        .unwrap_or("https://api.anthropic.com")
                        .trim_end_matches('/')
                ),
                anthropic_headers(key.as_deref(), None),
            ),
            ProviderKind::Openai => (
                format!(
                    "{}/models",
                    p.base_url.as_deref().unwrap_or("").trim_end_matches('/')
                ),
                key.map(|k| vec![("authorization", format!("Bearer {k}"))])
                    .unwrap_or_default(),
            ),
        };
        probes.push(Box::pin(probe_models(check, url, headers, hint)));
    }
    futures_util::future::join_all(probes).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_lines_and_summary() {
        let text = report(&[
            Finding::ok("store", "fine"),
            Finding::fail("listen", "127.0.0.1:1 is in use", "pick another"),
        ]);
        assert_eq!(
            text,
            "ok    store   fine\nFAIL  listen  127.0.0.1:1 is in use\n              fix: pick another\n\n1 failing, 0 warning(s)\n"
        );
    }
}
