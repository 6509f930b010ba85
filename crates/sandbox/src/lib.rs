//! The built-in toolset (`agent_toolset_20260401`): bash, read, write, edit, glob, grep,
//! web_fetch and web_search, run for `cloud` environments inside a per-session sandbox.
//! Whether a call may run at all is decided before it gets here (`engine::permissions`).
//!
//! [`Toolbox`] is the server's set of tools; `Toolbox::for_session` gives a session its
//! workspace, its limits and its mount table (`mounts`: what the engine builds from the
//! session's files, memory stores and skills, plus a writable bind of
//! `<data dir>/session-outputs/<session id>` at `/mnt/session/outputs`). `bash` runs in
//! bubblewrap (`sandbox`) under cgroup limits (`cgroup`), a seccomp filter (`seccomp`), the
//! workspace quota (`quota`) and, on a root server, a host user of its own (`identity`); its
//! only network is the egress proxy (`proxy`), which obeys the environment's rules (`egress`)
//! and connects only to public addresses (`netguard`). The file tools (`files`, `search`) run
//! in the server and walk the workspace from directory handles, never following a link the
//! sandbox planted; so do the server's other walks of trees a sandbox can write (memory store
//! directories: `memory_dir`; checkpoint snapshots: `snapshots`; fork copies: `tree_copy`). `protections` says which of
//! these are in force on this host, and what runs instead of the missing ones.
//!
//! Also here, because each runs commands or touches files on a session's behalf: environments'
//! package layers (`packages`: built once per package lists in an install sandbox, mounted
//! read-only), repository clones (`git`: a host `git` with a cleared environment, its config
//! and token in `GIT_CONFIG_*` variables, given the addresses the guard checked), per-turn
//! workspace checkpoints for forks (`checkpoints`, stored as content-addressed `snapshots`), and the protected paths of `auto`-approved
//! calls (`protected`: the lists the permission policy also reads, so the two never disagree;
//! `masks`: hiding them in the sandbox).
//!
//! This crate depends only on `mast-domain`: it knows nothing of the store, the loop or HTTP.
//! No command an agent gives runs outside a sandbox (unless the operator sets
//! `MAST_UNSAFE_UNSANDBOXED_TOOLS=1` where none works). What the server itself does for a
//! session (the file tools, the walks, `web_fetch`, `git` clones) treats what a sandbox can
//! write as hostile and reaches only the addresses the guard allows.

pub mod bash;
pub mod cgroup;
pub mod checkpoints;
pub mod egress;
pub mod files;
pub mod git;
pub mod identity;
pub mod masks;
pub mod memory_dir;
pub mod mounts;
pub mod netguard;
pub mod packages;
pub mod protected;
pub mod protections;
pub mod proxy;
pub mod quota;
#[cfg(test)]
mod races;
pub mod sandbox;
pub mod search;
pub mod seccomp;
pub mod snapshots;
pub mod test_env;
pub mod tree_copy;
pub mod web;

use std::collections::HashMap;
use std::ffi::OsStr;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

use rustix::fs::{Mode, OFlags};
use serde_json::{Value, json};

use egress::EgressPolicy;
use mast_domain::environment::EnvironmentConfig;
use mast_domain::tools::ToolDef;
use mast_domain::tools::{BuiltinToolConfig, Tool};
use netguard::NetGuard;
use sandbox::{Isolation, Limits, Network};

/// What a tool call produced: content blocks for the `tool_result`, and whether it failed.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub content: Vec<Value>,
    pub is_error: bool,
}

impl ToolOutput {
    /// A successful text result.
    pub fn text(s: impl Into<String>) -> Self {
        ToolOutput {
            content: vec![json!({"type": "text", "text": s.into()})],
            is_error: false,
        }
    }

    /// A failed call, written for the model's next decision.
    pub fn error(s: impl Into<String>) -> Self {
        ToolOutput {
            content: vec![json!({"type": "text", "text": s.into()})],
            is_error: true,
        }
    }
}

/// How a call came to run, which decides what it may see.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Approval {
    /// The `auto` policy judged it safe from its text alone: the protected paths
    /// (`protected::is_protected`) stay hidden from it.
    Auto,
    /// `always_allow`, or a person confirmed it: it sees what the sandbox holds.
    Granted,
}

