//! Environment packages (`config.packages`): each distinct set of package lists is
//! installed once into a cached **layer**, `<data dir>/package-layers/<key>/`, where the key is
//! a hash of the lists (and the operator's mirrors), so every session of every environment
//! with those lists shares it and changed lists make a new one. Sandboxes mount it read-only at
//! `/opt/mast/packages` with `PATH`, `PYTHONPATH`, `NODE_PATH`, … pointing into it.
//!
//! A layer is built on the first tool call that needs it, inside an install sandbox that may
//! write only the layer and reaches the network only through the egress proxy, under the
//! environment's networking rules. Concurrent sessions wait for one build: a lock per key in
//! this process and a file lock for other processes sharing the data directory. A finished
//! layer is renamed into place whole, so a crash mid-build leaves nothing half-installed in
//! use. A failed build is remembered for [`RETRY_FAILED_AFTER`], so tool calls fail fast with
//! the installer's reason instead of installing again on every call.

pub mod install;

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use sha2::{Digest, Sha256};
use tokio::io::AsyncReadExt;

use super::egress::EgressPolicy;
use super::netguard::NetGuard;
use super::proxy;
use super::sandbox::{Isolation, Limits, Network, PackageMount, SandboxCommand};
use mast_domain::environment::Packages;

pub use install::session_env;

/// How long a failed build's reason is given to tool calls before the next one retries it.
pub const RETRY_FAILED_AFTER: Duration = Duration::from_secs(600);
/// The marker a finished layer holds; its modification time is the layer's last use.
const COMPLETE: &str = ".complete";
/// Lines of the installer's output a failure quotes.
const TAIL_LINES: usize = 15;

/// Package mirrors the operator names per installer (`MAST_PIP_INDEX_URL`,
/// `MAST_NPM_REGISTRY`, `MAST_CARGO_INDEX`, `MAST_GOPROXY`, `MAST_GEM_SOURCE`). apt uses the
/// host's own sources (`/etc/apt`) and package index.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Mirrors {
    pub pip: Option<String>,
    pub npm: Option<String>,
    pub cargo: Option<String>,
    pub go: Option<String>,
    pub gem: Option<String>,
}

impl Mirrors {
    /// The mirrors' host names, which installs may reach under `limited` networking.
    fn hosts(&self) -> Vec<String> {
        [&self.pip, &self.npm, &self.cargo, &self.go, &self.gem]
            .into_iter()
            .flatten()
            .filter_map(|m| reqwest::Url::parse(m.trim_start_matches("sparse+")).ok())
            .filter_map(|u| u.host_str().map(str::to_ascii_lowercase))
            .collect()
    }
}

/// Operator settings of package layers.
#[derive(Debug, Clone)]
pub struct PackagesConfig {
    pub mirrors: Mirrors,
    /// How long one environment's whole install may take (`MAST_PACKAGE_INSTALL_TIMEOUT_SECONDS`).
    pub install_timeout: Duration,
    /// Layers unused this long are removed at start-up (`MAST_PACKAGE_LAYER_TTL_DAYS`; 0 keeps
    /// them).
    pub layer_ttl: Duration,
}

impl Default for PackagesConfig {
    fn default() -> Self {
        PackagesConfig {
            mirrors: Mirrors::default(),
            install_timeout: Duration::from_secs(900),
            layer_ttl: Duration::from_secs(30 * 86_400),
        }
    }
}

