//! The sandbox built-in tools run in: bubblewrap with a read-only root and read-only system
//! directories (and only the harmless part of `/etc`), the session's workspace writable at
//! `/workspace`, small private tmpfs mounts (`/tmp`, `/var/tmp`, `/dev/shm`), new
//! PID/IPC/UTS/user/network/cgroup namespaces (and no nested ones), a seccomp filter, no
//! server environment, the session's own host user when the server runs as root, and the
//! network the environment allows — only ever through the egress proxy.
//!
//! The command text never appears in any process's arguments or environment: it reaches the
//! sandbox's shell through its stdin (see [`SandboxCommand::spawn`]). Nor do bubblewrap's own
//! options, which name host paths: bubblewrap reads them from a pipe (`--args`), so the
//! sandbox's first process, which every command can see as pid 1, shows nothing of the host.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;

use tokio::io::AsyncWriteExt;
use tokio::process::{Child, Command};

use super::cgroup::CommandCgroup;

/// How built-in tools are isolated on this host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Isolation {
    /// bubblewrap works here.
    Bubblewrap,
    /// The operator set `MAST_UNSAFE_UNSANDBOXED_TOOLS=1`: commands run directly on the host.
    Unsandboxed,
    /// No sandbox and no override: built-in tool calls fail with this reason.
    Unavailable(String),
}

/// Network access of one command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Network {
    /// The host's network (unsandboxed mode only: a sandbox never shares it).
    Shared,
    /// No network at all.
    None,
    /// Only through the egress proxy listening on this Unix socket (inside: 127.0.0.1:3128).
    Proxied { socket: PathBuf },
}

/// Resource limits of a session's commands.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// CPU time of each process (set per call from its timeout).
    pub cpu_seconds: u64,
    /// Memory of all of a session's running commands together (`MAST_SANDBOX_MEMORY_MB`);
    /// each process's address space where no memory cgroup can be made.
    pub memory_bytes: u64,
    /// Processes and threads of all of a session's running commands together
    /// (`MAST_SANDBOX_MAX_PROCESSES`).
    pub max_processes: u64,
    /// Largest file a command may write.
    pub file_bytes: u64,
    /// Size of each private tmpfs (`/tmp`, `/var/tmp`, `/dev/shm`); they live in memory.
    pub tmpfs_bytes: u64,
    /// Bytes a workspace may hold (`MAST_WORKSPACE_QUOTA_MB`); 0 for no quota.
    pub workspace_bytes: u64,
    /// Files and directories a workspace may hold (`MAST_WORKSPACE_MAX_FILES`); 0 for no cap.
    pub workspace_files: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cpu_seconds: 300,
            memory_bytes: 4 << 30,
            max_processes: 512,
            file_bytes: 4 << 30,
            tmpfs_bytes: 512 << 20,
            workspace_bytes: 4 << 30,
            workspace_files: 200_000,
        }
    }
}

/// The port the in-sandbox proxy forwarder listens on.
pub const PROXY_PORT: u16 = 3128;
/// Where the workspace appears inside the sandbox.
pub const WORKSPACE: &str = "/workspace";
/// Where the session's private state (shell state, proxy socket) appears inside.
pub const STATE: &str = "/run/mast";

/// Whether this bubblewrap can forbid nested user namespaces (`--disable-userns`, 0.8+).
static DISABLE_USERNS: OnceLock<bool> = OnceLock::new();
/// Whether bubblewrap loads the seccomp filter here (see [`enable_seccomp`]).
static SECCOMP: OnceLock<bool> = OnceLock::new();
/// `bwrap --version`, for the start-up report.
static VERSION: OnceLock<String> = OnceLock::new();
/// The seccomp filter's file in the server-only directory holding the account files.
pub const SECCOMP_FILE: &str = "seccomp.bpf";
/// Size of the sandbox's root tmpfs: it only holds mount points and is read-only once they
/// are in place.
const ROOT_BYTES: u64 = 1 << 20;