/// Operator settings of the built-in tools.
#[derive(Debug, Clone)]
pub struct ToolsConfig {
    /// `MAST_UNSAFE_UNSANDBOXED_TOOLS=1`: run tools without a sandbox when none works.
    pub unsafe_unsandboxed: bool,
    /// The `mast` binary (the in-sandbox proxy forwarder).
    pub helper: PathBuf,
    /// `MAST_WEB_SEARCH_URL`: a SearXNG-compatible search endpoint.
    pub web_search_url: Option<String>,
    /// `MAST_ALLOW_PRIVATE_NETWORK=1`: tools may reach loopback, private and link-local
    /// addresses (an intranet deployment; tests against local servers). Off by default, so a
    /// session cannot reach the server, its database or the cloud metadata service.
    pub allow_private_network: bool,
    /// `MAST_ALLOW_PRIVATE_HOSTS`: internal hosts and ranges tools may reach anyway (a
    /// package mirror on the intranet), narrower than `allow_private_network`.
    pub allow_private_hosts: Vec<netguard::PrivateAllow>,
    /// Package layers: mirrors, install timeout, eviction.
    pub packages: packages::PackagesConfig,
    pub limits: Limits,
    /// `MAST_WORKSPACE_CHECKPOINTS`: per-turn workspace checkpoints kept per session, for
    /// forks at earlier events (0 keeps none).
    pub workspace_checkpoints: usize,
    /// `MAST_SNAPSHOT_SWEEP_SECONDS`: how often snapshot objects no checkpoint refers to are
    /// swept, and how long ago such an object must have been written or reused to go.
    pub snapshot_sweep_interval: std::time::Duration,
}

impl Default for ToolsConfig {
    fn default() -> Self {
        ToolsConfig {
            unsafe_unsandboxed: false,
            helper: std::env::current_exe().unwrap_or_else(|_| PathBuf::from("mast")),
            web_search_url: None,
            allow_private_network: false,
            allow_private_hosts: Vec::new(),
            packages: packages::PackagesConfig::default(),
            limits: Limits::default(),
            workspace_checkpoints: DEFAULT_WORKSPACE_CHECKPOINTS,
            snapshot_sweep_interval: checkpoints::SWEEP_INTERVAL,
        }
    }
}

/// The tools that work on the session's files.
const WORKSPACE_TOOLS: &[&str] = &["bash", "read", "write", "edit", "glob", "grep"];

/// Workspace checkpoints kept per session unless configured.
pub const DEFAULT_WORKSPACE_CHECKPOINTS: usize = 8;

/// The sandbox directory whose files become the session's output files.
pub const OUTPUTS: &str = "/mnt/session/outputs";

/// The built-in tools of this server.
pub struct Toolbox {
    isolation: Isolation,
    data_dir: PathBuf,
    config: ToolsConfig,
    /// Each session's sandbox runs as a host user of its own (the server runs as root).
    session_users: bool,
    /// Why sandboxes cannot reach their workspaces, if they cannot.
    unreachable: Option<String>,
    /// Which protections are in force here.
    protections: protections::Protections,
    /// `MAST_ALLOW_PRIVATE_HOSTS`, fixed for the life of the process.
    private_allow: &'static [netguard::PrivateAllow],
    /// Environments' package layers.
    layers: Arc<packages::Layers>,
    /// Each session's [`SessionTools::calls`], shared by its threads' tools while any holds it.
    session_calls: std::sync::Mutex<HashMap<String, Weak<tokio::sync::RwLock<()>>>>,
    /// The sessions' checkpoints (one value, so its sweep knows the snapshots in progress).
    checkpoints: checkpoints::Checkpoints,
}

