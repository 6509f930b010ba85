//! `mast doctor`: checks what `mast serve` needs from this host and configuration, one line
//! per finding (ok / warn / FAIL) with what to fix, and exits non-zero when something fails.
//!
//! Checks are independent of each other and change nothing they look at (no store is created
//! or migrated); a new one is one more entry in [`checks`].

mod host;
mod models;
mod store;

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::pin::Pin;
use std::process::ExitCode;
use std::time::Duration;

use serde_json::Value;

use host::{cgroup_check, data_dir_check, sandbox_check, seccomp_check, user_check};
use models::provider_checks;
use store::store_check;

use super::StoreArgs;
use crate::models::anthropic::AnthropicConfig;
use crate::models::registry::ProviderConfig;

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
