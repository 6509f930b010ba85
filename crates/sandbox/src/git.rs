//! Cloning a session's repositories on the host, under the session's network rules. git runs
//! as a child process with a timeout, a cleared environment and no user or system config;
//! everything it is told comes through `GIT_CONFIG_*` variables of that one process, so the
//! token never reaches a command line, a `.git/config` or the workspace. It is given the
//! addresses the [`NetGuard`] checked (`http.curloptResolve`), so a name that changes its
//! answer after the check gains nothing, and redirects are not followed.
//!
//! git only ever runs in a fresh directory the sandbox cannot reach; the finished clone is
//! then moved into the workspace through handles that never follow a link the agent made.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use base64::Engine as _;
use rustix::fs::{AtFlags, Mode, RenameFlags};

use super::egress::EgressPolicy;
use super::files::{Missing, Workspace};
use super::netguard::NetGuard;
use mast_domain::repository::{Checkout, ambiguous_url};

/// How long one clone may take, checkout included.
pub const CLONE_TIMEOUT: Duration = Duration::from_secs(600);
/// Longest stderr excerpt kept in an error message.
const MAX_MESSAGE: usize = 1500;

/// Why a clone failed, as the API's `session.error` types name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    /// The host rejected the credentials, or wanted some and got none.
    Authentication,
    /// The host refused access.
    Forbidden,
    /// No repository at that URL.
    NotFound,
    /// The branch or commit does not exist.
    Checkout,
    /// Anything else: network, policy, timeout, disk.
    Clone,
}

impl FailureKind {
    /// The `error.type` of its `session.error`.
    pub fn error_type(self) -> &'static str {
        match self {
            FailureKind::Authentication => "repository_authentication_error",
            FailureKind::Forbidden => "repository_forbidden_error",
            FailureKind::NotFound => "repository_not_found_error",
            FailureKind::Checkout => "repository_checkout_error",
            FailureKind::Clone => "repository_clone_error",
        }
    }
}

/// A failed clone: its kind and a message with no secret in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub kind: FailureKind,
    pub message: String,
}

impl Failure {
    fn clone_error(message: impl Into<String>) -> Self {
        Failure {
            kind: FailureKind::Clone,
            message: message.into(),
        }
    }
}

/// One clone to make.
pub struct CloneJob<'a> {
    pub url: &'a str,
    pub token: Option<&'a str>,
    pub checkout: Option<&'a Checkout>,
    /// A directory that does not exist yet, on the same file system as the workspace.
    pub dest: &'a Path,
    pub egress: &'a EgressPolicy,
    pub guard: NetGuard,
    pub timeout: Duration,
}

