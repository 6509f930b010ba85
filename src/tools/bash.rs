//! The `bash` tool: each call runs in a fresh sandboxed bash that restores the session's
//! shell state (working directory and exported variables) and saves it afterwards, so the
//! shell persists between calls while no process outlives a call.

use std::time::Duration;

use serde::Deserialize;
use tokio::io::{AsyncRead, AsyncReadExt};

use super::sandbox::{Limits, PidsCgroup, SandboxCommand};
use super::{SessionTools, ToolOutput};

/// Default and largest `timeout_ms`.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
pub const MAX_TIMEOUT_MS: u64 = 600_000;
/// Bytes of stdout and of stderr returned; the rest is cut with a note.
pub const MAX_OUTPUT_BYTES: usize = 30_000;

#[derive(Debug, Deserialize)]
struct Input {
    #[serde(default)]
    command: Option<String>,
    #[serde(default)]
    restart: Option<bool>,
    #[serde(default)]
    timeout_ms: Option<u64>,
}

/// Restores state, runs the command with `eval` (so `cd` and `export` persist), and saves
/// state on every exit path, keeping the command's exit status.
const SCRIPT: &str = r#"__s="$MAST_STATE/shell"; mkdir -p "$__s"
[ -f "$__s/env" ] && . "$__s/env" 2>/dev/null
[ -f "$__s/cwd" ] && cd "$(cat "$__s/cwd")" 2>/dev/null
__cmd="$MAST_CMD"; unset MAST_CMD
trap '__rc=$?; pwd > "$__s/cwd"; export -p | grep -v -e " MAST_STATE=" -e " OLDPWD" -e " PWD=" -e " SHLVL=" > "$__s/env"; exit $__rc' EXIT
eval "$__cmd""#;

async fn read_capped(mut r: impl AsyncRead + Unpin) -> (Vec<u8>, usize) {
    let mut kept = Vec::new();
    let mut total = 0;
    let mut buf = [0u8; 8192];
    while let Ok(n) = r.read(&mut buf).await {
        if n == 0 {
            break;
        }
        total += n;
        let room = MAX_OUTPUT_BYTES.saturating_sub(kept.len());
        kept.extend_from_slice(&buf[..n.min(room)]);
    }
    (kept, total)
}

fn section(bytes: &[u8], total: usize, label: &str) -> String {
    let mut s = String::from_utf8_lossy(bytes).into_owned();
    if total > bytes.len() {
        s.push_str(&format!(
            "\n[{label} truncated: showing the first {} of {total} bytes]",
            bytes.len()
        ));
    }
    s
}

/// Runs one `bash` call.
pub async fn run(tools: &SessionTools, input: &serde_json::Value) -> ToolOutput {
    let input: Input = match serde_json::from_value(input.clone()) {
        Ok(i) => i,
        Err(e) => {
            return ToolOutput::error(format!(
                "Invalid bash input ({e}). Send {{\"command\": \"...\"}}, optionally with \"timeout_ms\" (at most {MAX_TIMEOUT_MS}), or {{\"restart\": true}}."
            ));
        }
    };
    if input.restart == Some(true) {
        let _ = tokio::fs::remove_dir_all(tools.state_dir.join("shell")).await;
        if input.command.as_deref().is_none_or(|c| c.trim().is_empty()) {
            return ToolOutput::text(
                "The shell was restarted: working directory and exported variables are reset.",
            );
        }
    }
    let Some(command) = input.command.filter(|c| !c.trim().is_empty()) else {
        return ToolOutput::error(
            "Invalid bash input: `command` is required (or send {\"restart\": true}).",
        );
    };
    let timeout_ms = input.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS);
    if timeout_ms == 0 || timeout_ms > MAX_TIMEOUT_MS {
        return ToolOutput::error(format!(
            "`timeout_ms` must be between 1 and {MAX_TIMEOUT_MS}."
        ));
    }
    let (network, proxy) = match tools.network_for_command().await {
        Ok(n) => n,
        Err(e) => return ToolOutput::error(e),
    };
    let mut env = vec![("MAST_CMD".to_string(), command)];
    if let Some((_, name)) = &proxy {
        env.push(("MAST_PROXY_SOCKET".to_string(), name.clone()));
        env.extend(super::proxy::sandbox_env());
    }
    let limits = Limits {
        cpu_seconds: timeout_ms.div_ceil(1000).max(1),
        ..tools.limits
    };
    let script = match &proxy {
        // The forwarder turns 127.0.0.1:3128 inside into the proxy's socket outside; the
        // command starts once it listens.
        Some(_) => format!(
            "{}\n{SCRIPT}",
            super::proxy::forwarder_command(&tools.helper)
        ),
        None => SCRIPT.to_string(),
    };
    let sandboxed = SandboxCommand {
        isolation: &tools.isolation,
        workspace: &tools.workspace,
        state: &tools.state_dir,
        network: &network,
        limits,
        script,
        env,
        helper: &tools.helper,
        user: tools.user,
        accounts: &tools.accounts,
    };
    let cgroup = PidsCgroup::create(
        &format!("{}-{}", tools.session_id, crate::domain::ids::new_secret(6)),
        limits.max_processes,
        tools.user,
    );
    let mut cmd = match sandboxed.build(cgroup.as_ref()) {
        Ok(c) => c,
        Err(e) => return ToolOutput::error(e),
    };
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return ToolOutput::error(format!("The command could not be started: {e}")),
    };
    let stdout = child.stdout.take().expect("piped");
    let stderr = child.stderr.take().expect("piped");
    let work = async {
        let (out, err) = tokio::join!(read_capped(stdout), read_capped(stderr));
        let status = child.wait().await;
        (out, err, status)
    };
    let result = tokio::time::timeout(Duration::from_millis(timeout_ms), work).await;
    drop(proxy);
    if let Some(cg) = cgroup {
        cg.close().await;
    }
    match result {
        Err(_) => ToolOutput::error(format!(
            "The command timed out after {timeout_ms} ms and was killed with everything it started; its effects are \
             unknown and the shell state it may have changed was not saved. Retry with a larger `timeout_ms` (at most \
             {MAX_TIMEOUT_MS}) or split the work into shorter commands."
        )),
        Ok(((out, out_total), (err, err_total), status)) => {
            let code = status.ok().and_then(|s| s.code());
            let mut text = section(&out, out_total, "stdout");
            if err_total > 0 {
                if !text.is_empty() && !text.ends_with('\n') {
                    text.push('\n');
                }
                text.push_str("[stderr]\n");
                text.push_str(&section(&err, err_total, "stderr"));
            }
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            match code {
                Some(c) => text.push_str(&format!("[exit code {c}]")),
                None => text.push_str(
                    "[killed by a signal: it may have hit its CPU, memory or process limit]",
                ),
            }
            ToolOutput::text(text)
        }
    }
}