/// The managers of `config.packages` with their lists, in install order (alphabetical).
pub fn lists(p: &Packages) -> [(&'static str, &[String]); 6] {
    [
        ("apt", &p.apt),
        ("cargo", &p.cargo),
        ("gem", &p.gem),
        ("go", &p.go),
        ("npm", &p.npm),
        ("pip", &p.pip),
    ]
}

/// Whether `p` asks for anything to be installed.
pub fn wanted(p: &Packages) -> bool {
    lists(p).iter().any(|(_, l)| !l.is_empty())
}

/// What the sandbox needs to run installs.
#[derive(Debug, Clone)]
pub struct InstallSandbox {
    pub isolation: Isolation,
    pub helper: PathBuf,
    pub accounts: PathBuf,
    pub netguard: NetGuard,
    pub limits: Limits,
}

/// One layer key's build lock, holding its last failure and when it happened.
type Slot = Arc<tokio::sync::Mutex<Option<(String, Instant)>>>;

/// The server's package layers.
pub struct Layers {
    root: PathBuf,
    config: PackagesConfig,
    sandbox: InstallSandbox,
    /// One lock per key, holding the last failure (and when it happened).
    slots: Mutex<HashMap<String, Slot>>,
}

impl Layers {
    /// The layers under `root` (`<data dir>/package-layers`), created passable for sandbox users.
    pub fn new(root: PathBuf, config: PackagesConfig, sandbox: InstallSandbox) -> Self {
        Layers {
            root,
            config,
            sandbox,
            slots: Mutex::new(HashMap::new()),
        }
    }

    /// The directory holding every layer.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The key of a set of package lists: what the layer's directory is named.
    pub fn key(&self, packages: &Packages) -> String {
        let text =
            serde_json::to_string(&(lists(packages), &self.config.mirrors)).unwrap_or_default();
        let digest = Sha256::digest(text.as_bytes());
        digest.iter().take(12).map(|b| format!("{b:02x}")).collect()
    }

    /// Removes layers unused for longer than the configured time (at start-up, before any
    /// session mounts one), and leftovers of builds a crash interrupted.
    pub fn evict(&self) {
        let Ok(entries) = std::fs::read_dir(&self.root) else {
            return;
        };
        for e in entries.flatten() {
            let path = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if name.ends_with(".building") || name.ends_with(".work") {
                let _ = std::fs::remove_dir_all(&path);
                continue;
            }
            if self.config.layer_ttl.is_zero() || !path.is_dir() {
                continue;
            }
            let used = std::fs::metadata(path.join(COMPLETE)).and_then(|m| m.modified());
            let stale = match used {
                Ok(t) => t.elapsed().is_ok_and(|age| age > self.config.layer_ttl),
                Err(_) => true,
            };
            if stale {
                tracing::info!(layer = %name, "removing an unused package layer");
                let _ = std::fs::remove_dir_all(&path);
            }
        }
    }

    /// The layer of `packages`, built first if it is not yet (waiting for a build another
    /// session started); `egress` is the environment's network policy.
    pub async fn ensure(
        &self,
        packages: &Packages,
        egress: &EgressPolicy,
    ) -> Result<PathBuf, String> {
        let key = self.key(packages);
        let dir = self.root.join(&key);
        if mark_used(&dir) {
            return Ok(dir);
        }
        if !matches!(self.sandbox.isolation, Isolation::Bubblewrap) {
            return Err(
                "the environment's packages cannot be installed: package layers need the bubblewrap sandbox"
                    .into(),
            );
        }
        let slot = self
            .slots
            .lock()
            .expect("package slots")
            .entry(key.clone())
            .or_default()
            .clone();
        let mut failed = slot.lock().await;
        if mark_used(&dir) {
            return Ok(dir);
        }
        if let Some((why, at)) = failed.as_ref()
            && at.elapsed() < RETRY_FAILED_AFTER
        {
            return Err(why.clone());
        }
        // Other processes sharing this data directory build under the same file lock.
        let lock_path = self.root.join(format!("{key}.lock"));
        let lock = tokio::task::spawn_blocking(move || -> std::io::Result<std::fs::File> {
            let f = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&lock_path)?;
            rustix::fs::flock(&f, rustix::fs::FlockOperation::LockExclusive)?;
            Ok(f)
        })
        .await
        .map_err(|e| format!("the package layer lock failed: {e}"))?
        .map_err(|e| format!("the package layer lock failed: {e}"))?;
        if mark_used(&dir) {
            return Ok(dir);
        }
        let started = Instant::now();
        let result = self.build(&key, packages, egress).await;
        drop(lock);
        let line = match &result {
            Ok(()) => format!("built in {} s", started.elapsed().as_secs()),
            Err(why) => format!("failed: {}", why.lines().next().unwrap_or_default()),
        };
        self.record(&key, &line);
        match result {
            Ok(()) => {
                *failed = None;
                Ok(dir)
            }
            Err(why) => {
                *failed = Some((why.clone(), Instant::now()));
                Err(why)
            }
        }
    }

    /// Appends one line to `builds.log` beside the layers: a record of every build, for the
    /// operator (and for tests that count builds).
    fn record(&self, key: &str, line: &str) {
        // A log line's time, like the server log's: the wall clock, not the store's.
        let now = mast_domain::time::format(mast_domain::clock::Clock::system().now());
        let written = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.root.join("builds.log"))
            .and_then(|mut f| writeln!(f, "{now} {key} {line}"));
        if let Err(e) = written {
            tracing::warn!(error = %e, "could not record a package layer build");
        }
    }

    /// Installs every list into `<key>.building`, then renames it into place.
    async fn build(
        &self,
        key: &str,
        packages: &Packages,
        egress: &EgressPolicy,
    ) -> Result<(), String> {
        let io = |e: std::io::Error| format!("the package layer could not be prepared: {e}");
        let building = self.root.join(format!("{key}.building"));
        let work = self.root.join(format!("{key}.work"));
        for d in [&building, &work] {
            let _ = tokio::fs::remove_dir_all(d).await;
        }
        for d in [building.clone(), work.join("home"), work.join("state")] {
            tokio::fs::create_dir_all(&d).await.map_err(io)?;
        }
        let outcome = self.install_all(&building, &work, packages, egress).await;
        let _ = tokio::fs::remove_dir_all(&work).await;
        if let Err(why) = outcome {
            let _ = tokio::fs::remove_dir_all(&building).await;
            return Err(why);
        }
        tokio::fs::write(building.join(COMPLETE), key)
            .await
            .map_err(io)?;
        let dir = self.root.join(key);
        let _ = tokio::fs::remove_dir_all(&dir).await;
        tokio::fs::rename(&building, &dir).await.map_err(io)?;
        Ok(())
    }

    async fn install_all(
        &self,
        layer: &Path,
        work: &Path,
        packages: &Packages,
        egress: &EgressPolicy,
    ) -> Result<(), String> {
        let deadline = Instant::now() + self.config.install_timeout;
        for (manager, list) in lists(packages) {
            if list.is_empty() {
                continue;
            }
            let script = install::script(manager, list, &self.config.mirrors);
            let left = deadline.saturating_duration_since(Instant::now());
            let (ok, output) = self.run(layer, work, egress, script, left).await?;
            if !ok {
                return Err(failure(manager, list, &output));
            }
        }
        Ok(())
    }

    /// Runs one install script in the install sandbox; (succeeded, its output).
    async fn run(
        &self,
        layer: &Path,
        work: &Path,
        egress: &EgressPolicy,
        script: String,
        timeout: Duration,
    ) -> Result<(bool, String), String> {
        let policy = match egress {
            EgressPolicy::Limited(hosts) => {
                let mut hosts = hosts.clone();
                hosts.extend(self.config.mirrors.hosts());
                EgressPolicy::Limited(hosts)
            }
            open => open.clone(),
        };
        let state = work.join("state");
        let (network, proxy) = if policy.is_closed() {
            (Network::None, None)
        } else {
            let (guard, name) = proxy::EgressProxy::start(&state, policy, self.sandbox.netguard)
                .map_err(|e| {
                    format!("the egress proxy for package installs could not start: {e}")
                })?;
            let socket = state.join(&name);
            (Network::Proxied { socket }, Some((guard, name)))
        };
        let mut env = Vec::new();
        if let Some((_, name)) = &proxy {
            env.push(("MAST_PROXY_SOCKET".to_string(), name.clone()));
            env.extend(proxy::sandbox_env());
        }
        let wrapper = match &proxy {
            Some(_) => format!(
                "__cmd=\"$(cat)\"; exec </dev/null\n(\n{}\n)\neval \"$__cmd\"",
                proxy::forwarder_command(&self.sandbox.helper)
            ),
            None => "__cmd=\"$(cat)\"; exec </dev/null\neval \"$__cmd\"".to_string(),
        };
        // In a cgroup of its own when the host has them (memory and processes counted
        // together); without one, no per-process address-space cap, which breaks node and go
        // (they reserve far more than they use): the install is the operator's own code path.
        let cgroup = super::cgroup::host().command(
            &format!(
                "packages-{}",
                work.file_name().unwrap_or_default().to_string_lossy()
            ),
            self.sandbox.limits.memory_bytes,
            self.sandbox.limits.max_processes,
        );
        let limits = Limits {
            cpu_seconds: timeout.as_secs().max(1),
            memory_bytes: if cgroup.is_some() {
                self.sandbox.limits.memory_bytes
            } else {
                1 << 40
            },
            workspace_bytes: 0,
            file_bytes: 16 << 30,
            ..self.sandbox.limits
        };
        let home = work.join("home");
        let command = SandboxCommand {
            isolation: &self.sandbox.isolation,
            workspace: &home,
            state: &state,
            network: &network,
            limits,
            script: wrapper,
            env,
            helper: &self.sandbox.helper,
            user: None,
            accounts: &self.sandbox.accounts,
            mounts: &Default::default(),
            packages: Some(PackageMount {
                dir: layer,
                install: true,
            }),
            hidden: &Default::default(),
        };
        let mut child = command.spawn(cgroup.as_ref(), script)?;
        let mut stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        let finished = async {
            let (mut out, mut err) = (Vec::new(), Vec::new());
            let _ = tokio::join!(stdout.read_to_end(&mut out), stderr.read_to_end(&mut err));
            let status = child.wait().await;
            out.extend(err);
            (status.is_ok_and(|s| s.success()), out)
        };
        let result = tokio::time::timeout(timeout, finished).await;
        drop(proxy);
        if let Some(cg) = cgroup {
            if result.is_err() {
                cg.kill_all();
            }
            cg.close().await;
        }
        match result {
            Ok((ok, out)) => Ok((ok, String::from_utf8_lossy(&out).into_owned())),
            Err(_) => Err(format!(
                "installing the environment's packages took longer than {} s and was stopped",
                self.config.install_timeout.as_secs()
            )),
        }
    }
}

