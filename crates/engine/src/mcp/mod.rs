//! The MCP connector: a session's connections to the MCP servers its agents' `mcp_toolset`s
//! reference, their tool listings, and calls.
//!
//! A [`McpSet`] belongs to one session's runner (every thread of the session shares it) and
//! lives as long as the runner: it is dropped, closing every connection, when the runner
//! exits (the session went idle), so the next turn connects afresh and sees changed
//! servers. Before each model request the loop asks it to [`McpSet::prepare`]: servers not
//! yet connected are connected in parallel, each within the connect timeout, so a slow
//! server delays a request by at most that and never hides another server's tools. A
//! server that failed is tried again after a backoff (1 s doubling to 30 s); a listing is
//! refreshed after the server sends `notifications/tools/list_changed`.

pub mod connect;
mod convert;
pub mod naming;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::model::CallToolRequestParams;
use rmcp::service::ServiceError;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use connect::{Failure, FailureKind, Reach, Service};
use mast_domain::agent::SessionAgent;
use mast_domain::tools::{McpServer, PermissionPolicy, Tool, ToolDef};

/// First wait before a failed server is tried again; doubles per failure up to the cap.
const RETRY_BASE: Duration = Duration::from_secs(1);
const RETRY_CAP: Duration = Duration::from_secs(30);
/// Quick retries of a transient connect failure within one attempt's time budget.
const QUICK_RETRIES: u32 = 3;

/// A live connection, what it last listed, and the bearer token it presents.
struct Conn {
    service: Service,
    tools: Mutex<Vec<rmcp::model::Tool>>,
    stale: Arc<AtomicBool>,
    token: Option<String>,
}

enum Slot {
    Ready(Arc<Conn>),
    /// The last attempt failed at `since`; `attempts` failures in a row.
    Failed {
        since: Instant,
        attempts: u32,
    },
}

/// Which MCP tool an offered name stands for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpTarget {
    pub server: String,
    pub url: String,
    pub tool: String,
}

/// The MCP tools offered in one model request, and what each offered name calls.
#[derive(Debug, Clone, Default)]
pub struct Offer {
    pub defs: Vec<ToolDef>,
    by_name: HashMap<String, McpTarget>,
}

impl Offer {
    /// The MCP tool an offered name calls, if it is one.
    pub fn target(&self, offered: &str) -> Option<&McpTarget> {
        self.by_name.get(offered)
    }
}

/// What a call came to: the result the model sees, and a failure to tell the user about.
pub struct CallOutcome {
    pub content: Vec<Value>,
    pub is_error: bool,
    pub failure: Option<Failure>,
}

impl CallOutcome {
    fn error(text: String, failure: Option<Failure>) -> Self {
        CallOutcome {
            content: vec![mast_domain::content::text(text)],
            is_error: true,
            failure,
        }
    }
}

/// One session's MCP connections (see the module docs).
pub struct McpSet {
    slots: Mutex<HashMap<String, Slot>>,
    cancel: CancellationToken,
}

impl Drop for McpSet {
    fn drop(&mut self) {
        // Ends connects and calls still running; dropping the services closes them.
        self.cancel.cancel();
    }
}

fn key(server: &McpServer) -> String {
    format!("{}\n{}", server.name, server.url)
}

/// The servers an agent's toolsets reference, in declaration order.
fn referenced(agent: &SessionAgent) -> Vec<&McpServer> {
    agent
        .mcp_servers
        .iter()
        .filter(|s| {
            agent.tools.iter().any(
                |t| matches!(t, Tool::McpToolset { mcp_server_name, .. } if *mcp_server_name == s.name),
            )
        })
        .collect()
}

/// Whether an MCP toolset enables `tool`, and under which policy.
pub fn tool_config(tools: &[Tool], server: &str, tool: &str) -> Option<(bool, PermissionPolicy)> {
    tools.iter().find_map(|t| match t {
        Tool::McpToolset {
            mcp_server_name,
            default_config,
            configs,
        } if mcp_server_name == server => Some(match configs.iter().find(|c| c.name == tool) {
            Some(c) => (c.enabled, c.permission_policy),
            None => (default_config.enabled, default_config.permission_policy),
        }),
        _ => None,
    })
}

enum Action {
    Connect(u32),
    Relist(Arc<Conn>),
}

