//! Command-line interface: the server (`serve`, `migrate`), admin commands that work on the
//! store directly (`keys`, `doctor`), and client commands that talk to a running server over
//! its HTTP API like any SDK would (`agents`, `sessions`, `send`, `hooks`, `webhooks`).
//!
//! Results go to stdout (so `KEY=$(mast keys create)` and pipes keep working); where a command
//! wrote, warnings and progress go to stderr.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Parser, Subcommand};

pub mod agents;
pub mod answer;
pub mod client;
pub mod doctor;
pub mod environments;
pub mod health;
// Hooks.
pub mod hooks;
pub mod keys;
pub mod names;
pub mod session_create;
pub mod session_list;
pub mod sessions;
pub mod skills;
pub mod store;
pub mod table;
pub mod webhooks;

/// Mast: a self-hostable server for the Claude Managed Agents API.
#[derive(Debug, Parser)]
#[command(name = "mast", version)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Where data lives: Postgres when `DATABASE_URL` is set, else SQLite under the data dir.
#[derive(Debug, Clone, clap::Args)]
pub struct StoreArgs {
    /// Directory of the embedded SQLite store (used when DATABASE_URL is unset).
    #[arg(long, env = "MAST_DATA_DIR", default_value = "./mast-data")]
    pub data_dir: PathBuf,
    /// Postgres connection URL; when set, Postgres is the store.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: Option<String>,
}

