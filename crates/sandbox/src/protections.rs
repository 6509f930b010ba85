//! Which protections of the built-in tools are in force on this host — the sandbox, its
//! users, memory, process and disk limits, seccomp and the network guard — and, for the ones
//! that are not, what runs instead. Logged at start-up; `mast doctor` can print the same.

use std::fmt;

use super::cgroup::Cgroups;
use super::quota::mb;
use super::sandbox::{self, Isolation, Limits};

/// One protection and whether it is in force.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protection {
    /// False when it is missing or only a weaker fallback runs.
    pub active: bool,
    /// What runs, or why it does not and what runs instead.
    pub detail: String,
}

/// The protections of built-in tools on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Protections {
    /// bubblewrap, its version and what it isolates.
    pub sandbox: Protection,
    /// A host user of its own per session.
    pub session_users: Protection,
    /// The memory limit per session.
    pub memory: Protection,
    /// The process limit per session.
    pub processes: Protection,
    /// The workspace quota.
    pub disk: Protection,
    /// The seccomp filter.
    pub seccomp: Protection,
    /// What tools can reach on the network.
    pub network: Protection,
}

/// What [`Protections::assess`] looks at.
pub struct Setup<'a> {
    /// How tools are isolated.
    pub isolation: &'a Isolation,
    /// Why sandboxes cannot reach their workspaces, if they cannot.
    pub unreachable: Option<&'a str>,
    /// Whether each session's sandbox runs as a host user of its own.
    pub session_users: bool,
    /// The configured limits.
    pub limits: &'a Limits,
    /// The cgroups this process can use.
    pub cgroups: &'a Cgroups,
    /// Why seccomp is off, if it is.
    pub seccomp: Result<(), String>,
    /// `MAST_ALLOW_PRIVATE_NETWORK=1`.
    pub allow_private_network: bool,
}

fn on(detail: String) -> Protection {
    Protection {
        active: true,
        detail,
    }
}

fn off(detail: String) -> Protection {
    Protection {
        active: false,
        detail,
    }
}

impl Protections {
    /// Describes the protections `setup` gives.
    pub fn assess(setup: &Setup<'_>) -> Protections {
        let l = setup.limits;
        let bwrap = matches!(setup.isolation, Isolation::Bubblewrap);
        let sandbox = match (setup.isolation, setup.unreachable) {
            (_, Some(why)) => off(format!("built-in tools cannot run: {why}")),
            (Isolation::Bubblewrap, None) => on(format!(
                "{}: read-only root and system directories, private /tmp, /var/tmp and /dev/shm of {} each, \
                 new user/PID/IPC/UTS/network/cgroup namespaces, {}",
                sandbox::bwrap_version().unwrap_or("bubblewrap"),
                mb(l.tmpfs_bytes),
                if sandbox::userns_disabled() {
                    "no nested user namespaces"
                } else {
                    "nested user namespaces NOT forbidden (needs bubblewrap 0.8 or later)"
                }
            )),
            (Isolation::Unsandboxed, None) => off(
                "NONE: MAST_UNSAFE_UNSANDBOXED_TOOLS=1 and no working sandbox, so built-in tools run directly on this host"
                    .into(),
            ),
            (Isolation::Unavailable(why), None) => {
                off(format!(
                "unavailable ({why}): built-in tool calls fail with an error result \
                 (MAST_UNSAFE_UNSANDBOXED_TOOLS=1 runs them unsandboxed)"
            ))
            }
        };
        let session_users = if setup.session_users {
            on("each session's sandbox runs as a host user of its own".into())
        } else {
            off("sandboxes run as the server's own user (the server is not root)".into())
        };
        let why = |controller: &str| {
            setup
                .cgroups
                .problem(controller)
                .map(|p| format!(" ({p})"))
                .unwrap_or_default()
        };
        let memory = match setup.cgroups.memory() {
            Some(v) => on(format!(
                "{} per session, shared by its running commands ({v})",
                mb(l.memory_bytes)
            )),
            None => off(format!(
                "no memory cgroup{}: each process is limited to {} of address space (ulimit -v) instead",
                why("memory"),
                mb(l.memory_bytes)
            )),
        };
        let processes = match setup.cgroups.pids() {
            Some(v) => on(format!(
                "{} processes and threads per session, shared by its running commands ({v})",
                l.max_processes
            )),
            None if setup.session_users => off(format!(
                "no pids cgroup{}: {} processes per session user (ulimit -u) instead",
                why("pids"),
                l.max_processes
            )),
            None => off(format!(
                "no pids cgroup{} and no user per session: no process limit; give the container a pids limit",
                why("pids")
            )),
        };
        let disk = if l.workspace_bytes == 0 && l.workspace_files == 0 {
            off(
                "no workspace quota (MAST_WORKSPACE_QUOTA_MB=0 and MAST_WORKSPACE_MAX_FILES=0)"
                    .into(),
            )
        } else {
            on(format!(
                "workspace quota {} and {} files by usage accounting: writes are refused over it, a command's files \
                 stop at the room left, and a running command is killed once over it",
                if l.workspace_bytes == 0 {
                    "unlimited".into()
                } else {
                    mb(l.workspace_bytes)
                },
                if l.workspace_files == 0 {
                    "unlimited".into()
                } else {
                    l.workspace_files.to_string()
                }
            ))
        };
        let seccomp = match (&setup.seccomp, bwrap) {
            (Ok(()), true) => on(format!(
                "{} filter: ptrace, keyring, BPF, perf, userfaultfd, io_uring, module, mount and namespace calls fail",
                super::seccomp::arch().unwrap_or("this architecture's")
            )),
            (_, false) => off("no sandbox, no filter".into()),
            (Err(why), true) => off(format!("off: {why}")),
        };
        let guard = if setup.allow_private_network {
            "private, loopback and link-local addresses ALLOWED (MAST_ALLOW_PRIVATE_NETWORK=1)"
        } else {
            "private, loopback, link-local and metadata addresses refused"
        };
        let network = if bwrap {
            on(format!(
                "no host network; only the environment's hosts through the server's egress proxy; {guard}"
            ))
        } else {
            off(format!(
                "unsandboxed: `unrestricted` environments use the host's network directly; {guard} for the others"
            ))
        };
        Protections {
            sandbox,
            session_users,
            memory,
            processes,
            disk,
            seccomp,
            network,
        }
    }

    /// Each protection with its name, in report order.
    pub fn list(&self) -> [(&'static str, &Protection); 7] {
        [
            ("sandbox", &self.sandbox),
            ("users", &self.session_users),
            ("memory", &self.memory),
            ("processes", &self.processes),
            ("disk", &self.disk),
            ("seccomp", &self.seccomp),
            ("network", &self.network),
        ]
    }

    /// Logs one line per protection: info when in force, a warning when not.
    pub fn log(&self) {
        for (name, p) in self.list() {
            if p.active {
                tracing::info!("sandbox {name}: {}", p.detail);
            } else if name == "sandbox" {
                tracing::error!("sandbox {name}: {}", p.detail);
            } else {
                tracing::warn!("sandbox {name}: {}", p.detail);
            }
        }
    }
}

impl fmt::Display for Protections {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (name, p) in self.list() {
            writeln!(
                f,
                "{name:<10} {} {}",
                if p.active { "on " } else { "OFF" },
                p.detail
            )?;
        }
        Ok(())
    }
}