/// A session's tools: its workspace, state, network policy and toolset configuration.
pub struct SessionTools {
    pub session_id: String,
    pub workspace: PathBuf,
    pub state_dir: PathBuf,
    pub isolation: Isolation,
    pub limits: Limits,
    pub helper: PathBuf,
    pub egress: EgressPolicy,
    /// The host uid the sandbox runs as, when it has one of its own.
    pub user: Option<u32>,
    /// The sandbox's account files (`passwd`, `group`).
    pub accounts: PathBuf,
    /// Which addresses tools may connect to (see [`ToolsConfig::allow_private_network`]).
    pub netguard: NetGuard,
    /// Host paths shown at other paths in the sandbox (session resources).
    pub mounts: mounts::MountTable,
    /// The environment's packages, when it has any.
    pub packages: Option<Arc<packages::SessionPackages>>,
    configs: Vec<BuiltinToolConfig>,
    search_url: Option<String>,
    /// Shared by the session's threads, which can run commands at once: a command with
    /// protected entries masked holds it alone, from the walk that finds them until it ends,
    /// so no other command can move them in between; every other command shares it.
    pub(crate) calls: Arc<tokio::sync::RwLock<()>>,
}

impl Toolbox {
    /// The address check for connections the server makes for sessions (MCP servers).
    pub fn netguard(&self) -> NetGuard {
        NetGuard {
            allow_private: self.config.allow_private_network,
            allow: self.private_allow,
        }
    }

    /// The environments' package layers.
    pub fn layers(&self) -> &Arc<packages::Layers> {
        &self.layers
    }

    /// Detects the sandbox and says at start-up what built-in tools will do, and which
    /// protections are in force.
    pub async fn new(data_dir: &Path, config: ToolsConfig) -> Self {
        let isolation = sandbox::detect(config.unsafe_unsandboxed).await;
        let data_dir = std::path::absolute(data_dir).unwrap_or_else(|_| data_dir.to_path_buf());
        let session_users =
            identity::running_as_root() && matches!(isolation, Isolation::Bubblewrap);
        let etc = data_dir.join("sandbox-etc");
        let unreachable = prepare_shared_dirs(&data_dir, session_users)
            .and_then(|()| {
                sandbox::write_account_files(&etc)
                    .map_err(|e| format!("cannot write the sandbox's account files: {e}"))
            })
            .err();
        if let Err(e) = close_private_files(&data_dir) {
            tracing::warn!(error = %e, "could not make the checkpoints and outputs' manifests private to the server");
        }
        let seccomp = match isolation {
            Isolation::Bubblewrap if unreachable.is_none() => sandbox::enable_seccomp(&etc).await,
            _ => Err("no sandbox".into()),
        };
        let protections = protections::Protections::assess(&protections::Setup {
            isolation: &isolation,
            unreachable: unreachable.as_deref(),
            session_users,
            limits: &config.limits,
            cgroups: cgroup::host(),
            seccomp,
            allow_private_network: config.allow_private_network,
        });
        protections.log();
        // Leaked once per server: the guard stays a cheap copy with the list borrowed.
        let private_allow: &'static [netguard::PrivateAllow] =
            Box::leak(config.allow_private_hosts.clone().into_boxed_slice());
        let layers_dir = data_dir.join("package-layers");
        if let Err(e) = std::fs::create_dir_all(&layers_dir).and_then(|()| {
            // Sandboxes of their own users read the layers.
            std::fs::set_permissions(&layers_dir, std::fs::Permissions::from_mode(0o755))
        }) {
            tracing::warn!(error = %e, dir = %layers_dir.display(), "cannot prepare the package layers' directory");
        }
        let layers = packages::Layers::new(
            layers_dir,
            config.packages.clone(),
            packages::InstallSandbox {
                isolation: match &unreachable {
                    Some(why) => Isolation::Unavailable(why.clone()),
                    None => isolation.clone(),
                },
                helper: config.helper.clone(),
                accounts: etc.clone(),
                netguard: NetGuard {
                    allow_private: config.allow_private_network,
                    allow: private_allow,
                },
                limits: config.limits,
            },
        );
        layers.evict();
        let checkpoints = checkpoints::Checkpoints::new(
            &data_dir,
            config.workspace_checkpoints,
            checkpoints::Checkpoints::cap_of(&config.limits),
        );
        Toolbox {
            isolation,
            checkpoints,
            data_dir,
            config,
            session_users,
            unreachable,
            protections,
            private_allow,
            layers: Arc::new(layers),
            session_calls: Default::default(),
        }
    }

