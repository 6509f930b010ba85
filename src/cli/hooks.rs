//! `mast hooks create|list|delete`: hooks on a running server, through
//! `/v1/mast/hooks`. `create` prints the hook with its signing secret, the only time it is
//! shown.

use serde_json::{Value, json};

use super::ServerArgs;
use super::client::Api;

/// What `mast hooks create` sends.
#[derive(Debug, Clone, clap::Args)]
pub struct CreateArgs {
    /// The event: `pre_tool_use`, `post_tool_use`, `user_prompt_submit`, `stop`,
    /// `subagent_start` or `subagent_stop`.
    #[arg(long, default_value = "pre_tool_use")]
    pub event: String,
    /// The endpoint the signed call is POSTed to (`--url` is the server's address).
    #[arg(long = "endpoint-url")]
    pub endpoint_url: String,
    /// Names it sees (tools for `pre_tool_use`/`post_tool_use`, delegates for
    /// `subagent_start`/`subagent_stop`): exact names (`bash`, `write|edit`) or a regular
    /// expression searched in the name (`^mcp__`); every one when left out.
    #[arg(long)]
    pub matcher: Option<String>,
    /// Only threads running this agent.
    #[arg(long, conflicts_with = "environment")]
    pub agent: Option<String>,
    /// Only sessions in this environment.
    #[arg(long)]
    pub environment: Option<String>,
    /// How long one call may take (100–60000 ms; default 5000).
    #[arg(long)]
    pub timeout_ms: Option<u64>,
    /// Let the session go on as if allowed when the endpoint fails or times out
    /// (`failure_mode: allow`, the default of `stop` and `subagent_stop` hooks; for the others
    /// a failure denies the call, withholds the result, or blocks the message or delegation).
    #[arg(long)]
    pub fail_open: bool,
}

/// The `POST /v1/mast/hooks` body of `args`.
pub fn create_body(args: &CreateArgs) -> Value {
    let scope = match (&args.agent, &args.environment) {
        (Some(a), _) => json!({"type": "agent", "agent_id": a}),
        (None, Some(e)) => json!({"type": "environment", "environment_id": e}),
        (None, None) => json!({"type": "workspace"}),
    };
    let mut body = json!({"event": args.event, "url": args.endpoint_url, "scope": scope});
    if let Some(m) = &args.matcher {
        body["matcher"] = json!(m);
    }
    if let Some(t) = args.timeout_ms {
        body["timeout_ms"] = json!(t);
    }
    if args.fail_open {
        body["failure_mode"] = json!("allow");
    }
    body
}

/// Creates a hook and prints it (with its secret) as JSON.
pub async fn create(server: &ServerArgs, args: &CreateArgs) -> anyhow::Result<()> {
    let api = Api::new(server)?;
    let hook = api.post("/v1/mast/hooks", &create_body(args)).await?;
    println!("{}", serde_json::to_string_pretty(&hook)?);
    Ok(())
}

/// Prints the workspace's hooks, one line each.
pub async fn list(server: &ServerArgs) -> anyhow::Result<()> {
    let api = Api::new(server)?;
    for h in api.list_all("/v1/mast/hooks", 100).await? {
        let scope = match h["scope"]["type"].as_str() {
            Some("agent") => format!("agent {}", h["scope"]["agent_id"].as_str().unwrap_or("")),
            Some("environment") => format!(
                "environment {}",
                h["scope"]["environment_id"].as_str().unwrap_or("")
            ),
            _ => "workspace".into(),
        };
        println!(
            "{}\t{}\t{}\t{}\t{}",
            h["id"].as_str().unwrap_or(""),
            h["event"].as_str().unwrap_or(""),
            h["matcher"].as_str().unwrap_or("*"),
            scope,
            h["url"].as_str().unwrap_or("")
        );
    }
    Ok(())
}

/// Deletes a hook.
pub async fn delete(server: &ServerArgs, id: &str) -> anyhow::Result<()> {
    let api = Api::new(server)?;
    api.delete(&format!("/v1/mast/hooks/{id}")).await?;
    println!("deleted {id}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_flags_become_the_api_body() {
        let args = CreateArgs {
            event: "pre_tool_use".into(),
            endpoint_url: "https://h.example/x".into(),
            matcher: Some("write|edit".into()),
            agent: Some("agent_1".into()),
            environment: None,
            timeout_ms: Some(800),
            fail_open: true,
        };
        assert_eq!(
            create_body(&args),
            json!({"event": "pre_tool_use", "url": "https://h.example/x",
                   "scope": {"type": "agent", "agent_id": "agent_1"}, "matcher": "write|edit",
                   "timeout_ms": 800, "failure_mode": "allow"})
        );
    }
}