impl McpSet {
    /// An empty set whose work stops when `parent` is cancelled (process shutdown).
    pub fn new(parent: &CancellationToken) -> Self {
        McpSet {
            slots: Mutex::new(HashMap::new()),
            cancel: parent.child_token(),
        }
    }

    /// Connects (or refreshes) what `agent` needs that is not ready, in parallel; returns
    /// the failures of this round.
    pub async fn prepare(&self, agent: &SessionAgent, reach: &Reach<'_>) -> Vec<Failure> {
        let mut jobs = Vec::new();
        for server in referenced(agent) {
            let action = {
                let slots = self.slots.lock().expect("mcp slots");
                match slots.get(&key(server)) {
                    Some(Slot::Ready(c)) if !c.service.is_closed() => {
                        if !c.stale.swap(false, Ordering::SeqCst) {
                            continue;
                        }
                        Action::Relist(c.clone())
                    }
                    Some(Slot::Failed { since, attempts }) => {
                        let wait = super::backoff::delay(RETRY_BASE, RETRY_CAP, *attempts, None);
                        if since.elapsed() < wait {
                            continue;
                        }
                        Action::Connect(*attempts)
                    }
                    _ => Action::Connect(0),
                }
            };
            jobs.push(self.settle(server, action, reach));
        }
        if jobs.is_empty() {
            return vec![];
        }
        let all = futures_util::future::join_all(jobs);
        tokio::select! {
            done = all => done.into_iter().flatten().collect(),
            _ = self.cancel.cancelled() => vec![],
        }
    }

    /// Runs one server's action and records the slot it leaves.
    async fn settle(
        &self,
        server: &McpServer,
        action: Action,
        reach: &Reach<'_>,
    ) -> Option<Failure> {
        let (result, attempts) = match action {
            Action::Relist(conn) => {
                let listed =
                    tokio::time::timeout(reach.timeout, conn.service.peer().list_all_tools()).await;
                match listed {
                    Ok(Ok(tools)) => {
                        *conn.tools.lock().expect("mcp tools") = tools;
                        return None;
                    }
                    Ok(Err(e)) => (Err(call_failure(&server.name, &e, "tools/list failed")), 0),
                    Err(_) => (
                        Err(Failure {
                            server: server.name.clone(),
                            kind: FailureKind::Connection,
                            message: format!("no answer to tools/list within {:?}", reach.timeout),
                            transient: true,
                        }),
                        0,
                    ),
                }
            }
            Action::Connect(attempts) => (self.connect_with_retries(server, reach).await, attempts),
        };
        let mut slots = self.slots.lock().expect("mcp slots");
        match result {
            Ok(conn) => {
                slots.insert(key(server), Slot::Ready(conn));
                None
            }
            Err(f) => {
                tracing::warn!(mcp_server = %server.name, error = %f.message, "MCP server unavailable");
                slots.insert(
                    key(server),
                    Slot::Failed {
                        since: Instant::now(),
                        attempts: attempts + 1,
                    },
                );
                Some(f)
            }
        }
    }

    /// Connects, retrying transient failures quickly within one connect timeout overall.
    async fn connect_with_retries(
        &self,
        server: &McpServer,
        reach: &Reach<'_>,
    ) -> Result<Arc<Conn>, Failure> {
        let deadline = Instant::now() + reach.timeout;
        let mut attempt = 0;
        loop {
            attempt += 1;
            let stale = Arc::new(AtomicBool::new(false));
            match connect::connect(reach, &server.name, &server.url, stale.clone()).await {
                Ok(c) => {
                    tracing::info!(mcp_server = %server.name, tools = c.tools.len(), "MCP server connected");
                    return Ok(Arc::new(Conn {
                        service: c.service,
                        tools: Mutex::new(c.tools),
                        stale,
                        token: c.token,
                    }));
                }
                Err(f) if f.transient && attempt < QUICK_RETRIES => {
                    let wait = super::backoff::delay(
                        Duration::from_millis(200),
                        Duration::from_secs(2),
                        attempt,
                        None,
                    );
                    if Instant::now() + wait >= deadline {
                        return Err(f);
                    }
                    tokio::time::sleep(wait).await;
                }
                Err(f) => return Err(f),
            }
        }
    }

