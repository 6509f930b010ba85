//! Checks of the host: the sandbox (bubblewrap, a user per session, cgroups, seccomp) and the
//! data directory.

use std::path::Path;

use super::{Finding, Setup};
use crate::tools::sandbox::{self, Isolation};

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

pub(super) async fn sandbox_check(setup: &Setup) -> Vec<Finding> {
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

pub(super) async fn user_check() -> Vec<Finding> {
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

pub(super) async fn cgroup_check() -> Vec<Finding> {
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
pub(super) async fn seccomp_check() -> Vec<Finding> {
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

pub(super) async fn data_dir_check(setup: &Setup) -> Vec<Finding> {
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
