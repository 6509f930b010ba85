//! `mast webhooks …`: webhook endpoints on a running server, through
//! `/v1/mast/webhook_endpoints`. `create` and `rotate-secret` print the endpoint with its
//! signing secret, the only times it is shown.

use serde_json::{Value, json};

use super::ServerArgs;
use super::client::Api;

const ENDPOINTS: &str = "/v1/mast/webhook_endpoints";

/// What `mast webhooks create` sends.
#[derive(Debug, Clone, clap::Args)]
pub struct CreateArgs {
    /// The URL deliveries are POSTed to (`--url` is the server's address).
    #[arg(long = "endpoint-url")]
    pub endpoint_url: String,
    /// An event type it receives (`session.idled`, `agent.created`, …); repeat the flag for
    /// several.
    #[arg(long = "event-type", required = true)]
    pub event_types: Vec<String>,
    /// A note for people.
    #[arg(long)]
    pub description: Option<String>,
    /// Create it disabled (it receives nothing until enabled).
    #[arg(long)]
    pub disabled: bool,
}

/// The `POST /v1/mast/webhook_endpoints` body of `args`.
pub fn create_body(args: &CreateArgs) -> Value {
    let mut body = json!({"url": args.endpoint_url, "event_types": args.event_types});
    if let Some(d) = &args.description {
        body["description"] = json!(d);
    }
    if args.disabled {
        body["enabled"] = json!(false);
    }
    body
}

fn print(v: &Value) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(v)?);
    Ok(())
}

/// Creates an endpoint and prints it (with its secret) as JSON.
pub async fn create(server: &ServerArgs, args: &CreateArgs) -> anyhow::Result<()> {
    print(
        &Api::new(server)?
            .post(ENDPOINTS, &create_body(args))
            .await?,
    )
}

/// Prints the workspace's endpoints, one line each.
pub async fn list(server: &ServerArgs) -> anyhow::Result<()> {
    for e in Api::new(server)?.list_all(ENDPOINTS, 100).await? {
        let types: Vec<&str> = e["event_types"]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        println!(
            "{}\t{}\t{}\t{}",
            e["id"].as_str().unwrap_or(""),
            if e["enabled"] == true {
                "enabled"
            } else {
                "disabled"
            },
            e["url"].as_str().unwrap_or(""),
            types.join(",")
        );
    }
    Ok(())
}

/// Enables or disables an endpoint.
pub async fn set_enabled(server: &ServerArgs, id: &str, enabled: bool) -> anyhow::Result<()> {
    let api = Api::new(server)?;
    let e = api
        .post(&format!("{ENDPOINTS}/{id}"), &json!({"enabled": enabled}))
        .await?;
    println!(
        "{} {}",
        e["id"].as_str().unwrap_or(id),
        if enabled { "enabled" } else { "disabled" }
    );
    Ok(())
}

/// Gives an endpoint a new signing secret and prints it (the old one keeps signing for the
/// overlap window).
pub async fn rotate_secret(server: &ServerArgs, id: &str) -> anyhow::Result<()> {
    let api = Api::new(server)?;
    print(
        &api.post(&format!("{ENDPOINTS}/{id}/rotate_secret"), &json!({}))
            .await?,
    )
}

/// Prints an endpoint's deliveries, one line each: id, status, attempts, event type, last
/// status code or error.
pub async fn deliveries(server: &ServerArgs, id: &str) -> anyhow::Result<()> {
    let api = Api::new(server)?;
    for d in api
        .list_all(&format!("{ENDPOINTS}/{id}/deliveries"), 100)
        .await?
    {
        let last = match (&d["last_status_code"], &d["last_error"]) {
            (Value::Number(n), _) => n.to_string(),
            (_, Value::String(e)) => e.clone(),
            _ => String::new(),
        };
        println!(
            "{}\t{}\t{}\t{}\t{}",
            d["id"].as_str().unwrap_or(""),
            d["status"].as_str().unwrap_or(""),
            d["attempt_count"],
            d["event_type"].as_str().unwrap_or(""),
            last
        );
    }
    Ok(())
}

/// Queues a delivery again (same payload and `webhook-id`).
pub async fn replay(server: &ServerArgs, endpoint: &str, delivery: &str) -> anyhow::Result<()> {
    let api = Api::new(server)?;
    print(
        &api.post(
            &format!("{ENDPOINTS}/{endpoint}/deliveries/{delivery}/replay"),
            &json!({}),
        )
        .await?,
    )
}

/// Deletes an endpoint with its deliveries.
pub async fn delete(server: &ServerArgs, id: &str) -> anyhow::Result<()> {
    Api::new(server)?
        .delete(&format!("{ENDPOINTS}/{id}"))
        .await?;
    println!("deleted {id}");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_flags_become_the_api_body() {
        let args = CreateArgs {
            endpoint_url: "https://h.example/in".into(),
            event_types: vec!["session.idled".into(), "agent.created".into()],
            description: Some("ops".into()),
            disabled: true,
        };
        assert_eq!(
            create_body(&args),
            json!({"url": "https://h.example/in", "event_types": ["session.idled", "agent.created"],
                   "description": "ops", "enabled": false})
        );
    }
}