    /// The lock the tools of `session_id`'s threads share (see [`SessionTools::calls`]).
    fn session_calls(&self, session_id: &str) -> Arc<tokio::sync::RwLock<()>> {
        let mut all = self.session_calls.lock().expect("session calls lock");
        if let Some(lock) = all.get(session_id).and_then(Weak::upgrade) {
            return lock;
        }
        // Sessions come and go: forget those whose tools are gone.
        all.retain(|_, l| l.strong_count() > 0);
        let lock = Arc::new(tokio::sync::RwLock::new(()));
        all.insert(session_id.to_string(), Arc::downgrade(&lock));
        lock
    }

    /// One line for the start-up banner: how built-in tools run on this host, and which of
    /// their protections are in force (the start-up log has each one's detail).
    pub fn describe(&self) -> String {
        let base = match (&self.isolation, &self.unreachable) {
            (_, Some(why)) => return format!("built-in tools cannot run: {why}"),
            (Isolation::Bubblewrap, None) if self.session_users => {
                "bubblewrap sandboxes, a host user per session"
            }
            (Isolation::Bubblewrap, None) => "bubblewrap sandboxes",
            (Isolation::Unsandboxed, None) => {
                return "UNSANDBOXED (MAST_UNSAFE_UNSANDBOXED_TOOLS=1): tools run on this host"
                    .into();
            }
            (Isolation::Unavailable(why), None) => return format!("built-in tools are off: {why}"),
        };
        let p = &self.protections;
        let (mut active, mut weaker) = (Vec::new(), Vec::new());
        for (name, prot) in [
            ("memory", &p.memory),
            ("processes", &p.processes),
            ("disk", &p.disk),
            ("seccomp", &p.seccomp),
            ("network", &p.network),
        ] {
            if prot.active {
                active.push(name);
            } else {
                weaker.push(name);
            }
        }
        let mut line = format!("{base}; limits in force: {}", active.join(", "));
        if !weaker.is_empty() {
            line.push_str(&format!(
                "; weaker or off: {} (see the log)",
                weaker.join(", ")
            ));
        }
        line
    }

    /// Which protections of built-in tools are in force on this host.
    pub fn protections(&self) -> &protections::Protections {
        &self.protections
    }

    /// The limits of sessions' commands and workspaces.
    pub fn limits(&self) -> &Limits {
        &self.config.limits
    }

    /// How tools are isolated here.
    pub fn isolation(&self) -> &Isolation {
        &self.isolation
    }

    /// Where a session's workspace (`/workspace` in its sandbox) is on the host.
    pub fn workspace_dir(&self, session_id: &str) -> PathBuf {
        self.data_dir.join("workspaces").join(session_id)
    }

    fn state_dir(&self, session_id: &str) -> PathBuf {
        self.data_dir.join("sandbox-state").join(session_id)
    }

    /// Where a session's mounted resources are kept on the host (server-written, readable
    /// by the sandbox; never inside the workspace, which the sandbox can change).
    pub fn mounts_dir(&self, session_id: &str) -> PathBuf {
        self.data_dir.join("sandbox-mounts").join(session_id)
    }

    /// Where skill versions are unpacked, one directory per version, shared by sessions.
    pub fn skill_bundles_dir(&self) -> PathBuf {
        self.data_dir.join("skill-bundles")
    }

    /// Where the files a session's sandbox writes at [`OUTPUTS`] are kept on the host.
    pub fn outputs_dir(&self, session_id: &str) -> PathBuf {
        self.data_dir.join("session-outputs").join(session_id)
    }

    /// The host uid a session's sandbox runs as, when sandboxes have users of their own.
    pub fn session_user(&self, session_id: &str) -> Option<u32> {
        self.session_users
            .then(|| identity::session_uid(session_id))
    }