/// Touches a finished layer's marker (its last use, for eviction); false when not built.
fn mark_used(dir: &Path) -> bool {
    let marker = dir.join(COMPLETE);
    match std::fs::File::options().append(true).open(&marker) {
        Ok(f) => {
            let _ = f.set_modified(SystemTime::now());
            true
        }
        Err(_) => false,
    }
}

/// The message of a failed install: the packages it names (those the output mentions, else
/// the whole list) and the installer's last lines.
fn failure(manager: &str, list: &[String], output: &str) -> String {
    let lower = output.to_ascii_lowercase();
    let named: Vec<&String> = list
        .iter()
        .filter(|s| {
            let name = s
                .split(['=', '<', '>', '@', '~', '!', ':', '['])
                .find(|p| !p.is_empty())
                .unwrap_or(s.as_str())
                .to_ascii_lowercase();
            lower.contains(&name)
        })
        .collect();
    let named: Vec<String> = if named.is_empty() {
        list.iter().map(|s| format!("`{s}`")).collect()
    } else {
        named.iter().map(|s| format!("`{s}`")).collect()
    };
    let lines: Vec<&str> = output.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(TAIL_LINES)..].join("\n");
    format!(
        "installing the environment's {manager} packages failed ({}); the installer's last lines:\n{tail}",
        named.join(", ")
    )
}

