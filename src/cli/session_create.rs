//! `mast sessions create --agent A [--environment E]`: a session of an agent, named by id
//! or name, in an environment. Prints the new id alone (so `S=$(mast sessions create …)`
//! works) and says on stderr what was made.

use serde_json::{Value, json};

use super::ServerArgs;
use super::client::Api;
use super::names::{self, Kind};

/// What `mast sessions create` sends.
#[derive(Debug, Clone, clap::Args)]
pub struct CreateArgs {
    /// The agent: its id or its name (its latest version runs).
    #[arg(long)]
    pub agent: String,
    /// The environment: its id or its name; may be left out when the server has exactly one.
    #[arg(long)]
    pub environment: Option<String>,
    /// A title for the session.
    #[arg(long)]
    pub title: Option<String>,
    /// Print the whole session as JSON instead of its id.
    #[arg(long)]
    pub json: bool,
}

/// The environment when none was named: the only one there is, or a refusal that says what
/// to do, since picking one of several would be a guess.
async fn only_environment(api: &Api) -> anyhow::Result<Value> {
    let all = api.list("/v1/environments", &[], 100, None).await?;
    match all.as_slice() {
        [one] => Ok(one.clone()),
        [] => anyhow::bail!(
            "the server has no environment to run a session in: create one (POST /v1/environments, \
             or the console at {}/console/) and pass --environment",
            api.base()
        ),
        several => {
            let mut shown: Vec<&str> = several.iter().filter_map(|e| e["name"].as_str()).collect();
            shown.sort_unstable();
            shown.truncate(10);
            if several.len() > shown.len() {
                shown.push("…");
            }
            anyhow::bail!(
                "pass --environment: the server has {} environments ({})",
                several.len(),
                shown.join(", ")
            )
        }
    }
}

/// The `POST /v1/sessions` body for a resolved agent and environment.
fn body(agent_id: &str, environment_id: &str, title: Option<&str>) -> Value {
    let mut body = json!({"agent": agent_id, "environment_id": environment_id});
    if let Some(t) = title {
        body["title"] = json!(t);
    }
    body
}

/// Creates the session and prints its id (or, with `--json`, the session).
pub async fn create(server: &ServerArgs, args: &CreateArgs) -> anyhow::Result<()> {
    let api = Api::new(server)?;
    let agent = names::resolve(&api, Kind::Agent, &args.agent).await?;
    let environment = match &args.environment {
        Some(e) => names::resolve(&api, Kind::Environment, e).await?,
        None => only_environment(&api).await?,
    };
    let session = api
        .post(
            "/v1/sessions",
            &body(
                agent["id"].as_str().unwrap_or_default(),
                environment["id"].as_str().unwrap_or_default(),
                args.title.as_deref(),
            ),
        )
        .await?;
    let id = session["id"].as_str().unwrap_or_default();
    eprintln!(
        "created session {id} of agent `{}` v{} in environment `{}`",
        session["agent"]["name"].as_str().unwrap_or("?"),
        session["agent"]["version"],
        environment["name"].as_str().unwrap_or("?"),
    );
    if args.json {
        println!("{}", serde_json::to_string_pretty(&session)?);
    } else {
        println!("{id}");
    }
    Ok(())
}