    /// The tools of one session, creating its workspace on first use.
    pub fn for_session(
        &self,
        session_id: &str,
        environment: &EnvironmentConfig,
        tools: &[Tool],
        mounts: mounts::MountTable,
    ) -> std::io::Result<SessionTools> {
        let workspace = self.workspace_dir(session_id);
        let state_dir = self.state_dir(session_id);
        let outputs = self.outputs_dir(session_id);
        let user = self
            .session_users
            .then(|| identity::session_uid(session_id));
        for dir in [&workspace, &state_dir, &outputs] {
            std::fs::create_dir_all(dir)?;
            if let Some(uid) = user {
                let dir = open_session_dir(dir)?;
                // Only the session's own user (and the server) may enter.
                rustix::fs::fchmod(&dir, Mode::from_bits_truncate(0o700))?;
                identity::give_tree(dir.as_fd(), uid)?;
            }
        }
        let configs = tools
            .iter()
            .find_map(|t| match t {
                Tool::AgentToolset { configs, .. } => Some(configs.clone()),
                _ => None,
            })
            .unwrap_or_default();
        Ok(SessionTools {
            session_id: session_id.to_string(),
            workspace,
            state_dir,
            isolation: match &self.unreachable {
                Some(why) => Isolation::Unavailable(why.clone()),
                None => self.isolation.clone(),
            },
            limits: self.config.limits,
            helper: self.config.helper.clone(),
            egress: EgressPolicy::of(environment),
            user,
            accounts: self.data_dir.join("sandbox-etc"),
            netguard: self.netguard(),
            packages: match environment {
                EnvironmentConfig::Cloud { packages: p, .. } if packages::wanted(p) => {
                    Some(Arc::new(packages::SessionPackages::new(
                        self.layers.clone(),
                        p.clone(),
                        EgressPolicy::of(environment),
                    )))
                }
                _ => None,
            },
            // Writable: what the agent leaves there becomes the session's output files.
            mounts: mounts::MountTable::new(
                [
                    mounts.entries(),
                    &[mounts::Mount {
                        sandbox: OUTPUTS.into(),
                        host: outputs,
                        read_only: false,
                    }],
                ]
                .concat(),
            ),
            configs,
            search_url: self.config.web_search_url.clone(),
            calls: self.session_calls(session_id),
        })
    }

    /// The sessions' workspace checkpoints (for forks at earlier events).
    pub fn checkpoints(&self) -> checkpoints::Checkpoints {
        self.checkpoints.clone()
    }

    /// Starts the sweep of snapshot objects no checkpoint refers to (see
    /// [`checkpoints::Checkpoints::spawn_sweeper`]).
    pub fn spawn_snapshot_sweeper(
        &self,
        shutdown: tokio_util::sync::CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        self.checkpoints()
            .spawn_sweeper(self.config.snapshot_sweep_interval, shutdown)
    }

    /// Removes a deleted session's workspace and sandbox state.
    pub async fn remove_session(&self, session_id: &str) {
        self.checkpoints().remove(session_id).await;
        // std's `remove_dir_all` (which tokio's runs) walks the tree from directory handles
        // without following links (since Rust 1.58.1, CVE-2022-21658), so links a sandbox left,
        // or swaps in while it runs, cannot make it delete anything outside these directories.
        let _ = tokio::fs::remove_dir_all(self.workspace_dir(session_id)).await;
        let _ = tokio::fs::remove_dir_all(self.state_dir(session_id)).await;
        let _ = tokio::fs::remove_dir_all(self.mounts_dir(session_id)).await;
        let _ = tokio::fs::remove_dir_all(self.outputs_dir(session_id)).await;
        let registered = self
            .outputs_dir(session_id)
            .with_extension("registered.json");
        let _ = tokio::fs::remove_file(registered).await;
    }
}

impl SessionTools {
    /// Hands entry `name` of the sandbox's state directory (the proxy's socket, which the
    /// sandbox must be allowed to connect to) to the sandbox's user. The sandbox can replace
    /// the entry meanwhile, so it is given through the directory's handle and never followed.
    fn adopt_state_entry(&self, name: &str) {
        let Some(uid) = self.user else {
            return;
        };
        let given = open_session_dir(&self.state_dir)
            .and_then(|dir| identity::give_at(dir.as_fd(), OsStr::new(name), uid));
        if let Err(e) = given {
            tracing::warn!(name, error = %e, "could not hand the proxy socket to the sandbox user");
        }
    }

