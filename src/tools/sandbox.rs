//! The sandbox built-in tools run in: bubblewrap with read-only system directories, the
//! session's workspace writable at `/workspace`, a private `/tmp`, new PID/IPC/UTS/user
//! namespaces, no server environment, and the network the environment allows.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::Command;

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
    /// The host's network.
    Shared,
    /// No network at all.
    None,
    /// Only through the egress proxy listening on this Unix socket (inside: 127.0.0.1:3128).
    Proxied { socket: PathBuf },
}

/// Resource limits of one command.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    pub cpu_seconds: u64,
    pub memory_bytes: u64,
    pub max_processes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            cpu_seconds: 300,
            memory_bytes: 4 << 30,
            max_processes: 256,
        }
    }
}

/// The port the in-sandbox proxy forwarder listens on.
pub const PROXY_PORT: u16 = 3128;
/// Where the workspace appears inside the sandbox.
pub const WORKSPACE: &str = "/workspace";
/// Where the session's private state (shell state, proxy socket) appears inside.
pub const STATE: &str = "/run/mast";

/// Finds out whether bubblewrap can create its namespaces here.
pub async fn detect(unsafe_unsandboxed: bool) -> Isolation {
    let probe = Command::new("bwrap")
        .args([
            "--unshare-user",
            "--unshare-pid",
            "--unshare-ipc",
            "--unshare-uts",
            "--ro-bind",
            "/",
            "/",
            "--proc",
            "/proc",
            "true",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .await;
    let reason = match probe {
        Ok(out) if out.status.success() => return Isolation::Bubblewrap,
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
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc",
];
/// Files under those that hold secrets of the host; covered by empty files.
const HIDDEN_FILES: &[&str] = &[
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/shadow-",
    "/etc/gshadow-",
    "/etc/sudoers",
];
/// Directories under those that hold secrets of the host; covered by empty tmpfs.
const HIDDEN_DIRS: &[&str] = &[
    "/etc/ssh",
    "/etc/ssl/private",
    "/etc/sudoers.d",
    "/etc/postgresql",
    "/etc/mysql",
];

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
}

/// A program, its arguments, and its environment.
type CommandParts = (String, Vec<std::ffi::OsString>, Vec<(String, String)>);

/// Where the helper binary appears inside the sandbox.
pub const HELPER: &str = "/run/mast-helper";

fn limit_prefix(limits: &Limits) -> String {
    // Per-command limits of bash and everything it starts (kilobytes for -v).
    format!(
        "ulimit -t {} 2>/dev/null; ulimit -v {} 2>/dev/null; ",
        limits.cpu_seconds,
        limits.memory_bytes / 1024
    )
}

impl SandboxCommand<'_> {
    /// The program, its arguments and its environment: bubblewrap around `bash -c`, or bash
    /// alone when unsandboxed.
    fn parts(&self) -> Result<CommandParts, String> {
        let script = format!("{}{}", limit_prefix(&self.limits), self.script);
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
                if !matches!(self.network, Network::Shared) {
                    push(&mut a, &["--unshare-net"]);
                }
                for dir in SYSTEM_DIRS {
                    push(&mut a, &["--ro-bind-try", dir, dir]);
                }
                for f in HIDDEN_FILES.iter().filter(|f| Path::new(f).exists()) {
                    push(&mut a, &["--ro-bind", "/dev/null", f]);
                }
                for d in HIDDEN_DIRS.iter().filter(|d| Path::new(d).is_dir()) {
                    push(&mut a, &["--tmpfs", d]);
                }
                push(
                    &mut a,
                    &[
                        "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp", "--tmpfs",
                        "/var/tmp",
                    ],
                );
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
        Ok(cmd)
    }
}

/// A per-command process-count limit through the cgroup v1 `pids` or cgroup v2 controller,
/// where the host lets this process create cgroups; removed when dropped.
pub struct PidsCgroup {
    dir: PathBuf,
}

impl PidsCgroup {
    /// Creates `mast/<name>` with `pids.max`, or None where cgroups are not writable.
    pub fn create(name: &str, max: u64) -> Option<Self> {
        for root in ["/sys/fs/cgroup/pids", "/sys/fs/cgroup"] {
            let root = Path::new(root);
            if !root.join("cgroup.procs").exists()
                || !root
                    .join(if root.ends_with("pids") {
                        "tasks"
                    } else {
                        "cgroup.controllers"
                    })
                    .exists()
            {
                continue;
            }
            let dir = root.join("mast").join(name);
            if std::fs::create_dir_all(&dir).is_ok()
                && std::fs::write(dir.join("pids.max"), max.to_string()).is_ok()
            {
                return Some(PidsCgroup { dir });
            }
            let _ = std::fs::remove_dir(&dir);
        }
        None
    }

    /// The file a process writes its pid to in order to join.
    pub fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        // Empty once every process of the command is gone.
        let _ = std::fs::remove_dir(&self.dir);
    }
}