/// Clones `job.url` into `job.dest` and checks out what was asked.
pub async fn clone(job: &CloneJob<'_>) -> Result<(), Failure> {
    // Stored before such URLs were refused at creation: refused here too.
    if let Some(why) = ambiguous_url(job.url) {
        return Err(Failure::clone_error(format!("the repository URL {why}")));
    }
    let url = reqwest::Url::parse(job.url)
        .map_err(|e| Failure::clone_error(format!("the URL could not be read: {e}")))?;
    let host = url.host_str().unwrap_or_default().to_string();
    let port = url.port_or_known_default().unwrap_or(443);
    if !job.egress.allows(&host) {
        return Err(Failure::clone_error(format!(
            "the environment's networking does not allow `{host}`; add it to `allowed_hosts`"
        )));
    }
    let addrs = job.guard.resolve(&host, port).await.map_err(|why| {
        // The operator sees why; the session sees what a closed port would show, so the
        // guard cannot be used to map which addresses and ports exist.
        tracing::warn!(%host, port, reason = %why, "a repository clone was refused by the address guard");
        unreachable(&host)
    })?;
    // git is handed our own serialisation of the URL, never the text as given: what it
    // connects to is then the host checked above, at the addresses pinned below.
    let url_text = url.as_str().to_string();
    let resolve = format!(
        "{host}:{port}:{}",
        addrs
            .iter()
            .map(|a| match a.ip() {
                std::net::IpAddr::V6(ip) => format!("[{ip}]"),
                ip => ip.to_string(),
            })
            .collect::<Vec<_>>()
            .join(",")
    );
    let home = job
        .dest
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(std::env::temp_dir);
    let env = GitEnv {
        home,
        config: config(job.token, &resolve),
        secrets: secrets(job.token),
    };
    let dest = job.dest.as_os_str().to_string_lossy().to_string();
    let dest = dest.as_str();
    let run = async {
        match job.checkout {
            None => env.run(&["clone", "--quiet", "--", &url_text, dest]).await,
            Some(Checkout::Branch { name }) => {
                env.run(&[
                    "clone",
                    "--quiet",
                    "--branch",
                    name.as_str(),
                    "--",
                    &url_text,
                    dest,
                ])
                .await
            }
            Some(Checkout::Commit { sha }) => {
                env.run(&["clone", "--quiet", "--no-checkout", "--", &url_text, dest])
                    .await?;
                let wanted = format!("{sha}^{{commit}}");
                let found = env
                    .run(&[
                        "-C",
                        dest,
                        "rev-parse",
                        "--quiet",
                        "--verify",
                        wanted.as_str(),
                    ])
                    .await;
                match found {
                    Ok(full) => {
                        env.run(&["-C", dest, "checkout", "--quiet", "--detach", full.trim()])
                            .await?;
                        Ok(String::new())
                    }
                    Err(_) => Err(Failure {
                        kind: FailureKind::Checkout,
                        message: format!("commit `{sha}` is not in the repository"),
                    }),
                }
            }
        }
    };
    match tokio::time::timeout(job.timeout, run).await {
        Ok(r) => r.map(|_| ()).map_err(|f| match f.kind {
            FailureKind::Clone if is_transport_failure(&f.message) => {
                tracing::warn!(%host, port, reason = %f.message, "a repository could not be reached");
                unreachable(&host)
            }
            _ => f,
        }),
        Err(_) => Err(Failure::clone_error(format!(
            "the clone did not finish within {} seconds",
            job.timeout.as_secs()
        ))),
    }
}

/// The one message of every clone that found nothing answering: refused by the address guard,
/// a closed port, a name that does not resolve, a timeout or a TLS failure all read the same.
fn unreachable(host: &str) -> Failure {
    Failure::clone_error(format!(
        "`{host}` could not be reached: nothing answered there, or the server's network rules keep it out of reach"
    ))
}

/// Whether git's message is about reaching the host rather than about what it answered.
fn is_transport_failure(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    lower.contains("unable to access") && !lower.contains("returned error")
}

/// The configuration a clone runs with, as `(key, value)` pairs.
fn config(token: Option<&str>, resolve: &str) -> Vec<(String, String)> {
    let mut c: Vec<(String, String)> = [
        ("protocol.allow", "never"),
        ("protocol.https.allow", "always"),
        ("protocol.http.allow", "always"),
        ("http.followRedirects", "false"),
        ("credential.helper", ""),
        ("core.hooksPath", "/dev/null"),
        ("core.fsmonitor", "false"),
        // A stalled transfer fails well before the overall timeout.
        ("http.lowSpeedLimit", "1000"),
        ("http.lowSpeedTime", "60"),
        ("http.curloptResolve", resolve),
    ]
    .iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    if let Some(t) = token {
        c.push(("http.extraHeader".into(), auth_header(t)));
    }
    c
}

/// `Authorization: Basic` of `x-access-token:<token>`: what GitHub documents for tokens over
/// HTTPS, and what GitLab, Gitea and Bitbucket accept with a token as the password.
fn auth_header(token: &str) -> String {
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{token}"));
    format!("Authorization: Basic {basic}")
}

