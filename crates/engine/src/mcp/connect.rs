//! Connecting to one MCP server: may the session reach it, the HTTP client (pinned to the
//! addresses the egress guard allowed), the bearer token, `initialize` and `tools/list`.
//!
//! The server connects, never the sandbox, so a token never enters a workspace. The
//! transport is rmcp's streamable HTTP client; servers that speak only the older HTTP+SSE
//! transport are not reached (their connection fails with `mcp_connection_failed_error`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use rmcp::model::{ClientConfig, Implementation};
use rmcp::service::{NotificationContext, RoleClient, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::{ClientHandler, ServiceExt};

use crate::credentials::{BearerSource, CredentialError};
use mast_domain::environment::{EnvironmentConfig, Networking};
use mast_sandbox::egress::EgressPolicy;
use mast_sandbox::netguard::NetGuard;

/// Why a server could not be used; the kinds are the `session.error` types.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FailureKind {
    /// `mcp_connection_failed_error`.
    Connection,
    /// `mcp_authentication_failed_error`.
    Authentication,
}

impl FailureKind {
    /// The `session.error` `error.type`.
    pub fn error_type(&self) -> &'static str {
        match self {
            FailureKind::Connection => "mcp_connection_failed_error",
            FailureKind::Authentication => "mcp_authentication_failed_error",
        }
    }
}

/// A failure to reach or use a server, told to the user as a `session.error`. The message
/// never holds a token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    pub server: String,
    pub kind: FailureKind,
    pub message: String,
    /// Worth trying again (not a refusal by policy).
    pub transient: bool,
}

impl Failure {
    /// The `session.error` telling the user about it on `thread`: the turn goes on without
    /// the server's tools, and it is tried again before a later request (`retrying`).
    pub fn retrying_event(&self, thread: &str, now: i64) -> mast_store::NewEvent {
        crate::intake::server_event(
            mast_domain::events::kind::SESSION_ERROR,
            mast_domain::events::mcp_session_error(
                self.kind.error_type(),
                &self.server,
                &self.message,
                "retrying",
            ),
            thread,
            now,
        )
    }

    fn connection(server: &str, message: impl Into<String>, transient: bool) -> Self {
        Failure {
            server: server.to_string(),
            kind: FailureKind::Connection,
            message: message.into(),
            transient,
        }
    }

    fn authentication(server: &str, message: impl Into<String>) -> Self {
        Failure {
            server: server.to_string(),
            kind: FailureKind::Authentication,
            message: message.into(),
            transient: false,
        }
    }
}

/// The client side of a connection: marks the listing stale when the server says its tools
/// changed (`notifications/tools/list_changed`).
#[derive(Clone)]
pub struct Listener {
    pub stale: Arc<AtomicBool>,
}

impl ClientHandler for Listener {
    fn get_info(&self) -> ClientConfig {
        let mut info = ClientConfig::default();
        info.client_info = Implementation::new("mast", env!("CARGO_PKG_VERSION"));
        info
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.stale.store(true, Ordering::SeqCst);
    }
}

/// A live connection to one server.
pub type Service = RunningService<RoleClient, Listener>;

/// What connecting needs besides the server.
pub struct Reach<'a> {
    pub session_id: &'a str,
    pub environment: &'a EnvironmentConfig,
    pub guard: NetGuard,
    pub credentials: &'a dyn BearerSource,
    pub timeout: Duration,
}

/// Whether the environment's networking lets the session reach `host`: unrestricted (and
/// self-hosted: the server makes MCP calls itself) always; `limited` when
/// `allow_mcp_servers` is set or the host is one of its `allowed_hosts`.
pub fn networking_allows(environment: &EnvironmentConfig, host: &str) -> bool {
    match environment {
        EnvironmentConfig::Cloud {
            networking: Networking::Limited {
                allow_mcp_servers, ..
            },
            ..
        } => *allow_mcp_servers || EgressPolicy::of(environment).allows(host),
        _ => true,
    }
}

/// An HTTP client that reaches `url`'s host only at the addresses the guard allows
/// (resolved once, so a later DNS answer cannot point it elsewhere) and follows no redirect.
async fn http_client(
    server: &str,
    url: &reqwest13::Url,
    guard: NetGuard,
    timeout: Duration,
) -> Result<reqwest13::Client, Failure> {
    let host = url
        .host_str()
        .ok_or_else(|| Failure::connection(server, "the server's URL has no host", false))?;
    let port = url.port_or_known_default().unwrap_or(443);
    let addrs = guard
        .resolve(host, port)
        .await
        .map_err(|why| Failure::connection(server, why, false))?;
    // No proxy from the server's environment (`HTTP(S)_PROXY`): a proxy would resolve the
    // name itself and connect wherever its answer points, past the addresses pinned here.
    let mut builder = reqwest13::Client::builder()
        .redirect(reqwest13::redirect::Policy::none())
        .no_proxy()
        .connect_timeout(timeout);
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<std::net::IpAddr>().is_err() {
        builder = builder.resolve_to_addrs(host, &addrs);
    }
    builder
        .build()
        .map_err(|e| Failure::connection(server, format!("no HTTP client: {e}"), false))
}

