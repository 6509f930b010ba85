//! The sandbox built-in tools run in: bubblewrap with read-only system directories (and only
//! the harmless part of `/etc`), the session's workspace writable at `/workspace`, small
//! private tmpfs mounts, new PID/IPC/UTS/user/network namespaces (and no nested ones), no
//! server environment, the session's own host user when the server runs as root, and the
//! network the environment allows — only ever through the egress proxy.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::OnceLock;

use tokio::process::Command;

pub use super::cgroup::PidsCgroup;

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

/// System directories mounted read-only inside the sandbox.
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];
/// The parts of `/etc` programs need (name lookup, TLS roots, linker, locale, interpreter
/// configuration). Everything else there — keys, service configs, environment files — stays
/// out of reach.
const ETC_ALLOWED: &[&str] = &[
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
const ETC_ALLOWED_PREFIXES: &[&str] = &["python3", "java-"];

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
        let tmp = dir.join(format!(".{name}.{}", crate::domain::ids::new_secret(8)));
        std::fs::write(&tmp, text)?;
        std::fs::rename(&tmp, dir.join(name))?;
    }
    Ok(())
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
    pub isolation: &'a Isolation,
    pub workspace: &'a Path,
    pub state: &'a Path,
    pub network: &'a Network,
    pub limits: Limits,
    /// The script `bash` runs.
    pub script: String,
    /// Extra environment variables (the environment is otherwise cleared).
    pub env: Vec<(String, String)>,
    /// The `mast` binary, mounted read-only for the in-sandbox proxy forwarder.
    pub helper: &'a Path,
    /// The host uid (and gid) bubblewrap runs as; None keeps the server's.
    pub user: Option<u32>,
    /// The directory holding the sandbox's `passwd` and `group`.
    pub accounts: &'a Path,
}

/// A program, its arguments, and its environment.
type CommandParts = (String, Vec<std::ffi::OsString>, Vec<(String, String)>);

/// Where the helper binary appears inside the sandbox.
pub const HELPER: &str = "/run/mast-helper";

fn limit_prefix(limits: &Limits, own_user: bool) -> String {
    // Per-command limits of bash and everything it starts (kilobytes for -v and -f). The
    // process count is per user, so it only means something for a sandbox's own user.
    let mut s = format!(
        "ulimit -t {} 2>/dev/null; ulimit -v {} 2>/dev/null; ulimit -f {} 2>/dev/null; ",
        limits.cpu_seconds,
        limits.memory_bytes / 1024,
        limits.file_bytes / 1024
    );
    if own_user {
        s.push_str(&format!("ulimit -u {} 2>/dev/null; ", limits.max_processes));
    }
    s
}

impl SandboxCommand<'_> {
    /// The program, its arguments and its environment: bubblewrap around `bash -c`, or bash
    /// alone when unsandboxed.
    fn parts(&self) -> Result<CommandParts, String> {
        let script = format!(
            "{}{}",
            limit_prefix(&self.limits, self.user.is_some()),
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
                if DISABLE_USERNS.get().copied().unwrap_or(false) {
                    push(&mut a, &["--disable-userns"]);
                }
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
                for dir in ["/tmp", "/var/tmp"] {
                    push(&mut a, &["--size", &tmpfs, "--tmpfs", dir]);
                }
                a.extend(["--bind".into(), self.workspace.into(), WORKSPACE.into()]);
                a.extend(["--bind".into(), self.state.into(), STATE.into()]);
                if matches!(self.network, Network::Proxied { .. }) {
                    a.extend(["--ro-bind".into(), self.helper.into(), HELPER.into()]);
                }
                push(&mut a, &["--chdir", WORKSPACE, "--clearenv"]);
                env.push(("HOME".into(), WORKSPACE.into()));
                env.push(("MAST_STATE".into(), STATE.into()));
                env.push(("MAST_HELPER".into(), HELPER.into()));
                for (k, v) in env.iter().chain(self.env.iter()) {
                    a.extend(["--setenv".into(), k.into(), v.into()]);
                }
                a.extend(["bash".into(), "-c".into(), script.into()]);
                // bubblewrap itself only needs a PATH; the sandbox's environment is set above.
                Ok((
                    "bwrap".into(),
                    a,
                    vec![("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into())],
                ))
            }
        }
    }

    /// The process to spawn. With a cgroup, a shell joins it first and then becomes the
    /// command, so every process the command starts is counted.
    pub fn build(&self, cgroup: Option<&PidsCgroup>) -> Result<Command, String> {
        let (program, args, env) = self.parts()?;
        let mut cmd = match cgroup {
            Some(cg) => {
                let mut c = Command::new("sh");
                c.arg("-c")
                    .arg(r#"echo $$ > "$0" && exec "$@""#)
                    .arg(cg.procs_file())
                    .arg(&program)
                    .args(&args);
                c
            }
            None => {
                let mut c = Command::new(&program);
                c.args(&args);
                c
            }
        };
        cmd.env_clear().envs(env).current_dir(self.workspace);
        if let (Some(uid), Isolation::Bubblewrap) = (self.user, self.isolation) {
            // std drops supplementary groups too when root switches users.
            cmd.uid(uid).gid(uid);
        }
        Ok(cmd)
    }
}