    /// The enabled tools of `agent`'s connected servers, named so that no two collide and
    /// none takes a name in `taken` (see [`naming`]).
    pub fn offer(&self, agent: &SessionAgent, taken: &HashSet<String>) -> Offer {
        let servers = referenced(agent);
        let names: Vec<&str> = agent.mcp_servers.iter().map(|s| s.name.as_str()).collect();
        let prefixes = naming::prefixes(&names);
        let slots = self.slots.lock().expect("mcp slots");
        let mut offer = Offer::default();
        for server in servers {
            let Some(Slot::Ready(conn)) = slots.get(&key(server)) else {
                continue;
            };
            let prefix = &prefixes[&server.name];
            for tool in conn.tools.lock().expect("mcp tools").iter() {
                let enabled = tool_config(&agent.tools, &server.name, &tool.name)
                    .is_some_and(|(enabled, _)| enabled);
                if !enabled {
                    continue;
                }
                let name = naming::offered_name(prefix, &tool.name);
                if taken.contains(&name) || offer.by_name.contains_key(&name) {
                    tracing::warn!(mcp_server = %server.name, tool = %tool.name, offered = %name, "MCP tool not offered: its name is taken");
                    continue;
                }
                let description = tool
                    .description
                    .as_deref()
                    .map(str::to_string)
                    .or_else(|| tool.title.clone())
                    .unwrap_or_else(|| {
                        format!("`{}` from MCP server `{}`", tool.name, server.name)
                    });
                offer.defs.push(ToolDef {
                    name: name.clone(),
                    description,
                    input_schema: Value::Object((*tool.input_schema).clone()),
                });
                offer.by_name.insert(
                    name,
                    McpTarget {
                        server: server.name.clone(),
                        url: server.url.clone(),
                        tool: tool.name.to_string(),
                    },
                );
            }
        }
        offer
    }

    /// Calls a tool. A tool's own error, or a JSON-RPC error, is an error result the model
    /// can act on; a lost connection, a hang past `timeout` or a refused credential also
    /// reports a failure and drops the connection, so the next request reconnects. A
    /// credential refused mid-session (an expired token) is refreshed through a new
    /// connection and the call tried once more: a refused request did not run. Before each
    /// call the session's credential is read again, so an archived, deleted, replaced or
    /// refreshed credential takes effect on the next call, not the next connection.
    pub async fn call(
        &self,
        target: &McpTarget,
        input: &Value,
        timeout: Duration,
        reach: &Reach<'_>,
    ) -> CallOutcome {
        let k = format!("{}\n{}", target.server, target.url);
        let conn = match self.slots.lock().expect("mcp slots").get(&k) {
            Some(Slot::Ready(c)) => Some(c.clone()),
            _ => None,
        };
        let Some(conn) = conn else {
            // Its failure was reported when it happened.
            return CallOutcome::error(
                format!(
                    "The MCP server `{}` is not connected; the tool did not run.",
                    target.server
                ),
                None,
            );
        };
        let server = McpServer {
            kind: mast_domain::tools::McpServerKind::Url,
            name: target.server.clone(),
            url: target.url.clone(),
        };
        // Whether a refused call may reconnect with a refreshed token: not when this call
        // already connected afresh (that connect refreshed after any 401 itself).
        let mut may_retry = true;
        let first = match connect::bearer(reach, &target.server, &target.url, false).await {
            Ok(now) if now == conn.token => self.call_once(&conn, target, input, timeout).await,
            // The credential changed since the connection was made: connect with what the
            // vaults hold now (no token at all when it was archived or deleted).
            Ok(_) => match self.connect_with_retries(&server, reach).await {
                Ok(fresh) => {
                    may_retry = false;
                    self.slots
                        .lock()
                        .expect("mcp slots")
                        .insert(k.clone(), Slot::Ready(fresh.clone()));
                    self.call_once(&fresh, target, input, timeout).await
                }
                Err(f) => {
                    may_retry = false;
                    Err(f)
                }
            },
            Err(f) => {
                may_retry = false;
                Err(f)
            }
        };
        let failure = match first {
            Ok(out) => return out,
            Err(f) if f.kind == FailureKind::Authentication && may_retry => {
                match self.connect_with_retries(&server, reach).await {
                    Ok(fresh) => {
                        self.slots
                            .lock()
                            .expect("mcp slots")
                            .insert(k.clone(), Slot::Ready(fresh.clone()));
                        match self.call_once(&fresh, target, input, timeout).await {
                            Ok(out) => return out,
                            Err(f) => f,
                        }
                    }
                    Err(f) => f,
                }
            }
            Err(f) => f,
        };
        self.slots.lock().expect("mcp slots").insert(
            k,
            Slot::Failed {
                since: Instant::now(),
                attempts: 0,
            },
        );
        // A refused credential means the server turned the request away: nothing ran.
        let effect = match failure.kind {
            FailureKind::Authentication => "the tool did not run",
            FailureKind::Connection => "it may or may not have taken effect",
        };
        CallOutcome::error(
            format!(
                "The MCP server `{}` could not complete the call ({}); {effect}.",
                target.server, failure.message
            ),
            Some(failure),
        )
    }