    /// The network one command gets, with the egress proxy it needs (kept alive by the caller
    /// for the command's duration) and that proxy's socket name.
    pub async fn network_for_command(
        &self,
    ) -> Result<(Network, Option<(proxy::EgressProxy, String)>), String> {
        let unsandboxed = matches!(self.isolation, Isolation::Unsandboxed);
        match &self.egress {
            EgressPolicy::Open if unsandboxed => Ok((Network::Shared, None)),
            p if p.is_closed() => Ok((Network::None, None)),
            // Unrestricted environments go through the proxy too: it keeps private and
            // loopback addresses (this server, its database, cloud metadata) out of reach.
            p => {
                let (guard, name) =
                    proxy::EgressProxy::start(&self.state_dir, p.clone(), self.netguard)
                        .map_err(|e| format!("the egress proxy could not start: {e}"))?;
                self.adopt_state_entry(&name);
                let socket = self.state_dir.join(&name);
                Ok((Network::Proxied { socket }, Some((guard, name))))
            }
        }
    }

    fn config(&self, name: &str) -> Option<&BuiltinToolConfig> {
        self.configs.iter().find(|c| c.name == name)
    }

    /// Runs a built-in tool call (already authorised, as `approval` says).
    pub async fn run(&self, name: &str, input: &Value, approval: Approval) -> ToolOutput {
        if let Isolation::Unavailable(reason) = &self.isolation
            && name != "web_fetch"
            && name != "web_search"
        {
            return ToolOutput::error(format!(
                "The `{name}` tool is unavailable on this server: {reason}. Tell the user; do not retry."
            ));
        }
        if let Some(refused) = quota::refusal(self, name).await {
            return refused;
        }
        let hide = approval == Approval::Auto;
        // Held until the call ends (see `calls`); a call `auto` approved runs alone, so the
        // protected entries it finds stay where they were found.
        let (mut _alone, mut _shared) = (None, None);
        if WORKSPACE_TOOLS.contains(&name) {
            if hide {
                _alone = Some(self.calls.write().await);
            } else {
                _shared = Some(self.calls.read().await);
            }
        }
        match name {
            "bash" => bash::run(self, input, approval).await,
            "read" => files::read(&self.workspace, &self.mounts, input, hide).await,
            "write" => files::write(&self.workspace, &self.mounts, input, self.user, hide).await,
            "edit" => files::edit(&self.workspace, &self.mounts, input, hide).await,
            "glob" => search::glob(&self.workspace, input, hide).await,
            "grep" => search::grep(&self.workspace, input, hide).await,
            "web_fetch" => {
                web::fetch(input, self.config("web_fetch"), &self.egress, self.netguard).await
            }
            "web_search" => {
                web::search(
                    input,
                    self.config("web_search"),
                    &self.egress,
                    self.search_url.as_deref(),
                )
                .await
            }
            other => ToolOutput::error(format!("There is no built-in tool named `{other}`.")),
        }
    }
}

/// Opens a session's workspace or state directory (named by the server, in directories only
/// the server writes) for changes made through its handle.
fn open_session_dir(dir: &Path) -> std::io::Result<OwnedFd> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
    Ok(rustix::fs::open(dir, flags, Mode::empty())?)
}

/// Closes the data directory and the parents of workspaces to other host users — passable
/// but not listable when sandboxes have users of their own, who must reach their workspaces
/// — or says which directory keeps those users out.
fn prepare_shared_dirs(data_dir: &Path, session_users: bool) -> Result<(), String> {
    let mode = if session_users { 0o711 } else { 0o700 };
    for dir in [
        data_dir.to_path_buf(),
        data_dir.join("workspaces"),
        data_dir.join("sandbox-state"),
        data_dir.join("sandbox-mounts"),
        data_dir.join("skill-bundles"),
        data_dir.join("session-outputs"),
    ] {
        std::fs::create_dir_all(&dir)
            .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(mode))
            .map_err(|e| format!("cannot set the mode of {}: {e}", dir.display()))?;
    }
    if !session_users {
        return Ok(());
    }
    for ancestor in data_dir.ancestors().skip(1) {
        let mode = std::fs::metadata(ancestor)
            .map(|m| m.permissions().mode())
            .unwrap_or(0);
        if mode & 0o001 == 0 {
            return Err(format!(
                "sandboxes run as users of their own and cannot pass through {} (mode {:o}) to reach their \
                 workspaces; make it passable (`chmod o+x`) or put the data directory elsewhere (--data-dir)",
                ancestor.display(),
                mode & 0o777
            ));
        }
    }
    Ok(())
}