/// The strings that must never appear in a message: the token and its encoded header.
fn secrets(token: Option<&str>) -> Vec<String> {
    let Some(t) = token else { return vec![] };
    let basic = base64::engine::general_purpose::STANDARD.encode(format!("x-access-token:{t}"));
    vec![t.to_string(), basic]
}

/// How git is run: its environment, built from nothing.
struct GitEnv {
    home: PathBuf,
    config: Vec<(String, String)>,
    secrets: Vec<String>,
}

impl GitEnv {
    /// Runs `git args`; its stdout, or a classified failure.
    async fn run(&self, args: &[&str]) -> Result<String, Failure> {
        let mut cmd = tokio::process::Command::new("git");
        cmd.args(args)
            .env_clear()
            .env(
                "PATH",
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
            )
            .env("HOME", &self.home)
            .env("LC_ALL", "C")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_CONFIG_COUNT", self.config.len().to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        for (i, (k, v)) in self.config.iter().enumerate() {
            cmd.env(format!("GIT_CONFIG_KEY_{i}"), k)
                .env(format!("GIT_CONFIG_VALUE_{i}"), v);
        }
        let out = cmd
            .output()
            .await
            .map_err(|e| Failure::clone_error(format!("git could not be started: {e}")))?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        let stderr = scrub(&String::from_utf8_lossy(&out.stderr), &self.secrets);
        Err(classify(&stderr))
    }
}

/// Removes every secret from `text`.
fn scrub(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets.iter().filter(|s| !s.is_empty()) {
        out = out.replace(s.as_str(), "<redacted>");
    }
    out
}

/// What git's (C-locale) stderr says went wrong.
fn classify(stderr: &str) -> Failure {
    let lower = stderr.to_ascii_lowercase();
    let kind = if lower.contains("error: 401")
        || lower.contains("authentication failed")
        || lower.contains("could not read username")
        || lower.contains("could not read password")
    {
        FailureKind::Authentication
    } else if lower.contains("error: 403") {
        FailureKind::Forbidden
    } else if lower.contains("error: 404")
        || (lower.contains("repository '") && lower.contains("not found"))
    {
        FailureKind::NotFound
    } else if lower.contains("remote branch") && lower.contains("not found") {
        FailureKind::Checkout
    } else {
        FailureKind::Clone
    };
    let mut message: String = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    if message.is_empty() {
        message = "git failed without saying why".into();
    }
    if message.len() > MAX_MESSAGE {
        let mut cut = MAX_MESSAGE;
        while !message.is_char_boundary(cut) {
            cut -= 1;
        }
        message.truncate(cut);
        message.push('…');
    }
    Failure { kind, message }
}

/// Moves a finished clone at `staging` (server-private) to `mount_path` in the workspace at
/// `workspace`, making the directories on the way. Nothing there is replaced: an existing
/// entry fails the move. With `owner`, the clone is first given to the sandbox's user.
pub fn place(
    workspace: &Path,
    mount_path: &str,
    staging: &Path,
    owner: Option<u32>,
) -> Result<(), String> {
    if let Some(uid) = owner {
        let dir = super::files::open_dir_at(rustix::fs::CWD, staging.as_os_str())
            .map_err(|e| format!("the clone could not be opened: {e}"))?;
        super::identity::give_tree(std::os::fd::AsFd::as_fd(&dir), uid)
            .map_err(|e| format!("the clone could not be given to the sandbox's user: {e}"))?;
    }
    let ws = Workspace::open(workspace).map_err(|e| e.message(mount_path))?;
    let at = ws
        .locate(mount_path, Missing::Create { owner })
        .map_err(|e| e.message(mount_path))?;
    let (dir, name) = at.parent();
    let Some(name) = name else {
        return Err(format!("`{mount_path}` is the workspace itself"));
    };
    rustix::fs::renameat_with(rustix::fs::CWD, staging, dir, name, RenameFlags::NOREPLACE).map_err(
        |e| match e {
            rustix::io::Errno::EXIST => {
                format!(
                    "`{mount_path}` already exists in the workspace; the clone was not put there"
                )
            }
            e => format!("the clone could not be moved to `{mount_path}`: {e}"),
        },
    )
}