/// One session's view of its environment's packages.
pub struct SessionPackages {
    layers: Arc<Layers>,
    packages: Packages,
    egress: EgressPolicy,
    /// The reason of the last failed install, until a `session.error` reported it.
    failure: Mutex<Option<String>>,
    reported: AtomicBool,
}

impl SessionPackages {
    /// The packages of a session's environment.
    pub fn new(layers: Arc<Layers>, packages: Packages, egress: EgressPolicy) -> Self {
        SessionPackages {
            layers,
            packages,
            egress,
            failure: Mutex::new(None),
            reported: AtomicBool::new(false),
        }
    }

    /// The layer's directory, built (or waited for) on first use.
    pub async fn layer(&self) -> Result<PathBuf, String> {
        let result = self.layers.ensure(&self.packages, &self.egress).await;
        if let Err(why) = &result {
            *self.failure.lock().expect("package failure") = Some(why.clone());
        }
        result
    }

    /// The install failure to report as a `session.error`, once per session runner.
    pub fn failure_to_report(&self) -> Option<String> {
        let why = self.failure.lock().expect("package failure").clone()?;
        (!self.reported.swap(true, Ordering::SeqCst)).then_some(why)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_name_the_package_and_quote_the_last_lines() {
        let out = "Collecting reqests\nERROR: Could not find a version that satisfies the requirement reqests\nERROR: No matching distribution found for reqests\n";
        let m = failure("pip", &["six".into(), "reqests==1.0".into()], out);
        assert!(
            m.starts_with("installing the environment's pip packages failed (`reqests==1.0`)"),
            "{m}"
        );
        assert!(
            m.ends_with("No matching distribution found for reqests"),
            "{m}"
        );
    }
}