/// Which running server a client command talks to, and with which key.
#[derive(Debug, Clone, clap::Args)]
pub struct ServerArgs {
    /// Base URL of the Mast server.
    #[arg(long, env = "MAST_URL", default_value = "http://127.0.0.1:8080")]
    pub url: String,
    /// API key (`mast keys create`); falls back to ANTHROPIC_API_KEY. A server still in open
    /// mode (loopback, no key created yet) needs none.
    #[arg(long, env = "MAST_API_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the server.
    Serve {
        /// Address to listen on: `HOST:PORT` (`localhost:8080`, `0.0.0.0:8080`, `[::1]:8080`) or
        /// a bare port (`8080`, on 127.0.0.1).
        #[arg(long, env = "MAST_LISTEN", default_value = "127.0.0.1:8080", value_parser = parse_listen)]
        listen: SocketAddr,
        #[command(flatten)]
        store: StoreArgs,
        /// Serve on a non-loopback address even though no API key exists (also
        /// `MAST_ALLOW_UNAUTHENTICATED=1`).
        #[arg(long)]
        allow_unauthenticated: bool,
        /// Config file with `[[providers]]` tables (default: ./mast.toml when it exists).
        #[arg(long, env = "MAST_CONFIG")]
        config: Option<std::path::PathBuf>,
    },
    /// Run database migrations and exit.
    Migrate {
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Manage API keys (and list environments' worker keys).
    Keys {
        #[command(subcommand)]
        command: KeysCommand,
    },
    /// Manage agents on a running server.
    Agents {
        #[command(subcommand)]
        command: AgentsCommand,
    },
    /// Environments' package layers (these open the store directly).
    Environments {
        #[command(subcommand)]
        command: EnvironmentsCommand,
    },
    /// Skills installed by the operator (these open the store directly).
    Skills {
        #[command(subcommand)]
        command: SkillsCommand,
    },
    /// Create, list, follow and answer sessions on a running server.
    Sessions {
        #[command(subcommand)]
        command: SessionsCommand,
    },
    /// Send a user message to a session (`-` reads the text from stdin).
    Send {
        /// The session's id.
        session_id: String,
        /// The message.
        text: String,
        /// Follow the session's events until it is idle again.
        #[arg(long)]
        wait: bool,
        /// With `--wait`: print raw events, one JSON object a line.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Check this host and configuration: sandbox, users, cgroups, store, model providers,
    /// data directory and listen address; says what to fix.
    Doctor {
        /// The address `mast serve` would listen on.
        #[arg(long, env = "MAST_LISTEN", default_value = "127.0.0.1:8080", value_parser = parse_listen)]
        listen: SocketAddr,
        #[command(flatten)]
        store: StoreArgs,
        /// Config file with `[[providers]]` tables (default: ./mast.toml when it exists).
        #[arg(long, env = "MAST_CONFIG")]
        config: Option<std::path::PathBuf>,
    },
    /// Hooks on a running server (Mast's own addition): endpoints asked before tool calls run.
    Hooks {
        #[command(subcommand)]
        command: HooksCommand,
    },
    /// Webhook endpoints on a running server (Mast's own API for them).
    Webhooks {
        #[command(subcommand)]
        command: WebhooksCommand,
    },
    /// Print a shell completion script (`mast completions bash > /etc/bash_completion.d/mast`).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
    /// Exit 0 when a server answers ready (`/readyz`), 1 saying why otherwise: for container
    /// health checks and scripts that wait for a server.
    Health {
        /// Base URL of the Mast server.
        #[arg(long, env = "MAST_URL", default_value = "http://127.0.0.1:8080")]
        url: String,
    },
    /// Print the OpenAPI document.
    Openapi,
    /// Inside a sandbox: forward 127.0.0.1:PORT to the egress proxy's socket (internal).
    #[command(hide = true)]
    SandboxForward {
        #[arg(long)]
        port: u16,
        #[arg(long)]
        socket: std::path::PathBuf,
    },
}

/// `mast hooks ...`.
#[derive(Debug, Subcommand)]
pub enum HooksCommand {
    /// Create a hook; prints it with its signing secret (shown only this once).
    Create {
        #[command(flatten)]
        args: hooks::CreateArgs,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List the workspace's hooks.
    List {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Delete a hook.
    Delete {
        /// The hook's id.
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

/// `mast webhooks ...`.
#[derive(Debug, Subcommand)]
pub enum WebhooksCommand {
    /// Create an endpoint; prints it with its signing secret (shown only this once).
    Create {
        #[command(flatten)]
        args: webhooks::CreateArgs,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List the workspace's endpoints.
    List {
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Start delivering to an endpoint again.
    Enable {
        /// The endpoint's id.
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Stop delivering to an endpoint (its queued deliveries wait).
    Disable {
        /// The endpoint's id.
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Give an endpoint a new signing secret; prints it (the old one signs for a while too).
    RotateSecret {
        /// The endpoint's id.
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List an endpoint's deliveries: status, attempts, last answer.
    Deliveries {
        /// The endpoint's id.
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Queue a delivery again, with the same payload and `webhook-id`.
    Replay {
        /// The endpoint's id.
        endpoint: String,
        /// The delivery's id.
        delivery: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Delete an endpoint with its deliveries.
    Delete {
        /// The endpoint's id.
        id: String,
        #[command(flatten)]
        server: ServerArgs,
    },
}

/// `mast environments ...`.
#[derive(Debug, Subcommand)]
pub enum EnvironmentsCommand {
    /// Install an environment's packages into its layer now, before a session needs them;
    /// prints the layer's directory.
    Warm {
        /// The environment's id.
        id: String,
        /// The workspace the environment belongs to.
        #[arg(long, default_value = crate::api::auth::DEFAULT_WORKSPACE)]
        workspace: String,
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// `mast skills ...`.
#[derive(Debug, Subcommand)]
pub enum SkillsCommand {
    /// Install a skill folder (with its SKILL.md) under the id of one of Anthropic's
    /// pre-built skills, which Mast cannot ship, so agents may name it as
    /// `{"type": "anthropic", "skill_id": ID}`; again with a newer folder, it adds a version.
    InstallAnthropic {
        /// The skill's folder.
        dir: PathBuf,
        /// The Anthropic skill id (`xlsx`, `pdf`, `docx`, `pptx`, …); default: SKILL.md's `name`.
        #[arg(long)]
        id: Option<String>,
        /// The workspace whose agents may use it.
        #[arg(long, default_value = crate::api::auth::DEFAULT_WORKSPACE)]
        workspace: String,
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// `mast keys ...`: these open the store directly, so they work with the server stopped too.
#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create an API key (or, with `--environment`, a self-hosted environment's worker key)
    /// and print it once (only its hash is stored).
    Create {
        /// Workspace the key belongs to (created if missing).
        #[arg(long, default_value = "default")]
        workspace: String,
        /// Create a worker key for this self-hosted environment instead of an API key.
        #[arg(long)]
        environment: Option<String>,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// List API keys and environments' worker keys: ids, workspaces and times, never the keys.
    List {
        /// One JSON array instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        store: StoreArgs,
    },
    /// Revoke a key by id (`apikey_…`, or a worker key's `envkey_…`); it stops working at
    /// once on every server using the store.
    Revoke {
        /// The key's id, as `mast keys list` shows it.
        id: String,
        #[command(flatten)]
        store: StoreArgs,
    },
}

/// `mast agents ...`.
#[derive(Debug, Subcommand)]
pub enum AgentsCommand {
    /// Create or update agents from a YAML or JSON file (one agent, a list, or several YAML
    /// documents): matched by `id` when given, else by `name`; a new version only when the
    /// content changed.
    Apply {
        /// The file (`-` for stdin).
        file: PathBuf,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List the workspace's agents: id, name, latest version, model, last update.
    List {
        /// At most this many; all of them when left out.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        limit: Option<u32>,
        /// Print the API's agent objects as one JSON array instead of a table.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
}

/// `mast sessions ...`.
#[derive(Debug, Subcommand)]
pub enum SessionsCommand {
    /// Start a session of an agent (id or name) in an environment; prints its id.
    Create {
        #[command(flatten)]
        args: session_create::CreateArgs,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// List sessions, newest first: status, why each idle one stopped (marking those that
    /// wait on you), agent, title, last update.
    List {
        #[command(flatten)]
        args: session_list::ListArgs,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Follow a session's events, one readable line each, reconnecting without gap or
    /// duplicate when the connection drops; Ctrl-C stops.
    Tail {
        /// The session's id.
        session_id: String,
        /// Print the whole log first, then follow.
        #[arg(long)]
        from_start: bool,
        /// Print raw events, one JSON object a line.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Answer a tool call the session waits on: a custom tool's result (`--result`), or a
    /// confirmation (`--allow` / `--deny`); without TOOL_USE_ID, the one call waiting.
    Answer {
        #[command(flatten)]
        args: answer::AnswerArgs,
        #[command(flatten)]
        server: ServerArgs,
    },
}

/// Writes the completion script for `shell` to `out`.
/// A reader that stops early (`| head`) ends the output quietly: clap's generator panics on a
/// write error, so the script is written to memory first.
pub fn completions(shell: clap_complete::Shell, out: &mut dyn std::io::Write) {
    use clap::CommandFactory as _;
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "mast", &mut script);
    let _ = out.write_all(&script).and_then(|()| out.flush());
}

/// Reads `--listen`: a socket address, `HOST:PORT` with a name to resolve, or a bare port on
/// loopback (a public bind is always spelled out).
pub fn parse_listen(s: &str) -> Result<SocketAddr, String> {
    use std::net::ToSocketAddrs as _;
    let s = s.trim();
    if let Ok(port) = s.parse::<u16>() {
        return Ok(SocketAddr::from(([127, 0, 0, 1], port)));
    }
    if let Ok(addr) = s.parse::<SocketAddr>() {
        return Ok(addr);
    }
    let resolved = s
        .to_socket_addrs()
        .map_err(|e| format!("`{s}` is not HOST:PORT or a port ({e})"))?
        .collect::<Vec<_>>();
    // `localhost` resolves to both loopback addresses; IPv4 is what clients try first.
    resolved
        .iter()
        .find(|a| a.is_ipv4())
        .or(resolved.first())
        .copied()
        .ok_or_else(|| format!("`{s}` resolves to no address"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listen_takes_ports_names_and_addresses() {
        assert_eq!(
            parse_listen("8080").unwrap(),
            "127.0.0.1:8080".parse().unwrap()
        );
        assert_eq!(
            parse_listen("localhost:9000").unwrap(),
            "127.0.0.1:9000".parse().unwrap()
        );
        assert_eq!(
            parse_listen("0.0.0.0:80").unwrap(),
            "0.0.0.0:80".parse().unwrap()
        );
        assert_eq!(
            parse_listen("[::1]:81").unwrap(),
            "[::1]:81".parse().unwrap()
        );
        assert!(parse_listen("nowhere").is_err());
        assert!(parse_listen("70000").is_err());
    }
}