/// A connection made: the live service, what it listed, and the bearer token it presents
/// (kept so a call can tell whether the session's credential changed since).
pub struct Connected {
    pub service: Service,
    pub tools: Vec<rmcp::model::Tool>,
    pub token: Option<String>,
}

/// Connects to `url`, runs `initialize` and lists the tools; one retry with a refreshed
/// token after a 401.
pub async fn connect(
    reach: &Reach<'_>,
    server: &str,
    url: &str,
    stale: Arc<AtomicBool>,
) -> Result<Connected, Failure> {
    let parsed = reqwest13::Url::parse(url)
        .map_err(|e| Failure::connection(server, format!("bad URL: {e}"), false))?;
    let host = parsed.host_str().unwrap_or_default().to_string();
    if !networking_allows(reach.environment, &host) {
        return Err(Failure::connection(
            server,
            format!(
                "the environment's limited networking does not allow `{host}`: set `allow_mcp_servers: true` or list the host in `allowed_hosts`"
            ),
            false,
        ));
    }
    let client = http_client(server, &parsed, reach.guard, reach.timeout).await?;
    let mut token = bearer(reach, server, url, false).await?;
    let mut refreshed = false;
    loop {
        let attempt = tokio::time::timeout(
            reach.timeout,
            initialize(client.clone(), url, token.clone(), stale.clone()),
        )
        .await;
        match attempt {
            Err(_) => {
                return Err(Failure::connection(
                    server,
                    format!(
                        "no answer to initialize and tools/list within {:?}",
                        reach.timeout
                    ),
                    true,
                ));
            }
            Ok(Ok((service, tools))) => {
                return Ok(Connected {
                    service,
                    tools,
                    token,
                });
            }
            Ok(Err(Refused::Unauthorized)) if !refreshed => {
                refreshed = true;
                token = bearer(reach, server, url, true).await?;
                if token.is_none() {
                    return Err(Failure::authentication(
                        server,
                        "the server requires authorization and none of the session's vault credentials matches its URL",
                    ));
                }
            }
            Ok(Err(Refused::Unauthorized)) => {
                return Err(Failure::authentication(
                    server,
                    "the server refused the session's credential (HTTP 401)",
                ));
            }
            Ok(Err(Refused::Other(why))) => return Err(Failure::connection(server, why, true)),
        }
    }
}

/// The token the session's vaults hold for `url` now (refreshed first with `refresh`, or
/// when close to expiry); a refused or unreadable credential is the server's failure.
pub async fn bearer(
    reach: &Reach<'_>,
    server: &str,
    url: &str,
    refresh: bool,
) -> Result<Option<String>, Failure> {
    match reach
        .credentials
        .bearer(reach.session_id, url, refresh)
        .await
    {
        Ok(t) => Ok(t),
        Err(CredentialError::Authentication(why)) => Err(Failure::authentication(server, why)),
        Err(CredentialError::Unavailable(why)) => Err(Failure::connection(
            server,
            format!("the credential could not be read: {why}"),
            true,
        )),
    }
}

enum Refused {
    Unauthorized,
    Other(String),
}

async fn initialize(
    client: reqwest13::Client,
    url: &str,
    token: Option<String>,
    stale: Arc<AtomicBool>,
) -> Result<(Service, Vec<rmcp::model::Tool>), Refused> {
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    if let Some(t) = token {
        config = config.auth_header(t);
    }
    let transport = StreamableHttpClientTransport::with_client(client, config);
    let service = Listener { stale }.serve(transport).await.map_err(|e| {
        match e.is_authorization_required() || says_401(&e) {
            true => Refused::Unauthorized,
            false => Refused::Other(describe(&e)),
        }
    })?;
    let tools = service.peer().list_all_tools().await.map_err(|e| {
        if e.auth_challenge().is_some() || says_401(&e) {
            Refused::Unauthorized
        } else {
            Refused::Other(format!("tools/list failed: {}", describe(&e)))
        }
    })?;
    Ok((service, tools))
}

/// An error chain that mentions an HTTP 401 (a server that refuses without a
/// `WWW-Authenticate` challenge).
pub fn says_401(e: &(dyn std::error::Error + 'static)) -> bool {
    let text = describe(e);
    text.contains("401") || text.contains("Unauthorized")
}

/// An error and its causes on one line.
pub fn describe(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let s_text = s.to_string();
        if !out.contains(&s_text) {
            out.push_str(": ");
            out.push_str(&s_text);
        }
        source = s.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use mast_domain::environment::Packages;

    #[test]
    fn limited_networking_needs_allow_mcp_servers_or_the_host() {
        let limited = |allow: bool| EnvironmentConfig::Cloud {
            networking: Networking::Limited {
                allowed_hosts: vec!["mcp.example.com".into()],
                allow_package_managers: false,
                allow_mcp_servers: allow,
            },
            packages: Packages::default(),
        };
        assert!(!networking_allows(&limited(false), "other.example.com"));
        assert!(networking_allows(&limited(false), "mcp.example.com"));
        assert!(networking_allows(&limited(true), "other.example.com"));
        assert!(networking_allows(&EnvironmentConfig::default_cloud(), "x"));
        assert!(networking_allows(&EnvironmentConfig::SelfHosted, "x"));
    }
}