/// Closes what an install from before kept readable by other host users: the checkpoints'
/// directory (0700; each copy keeps the workspace's modes, so this is what guards them) and
/// the outputs' manifests (0600).
fn close_private_files(data_dir: &Path) -> std::io::Result<()> {
    mast_domain::private_fs::dir(&data_dir.join("workspace-checkpoints"))?;
    let objects = checkpoints::Checkpoints::objects_dir(data_dir);
    if objects.exists() {
        mast_domain::private_fs::dir(&objects)?;
    }
    let Ok(outputs) = std::fs::read_dir(data_dir.join("session-outputs")) else {
        return Ok(());
    };
    for entry in outputs.flatten() {
        let is_manifest = entry
            .file_name()
            .to_str()
            .is_some_and(|n| n.ends_with(".registered.json"));
        if is_manifest && entry.file_type().is_ok_and(|t| t.is_file()) {
            std::fs::set_permissions(
                entry.path(),
                std::fs::Permissions::from_mode(mast_domain::private_fs::FILE_MODE),
            )?;
        }
    }
    Ok(())
}

/// Model-facing definitions of the built-in tools enabled in `toolset`.
pub fn definitions(tools: &[Tool]) -> Vec<ToolDef> {
    let Some(toolset) = tools
        .iter()
        .find(|t| matches!(t, Tool::AgentToolset { .. }))
    else {
        return vec![];
    };
    let def = |name: &str, description: &str, schema: Value| ToolDef {
        name: name.into(),
        description: description.into(),
        input_schema: schema,
    };
    let all = [
        def(
            "bash",
            "Run a bash command in the session's sandbox. The working directory starts at /workspace; `cd` and exported variables persist between calls (restart: true resets them). Processes do not outlive the call. Output is limited to 30000 bytes per stream. Files written under /mnt/session/outputs are saved as the session's output files for the user.",
            json!({"type": "object", "properties": {"command": {"type": "string"}, "restart": {"type": "boolean"}, "timeout_ms": {"type": "integer", "description": "default 120000, at most 600000"}}}),
        ),
        def(
            "read",
            "Read a text file under /workspace with line numbers (first 2000 lines unless view_range is given); images are returned as images.",
            json!({"type": "object", "properties": {"file_path": {"type": "string"}, "view_range": {"type": "array", "items": {"type": "integer"}, "description": "[start_line, end_line], 1-based inclusive; end_line <= 0 reads to the end"}}, "required": ["file_path"]}),
        ),
        def(
            "write",
            "Create or overwrite a file under /workspace.",
            json!({"type": "object", "properties": {"file_path": {"type": "string"}, "content": {"type": "string"}}, "required": ["file_path", "content"]}),
        ),
        def(
            "edit",
            "Replace old_string with new_string in a file under /workspace; old_string must occur exactly once unless replace_all is true.",
            json!({"type": "object", "properties": {"file_path": {"type": "string"}, "old_string": {"type": "string"}, "new_string": {"type": "string"}, "replace_all": {"type": "boolean"}}, "required": ["file_path", "old_string", "new_string"]}),
        ),
        def(
            "glob",
            "List files under /workspace (or path) matching a glob pattern such as **/*.py, newest first.",
            json!({"type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}}, "required": ["pattern"]}),
        ),
        def(
            "grep",
            "Search file contents under /workspace (or path) with a regular expression; prints path:line:text.",
            json!({"type": "object", "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}}, "required": ["pattern"]}),
        ),
        def(
            "web_fetch",
            "Fetch a web page or text document over HTTP(S) and return it as readable text.",
            json!({"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}),
        ),
        def(
            "web_search",
            "Search the web; returns result titles, URLs and snippets.",
            json!({"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}),
        ),
    ];
    all.into_iter()
        .filter(|d| {
            toolset
                .builtin_config(&d.name)
                .is_some_and(|(enabled, _)| enabled)
        })
        .collect()
}