async fn probe(extra: &[&str]) -> std::io::Result<std::process::Output> {
    Command::new("bwrap")
        .args([
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--unshare-net",
        ])
        .args(extra)
        .args(["--ro-bind", "/", "/", "--proc", "/proc", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .await
}

/// Finds out whether bubblewrap can create its namespaces here.
pub async fn detect(unsafe_unsandboxed: bool) -> Isolation {
    if let Ok(out) = Command::new("bwrap").arg("--version").output().await {
        let _ = VERSION.set(String::from_utf8_lossy(&out.stdout).trim().to_string());
    }
    if let Ok(out) = probe(&["--disable-userns"]).await
        && out.status.success()
    {
        let _ = DISABLE_USERNS.set(true);
        return Isolation::Bubblewrap;
    }
    let reason = match probe(&[]).await {
        Ok(out) if out.status.success() => {
            tracing::warn!(
                "this bubblewrap cannot forbid nested user namespaces (--disable-userns needs 0.8 or later)"
            );
            let _ = DISABLE_USERNS.set(false);
            return Isolation::Bubblewrap;
        }
        Ok(out) => format!(
            "bubblewrap cannot create namespaces here: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ),
        Err(e) => {
            format!("bubblewrap (`bwrap`) is not installed ({e}); install the `bubblewrap` package")
        }
    };
    if unsafe_unsandboxed {
        Isolation::Unsandboxed
    } else {
        Isolation::Unavailable(reason)
    }
}

/// `bwrap --version` (e.g. `bubblewrap 0.8.0`), once [`detect`] ran.
pub fn bwrap_version() -> Option<&'static str> {
    VERSION.get().map(String::as_str)
}

/// Whether nested user namespaces are forbidden (bubblewrap 0.8 or later).
pub fn userns_disabled() -> bool {
    DISABLE_USERNS.get().copied().unwrap_or(false)
}

/// Whether sandboxed commands run under the seccomp filter.
pub fn seccomp_enabled() -> bool {
    SECCOMP.get().copied().unwrap_or(false)
}

/// Writes the seccomp filter into `dir` (server-only, beside the account files) and checks
/// that bubblewrap loads it; on success every sandboxed command runs under it.
pub async fn enable_seccomp(dir: &Path) -> Result<(), String> {
    let file = dir.join(SECCOMP_FILE);
    match super::seccomp::write(&file) {
        Ok(true) => {}
        Ok(false) => {
            return Err(format!(
                "no seccomp filter for this architecture ({})",
                std::env::consts::ARCH
            ));
        }
        Err(e) => return Err(format!("cannot write {}: {e}", file.display())),
    }
    let out = Command::new("sh")
        .arg("-c")
        .arg(r#"exec 3<"$0" && exec "$@""#)
        .arg(&file)
        .args([
            "bwrap",
            "--unshare-user",
            "--unshare-pid",
            "--unshare-net",
            "--ro-bind",
            "/",
            "/",
            "--seccomp",
            "3",
            "true",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .await
        .map_err(|e| format!("cannot run bwrap: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "bubblewrap cannot load it: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let _ = SECCOMP.set(true);
    Ok(())
}

/// System directories mounted read-only inside the sandbox (also where `auto` reads freely).
pub const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];
/// The parts of `/etc` programs need (name lookup, TLS roots, linker, locale, interpreter
/// configuration). Everything else there — keys, service configs, environment files — stays
/// out of reach. (`auto` reads these without asking too.)
pub const ETC_ALLOWED: &[&str] = &[
    "alternatives",
    "bash.bashrc",
    "ca-certificates",
    "ca-certificates.conf",
    "debian_version",
    "gai.conf",
    "gitconfig",
    "host.conf",
    "hosts",
    "inputrc",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "localtime",
    "magic",
    "magic.mime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "perl",
    "profile",
    "protocols",
    "resolv.conf",
    "services",
    "ssl/certs",
    "ssl/openssl.cnf",
    "timezone",
    "xdg",
];
/// `/etc` entries allowed by prefix (versioned interpreter directories such as `python3.11`).
pub const ETC_ALLOWED_PREFIXES: &[&str] = &["python3", "java-"];

/// The sandbox's own account files: the host's would name its users.
const PASSWD: &str = "root:x:0:0:root:/root:/bin/bash\nsandbox:x:1000:1000:sandbox:/workspace:/bin/bash\nnobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n";
const GROUP: &str = "root:x:0:\nsandbox:x:1000:\nnogroup:x:65534:\n";

/// Writes the sandbox's account files into `dir` (a directory only the server writes:
/// never one a sandbox controls, whose entries could be swapped for symlinks).
pub fn write_account_files(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    // Written beside and renamed into place: replicas sharing a data directory rewrite these
    // at start-up while sandboxes of the others may be reading them.
    for (name, text) in [("passwd", PASSWD), ("group", GROUP)] {
        let tmp = dir.join(format!(".{name}.{}", mast_domain::ids::new_secret(8)));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, dir.join(name))?;
    }
    super::masks::write_mask_entries(dir)
}

/// The `/etc` paths bound into the sandbox on this host.
fn etc_entries() -> Vec<String> {
    let mut out: Vec<String> = ETC_ALLOWED.iter().map(|e| format!("/etc/{e}")).collect();
    if let Ok(dir) = std::fs::read_dir("/etc") {
        for entry in dir.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if ETC_ALLOWED_PREFIXES.iter().any(|p| name.starts_with(p)) {
                out.push(format!("/etc/{name}"));
            }
        }
    }
    out
}

/// A command to run in a session's sandbox.
pub struct SandboxCommand<'a> {
    /// Bubblewrap, or directly on the host.
    pub isolation: &'a Isolation,
    /// The session's workspace on the host (`/workspace` inside).
    pub workspace: &'a Path,
    /// The session's private state directory on the host (`/run/mast` inside).
    pub state: &'a Path,
    /// What the command may reach.
    pub network: &'a Network,
    /// Limits of this command (`file_bytes` already cut to the workspace's room left).
    pub limits: Limits,
    /// The script `bash` runs: fixed text, never the user's command (which it reads from
    /// stdin), since arguments are visible to every user of the host.
    pub script: String,
    /// Extra environment variables (the environment is otherwise cleared).
    pub env: Vec<(String, String)>,
    /// The `mast` binary, mounted read-only for the in-sandbox proxy forwarder.
    pub helper: &'a Path,
    /// The host uid (and gid) bubblewrap runs as; None keeps the server's.
    pub user: Option<u32>,
    /// The server-only directory holding the sandbox's `passwd`, `group` and seccomp filter.
    pub accounts: &'a Path,
    /// Host paths bound at other sandbox paths (session resources).
    pub mounts: &'a super::mounts::MountTable,
    /// The environment's package layer, mounted at [`PACKAGES`] (see `tools::packages`).
    pub packages: Option<PackageMount<'a>>,
    /// Protected entries masked from a command the `auto` policy approved (see `masks`).
    pub hidden: &'a super::masks::Masks,
}

/// Where an environment's package layer appears inside the sandbox: the same path while it is
/// installed and when sessions use it, since installed programs record absolute paths.
pub const PACKAGES: &str = "/opt/mast/packages";

/// An environment's package layer as a sandbox mounts it.
#[derive(Debug, Clone, Copy)]
pub struct PackageMount<'a> {
    /// The layer's directory on the host.
    pub dir: &'a Path,
    /// An install writing the layer: mounted writable, with the host's apt configuration,
    /// index and package database readable (apt resolves dependencies against them).
    /// Sessions get the layer read-only.
    pub install: bool,
}

/// A program, its arguments, and its environment.
type CommandParts = (String, Vec<std::ffi::OsString>, Vec<(String, String)>);

/// Where the helper binary appears inside the sandbox.
pub const HELPER: &str = "/run/mast-helper";

/// The shell lines that set a command's per-process limits, before anything else runs.
/// `memory_cgroup` / `pids_cgroup`: whether a cgroup already limits the session's memory and
/// processes, which then need no per-process stand-in.
fn limit_prefix(limits: &Limits, own_user: bool, memory_cgroup: bool, pids_cgroup: bool) -> String {
    // The CPU soft limit sends SIGXCPU, so a process stopped by it says why (exit status 152);
    // the hard limit a second later ends one that ignores the signal.
    let mut s = format!(
        "ulimit -St {} 2>/dev/null; ulimit -Ht {} 2>/dev/null; ",
        limits.cpu_seconds,
        limits.cpu_seconds + 1
    );
    if !memory_cgroup {
        // Address space, not memory: it breaks programs that reserve much more than they use
        // (Go, the JVM), so it is only the fallback where no memory cgroup can be made.
        s.push_str(&format!(
            "ulimit -v {} 2>/dev/null; ",
            limits.memory_bytes / 1024
        ));
    }
    // Kilobytes. A write past it fails with "File too large" rather than killing the writer.
    s.push_str(&format!(
        "ulimit -f {} 2>/dev/null; trap '' XFSZ; ",
        limits.file_bytes / 1024
    ));
    if own_user && !pids_cgroup {
        // Counted per user, so it only means something for a sandbox's own user.
        s.push_str(&format!("ulimit -u {} 2>/dev/null; ", limits.max_processes));
    }
    s
}

/// The shell that starts every command: it waits for the server's go-ahead line (sent once
/// the process is in its cgroup, so nothing escapes the count), drops the working directory
/// the server gave it from its environment, and becomes the program. What follows the first
/// line on stdin is the command text.
const WRAPPER: &str = r#"read -r _ || exit 125; unset PWD; exec "$@""#;
/// The same for bubblewrap (run by bash): `$0` is the seccomp filter (opened as fd 3) or a
/// placeholder, `$1` the sandbox's script, the rest bubblewrap's options, which reach it
/// NUL-separated through a pipe on fd 4 so that its arguments (and those of the sandbox's
/// pid 1, a copy of it) are only `--args 4 bash -c SCRIPT`. The separate `exec` leaves no
/// descriptor of the process substitution behind for the sandbox to inherit.
const WRAPPER_BWRAP: &str = r#"read -r _ || exit 125; unset PWD; __script=$1; shift; exec 4< <(printf '%s\0' "$@") || exit 125; exec bwrap --args 4 bash -c "$__script""#;
const WRAPPER_BWRAP_SECCOMP: &str = r#"read -r _ || exit 125; unset PWD; exec 3<"$0" || exit 125; __script=$1; shift; exec 4< <(printf '%s\0' "$@") || exit 125; exec bwrap --args 4 bash -c "$__script""#;

impl SandboxCommand<'_> {
    /// The program, its arguments and its environment: bubblewrap's options and the script
    /// it runs with `bash -c` (the last argument), or bash alone when unsandboxed.
    fn parts(&self, cgroup: Option<&CommandCgroup>, seccomp: bool) -> Result<CommandParts, String> {
        let script = format!(
            "{}{}",
            limit_prefix(
                &self.limits,
                self.user.is_some(),
                cgroup.is_some_and(CommandCgroup::limits_memory),
                cgroup.is_some_and(CommandCgroup::limits_processes),
            ),
            self.script
        );
        let mut env: Vec<(String, String)> = vec![
            (
                "PATH".into(),
                "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin".into(),
            ),
            ("LANG".into(), "C.UTF-8".into()),
            ("TERM".into(), "dumb".into()),
        ];
        match self.isolation {
            Isolation::Unavailable(reason) => Err(format!(
                "built-in tools are unavailable on this server: {reason}"
            )),
            Isolation::Unsandboxed => {
                env.push(("HOME".into(), self.workspace.display().to_string()));
                env.push(("MAST_STATE".into(), self.state.display().to_string()));
                env.push(("MAST_HELPER".into(), self.helper.display().to_string()));
                env.extend(self.env.iter().cloned());
                Ok(("bash".into(), vec!["-c".into(), script.into()], env))
            }
            Isolation::Bubblewrap => {
                let mut a: Vec<std::ffi::OsString> = Vec::new();
                fn push(a: &mut Vec<std::ffi::OsString>, items: &[&str]) {
                    a.extend(items.iter().map(std::ffi::OsString::from));
                }
                push(
                    &mut a,
                    &[
                        "--die-with-parent",
                        "--new-session",
                        "--unshare-user",
                        "--uid",
                        "1000",
                        "--gid",
                        "1000",
                    ],
                );
                push(
                    &mut a,
                    &[
                        "--unshare-pid",
                        "--unshare-ipc",
                        "--unshare-uts",
                        "--unshare-cgroup-try",
                        "--hostname",
                        "sandbox",
                    ],
                );
                // A sandbox never shares the host's network: the proxy is its only way out.
                push(&mut a, &["--unshare-net"]);
                if userns_disabled() {
                    push(&mut a, &["--disable-userns"]);
                }
                // bubblewrap's own root tmpfs has no size: a sized one replaces it, and holds
                // only mount points before it is made read-only below.
                push(&mut a, &["--size", &ROOT_BYTES.to_string(), "--tmpfs", "/"]);
                for dir in SYSTEM_DIRS {
                    push(&mut a, &["--ro-bind-try", dir, dir]);
                }
                for entry in etc_entries() {
                    a.extend(["--ro-bind-try".into(), entry.clone().into(), entry.into()]);
                }
                a.extend([
                    "--ro-bind".into(),
                    self.accounts.join("passwd").into(),
                    "/etc/passwd".into(),
                ]);
                a.extend([
                    "--ro-bind".into(),
                    self.accounts.join("group").into(),
                    "/etc/group".into(),
                ]);
                let tmpfs = self.limits.tmpfs_bytes.to_string();
                push(&mut a, &["--proc", "/proc", "--dev", "/dev"]);
                // `--size` does not apply to `--dev`: /dev/shm gets a sized tmpfs of its own
                // and the rest of /dev is made read-only below.
                for dir in ["/dev/shm", "/tmp", "/var/tmp"] {
                    push(&mut a, &["--size", &tmpfs, "--tmpfs", dir]);
                }
                a.extend(["--bind".into(), self.workspace.into(), WORKSPACE.into()]);
                a.extend(["--bind".into(), self.state.into(), STATE.into()]);
                if matches!(self.network, Network::Proxied { .. }) {
                    a.extend(["--ro-bind".into(), self.helper.into(), HELPER.into()]);
                }
                a.extend(self.mounts.bwrap_args());
                // After the trees they lie in, and before the root is made read-only (a
                // protected entry gone since the walk gets a mount point made for it).
                a.extend(self.hidden.bwrap_args(self.accounts));
                if let Some(p) = &self.packages {
                    let how = if p.install { "--bind" } else { "--ro-bind" };
                    a.extend([how.into(), p.dir.into(), PACKAGES.into()]);
                    if p.install {
                        for dir in ["/etc/apt", "/var/lib/apt/lists", "/var/lib/dpkg"] {
                            push(&mut a, &["--ro-bind-try", dir, dir]);
                        }
                    }
                }
                // Not recursive: the writable mounts inside stay writable.
                push(&mut a, &["--remount-ro", "/dev", "--remount-ro", "/"]);
                if seccomp {
                    push(&mut a, &["--seccomp", "3"]);
                }
                push(&mut a, &["--chdir", WORKSPACE, "--clearenv"]);
                env.push(("HOME".into(), WORKSPACE.into()));
                env.push(("MAST_STATE".into(), STATE.into()));
                env.push(("MAST_HELPER".into(), HELPER.into()));
                for (k, v) in env.iter().chain(self.env.iter()) {
                    a.extend(["--setenv".into(), k.into(), v.into()]);
                }
                a.push(script.into());
                // bubblewrap itself only needs a PATH; the sandbox's environment is set above.
                Ok((
                    "bwrap".into(),
                    a,
                    vec![("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into())],
                ))
            }
        }
    }

    /// Starts the command with `input` (the user's command text) on the script's stdin, inside
    /// `cgroup` when there is one. Its stdout and stderr are piped; it is killed when the
    /// returned child is dropped, and with its whole process group by [`kill_group`].
    pub fn spawn(&self, cgroup: Option<&CommandCgroup>, input: String) -> Result<Child, String> {
        let sandboxed = matches!(self.isolation, Isolation::Bubblewrap);
        let seccomp = sandboxed && seccomp_enabled();
        let (program, mut args, env) = self.parts(cgroup, seccomp)?;
        let mut cmd;
        if sandboxed {
            // Process substitution is bash's.
            cmd = Command::new("bash");
            cmd.arg("-c");
            if seccomp {
                cmd.arg(WRAPPER_BWRAP_SECCOMP)
                    .arg(self.accounts.join(SECCOMP_FILE));
            } else {
                cmd.arg(WRAPPER_BWRAP).arg("mast-sandbox");
            }
            let script = args.pop().unwrap_or_default();
            cmd.arg(script).args(&args);
        } else {
            cmd = Command::new("sh");
            cmd.arg("-c").arg(WRAPPER).arg("mast-sandbox");
            cmd.arg(&program).args(&args);
        }
        // The sandbox's first process keeps the environment and working directory it was
        // started with (visible in its /proc entries): neither may name a host path.
        cmd.env_clear().envs(env).current_dir(if sandboxed {
            Path::new("/")
        } else {
            self.workspace
        });
        if let (Some(uid), true) = (self.user, sandboxed) {
            // std drops supplementary groups too when root switches users.
            cmd.uid(uid).gid(uid);
        }
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            // Its own group, so a fallback kill reaches what an unsandboxed command started.
            .process_group(0);
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("The command could not be started: {e}"))?;
        let pid = child.id().unwrap_or(0);
        if let Some(cg) = cgroup
            && let Err(e) = cg.join(pid)
        {
            let _ = child.start_kill();
            return Err(format!(
                "The command could not be placed in its cgroup ({e}); it did not run."
            ));
        }
        let mut stdin = child.stdin.take().expect("piped");
        tokio::spawn(async move {
            // A command that exits without reading its text closes the pipe: nothing to do.
            if stdin.write_all(b"go\n").await.is_ok() {
                let _ = stdin.write_all(input.as_bytes()).await;
            }
        });
        Ok(child)
    }
}

/// Kills the process group of a command started by [`SandboxCommand::spawn`] (the fallback
/// where no cgroup holds its processes; a sandbox's own processes die with bubblewrap).
pub fn kill_group(pid: u32) {
    if let Some(pid) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Where no cgroup holds a command, per-process limits stand in for the session's, and the
    /// command text still arrives on stdin only.
    #[tokio::test]
    async fn without_a_cgroup_commands_get_per_process_limits() {
        let dir = tempfile::tempdir().unwrap();
        let limits = Limits {
            memory_bytes: 512 << 20,
            file_bytes: 3 << 20,
            cpu_seconds: 7,
            ..Limits::default()
        };
        let command = SandboxCommand {
            isolation: &Isolation::Unsandboxed,
            workspace: dir.path(),
            state: dir.path(),
            network: &Network::None,
            limits,
            script: r#"ulimit -v; ulimit -f; ulimit -St; ulimit -Ht; echo "[$(cat)]""#.into(),
            env: vec![],
            helper: Path::new("mast"),
            user: None,
            accounts: dir.path(),
            mounts: &Default::default(),
            packages: None,
            hidden: &Default::default(),
        };
        let child = command.spawn(None, "the text".into()).unwrap();
        let out = child.wait_with_output().await.unwrap();
        assert_eq!(
            String::from_utf8_lossy(&out.stdout),
            "524288\n3072\n7\n8\n[the text]\n"
        );
    }
}