    /// One `tools/call` on `conn`: the outcome the model sees, or what broke the connection.
    async fn call_once(
        &self,
        conn: &Conn,
        target: &McpTarget,
        input: &Value,
        timeout: Duration,
    ) -> Result<CallOutcome, Failure> {
        let mut params = CallToolRequestParams::new(target.tool.clone());
        if let Value::Object(args) = input {
            params = params.with_arguments(args.clone());
        }
        let call = tokio::time::timeout(timeout, conn.service.peer().call_tool(params));
        let answered = tokio::select! {
            a = call => a,
            _ = self.cancel.cancelled() => {
                return Ok(CallOutcome::error("The server is shutting down; the MCP call was cut short.".into(), None));
            }
        };
        match answered {
            Ok(Ok(result)) => {
                let items = serde_json::to_value(&result.content).unwrap_or(Value::Null);
                let items = items.as_array().cloned().unwrap_or_default();
                let mut content = convert::blocks(&items);
                if content.is_empty()
                    && let Some(s) = &result.structured_content
                {
                    content.push(mast_domain::content::text(s.to_string()));
                }
                Ok(CallOutcome {
                    content,
                    is_error: result.is_error.unwrap_or(false),
                    failure: None,
                })
            }
            Ok(Err(ServiceError::McpError(e))) => Ok(CallOutcome::error(
                format!(
                    "The MCP server `{}` answered with an error: {}",
                    target.server, e.message
                ),
                None,
            )),
            Ok(Err(e)) => Err(call_failure(&target.server, &e, "the call failed")),
            Err(_) => Err(Failure {
                server: target.server.clone(),
                kind: FailureKind::Connection,
                message: format!("`{}` did not answer within {timeout:?}", target.tool),
                transient: true,
            }),
        }
    }
}

/// A request's failure on a live connection: a refused credential or a lost connection.
fn call_failure(server: &str, e: &ServiceError, what: &str) -> Failure {
    let auth = e.auth_challenge().is_some() || connect::says_401(e);
    Failure {
        server: server.to_string(),
        kind: if auth {
            FailureKind::Authentication
        } else {
            FailureKind::Connection
        },
        message: format!("{what}: {}", connect::describe(e)),
        transient: !auth,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::permissions::{Decision, decide_mcp};
    use mast_domain::tools::resolve_tools;

    #[test]
    fn policies_of_mcp_calls() {
        let tools = resolve_tools(&[json!({"type": "mcp_toolset", "mcp_server_name": "s",
            "configs": [{"name": "run", "permission_policy": {"type": "always_allow"}},
                        {"name": "off", "enabled": false},
                        {"name": "judge", "permission_policy": {"type": "auto"}}]})])
        .unwrap();
        // (server, tool) -> label, evaluation type
        let cases = [
            ("s", "run", "allow", Some("always_allow")),
            ("s", "other", "ask", Some("always_ask")),
            ("s", "judge", "ask", Some("auto")),
            ("s", "off", "deny", None),
            ("elsewhere", "run", "deny", None),
        ];
        for (server, tool, label, evaluation) in cases {
            let d = decide_mcp(&tools, server, tool);
            assert_eq!(d.label(), label, "{server} {tool}");
            assert_eq!(
                d.evaluation().and_then(|e| e["type"].as_str()),
                evaluation,
                "{server} {tool}"
            );
            if let Decision::Ask { evaluation } = &d
                && evaluation["type"] == "auto"
            {
                assert_eq!(
                    evaluation["evaluated_permission"]["reason_code"],
                    "indeterminate"
                );
            }
        }
    }
}