/// Takes the directory at `mount_path` out of the workspace at `workspace` into `trash` (a
/// server-private path), from where it can be removed without following the agent's links.
/// `Ok(false)` when nothing is there.
pub fn take_out(workspace: &Path, mount_path: &str, trash: &Path) -> Result<bool, String> {
    let ws = Workspace::open(workspace).map_err(|e| e.message(mount_path))?;
    let at = match ws.locate(mount_path, Missing::Fail) {
        Ok(at) => at,
        Err(super::files::FileError::Missing) => return Ok(false),
        Err(e) => return Err(e.message(mount_path)),
    };
    let (dir, name) = at.parent();
    let Some(name) = name else {
        return Ok(false);
    };
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) if rustix::fs::FileType::from_raw_mode(st.st_mode).is_dir() => {}
        _ => return Ok(false),
    }
    rustix::fs::renameat(dir, name, rustix::fs::CWD, trash)
        .map_err(|e| format!("`{mount_path}` could not be taken out of the workspace: {e}"))?;
    Ok(true)
}

/// Makes `dir` (and its parents) private to the server.
pub fn private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(Mode::RWXU.bits())
        .create(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn git_errors_map_to_the_api_error_types() {
        for (stderr, kind) in [
            (
                "fatal: Authentication failed for 'http://127.0.0.1:1/r.git/'",
                FailureKind::Authentication,
            ),
            (
                "fatal: could not read Username for 'https://h': terminal prompts disabled",
                FailureKind::Authentication,
            ),
            (
                "fatal: unable to access 'http://h/r.git/': The requested URL returned error: 403",
                FailureKind::Forbidden,
            ),
            (
                "remote: Repository not found.\nfatal: repository 'https://h/o/r.git/' not found",
                FailureKind::NotFound,
            ),
            (
                "warning: Could not find remote branch nope to clone.\nfatal: Remote branch nope not found in upstream origin",
                FailureKind::Checkout,
            ),
            (
                "fatal: unable to access 'https://h/': Could not resolve host: h",
                FailureKind::Clone,
            ),
        ] {
            assert_eq!(classify(stderr).kind, kind, "{stderr}");
        }
    }

    /// A URL git would read differently than the address check is refused before git runs,
    /// even when it was stored before creation refused it.
    #[tokio::test]
    async fn a_url_git_reads_differently_never_reaches_git() {
        let dir = tempfile::tempdir().unwrap();
        for url in [
            "http://1.1.1.1\\@127.0.0.1:1/x.git",
            "http://u@127.0.0.1:1/x.git",
            "http://127.0.0.1:1/x.git ",
        ] {
            let job = CloneJob {
                url,
                token: Some("tok"),
                checkout: None,
                dest: &dir.path().join("clone"),
                egress: &EgressPolicy::Open,
                guard: NetGuard {
                    allow_private: true,
                    allow: &[],
                },
                timeout: Duration::from_secs(5),
            };
            let failure = clone(&job).await.unwrap_err();
            assert_eq!(failure.kind, FailureKind::Clone);
            assert!(
                failure.message.starts_with("the repository URL "),
                "{url}: {}",
                failure.message
            );
            assert!(!dir.path().join("clone").exists());
        }
    }

    #[test]
    fn tokens_never_reach_messages() {
        let s = secrets(Some("tok123"));
        let msg = scrub(
            &format!("fatal: header {} failed for tok123", auth_header("tok123")),
            &s,
        );
        assert!(!msg.contains("tok123") && !msg.contains(&s[1]), "{msg}");
        let c = config(Some("tok123"), "h:443:1.2.3.4");
        assert!(
            c.iter()
                .any(|(k, v)| k == "http.extraHeader" && v.starts_with("Authorization: Basic "))
        );
        assert!(
            config(None, "h:443:1.2.3.4")
                .iter()
                .all(|(k, _)| k != "http.extraHeader")
        );
    }
}
