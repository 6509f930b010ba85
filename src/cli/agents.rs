//! `mast agents apply FILE`: agents kept as files (in a repository, reviewed like code) made
//! real on a server. The file says what each agent is; apply creates the ones missing and
//! updates the ones that differ, and the server keeps an update that changes nothing as the
//! same version, so applying twice is harmless.
//!
//! A file holds one agent (a mapping), a list of them, or several YAML documents; JSON is
//! read too. Each is matched to an existing agent by `id` when it has one, else by `name`.
//! What the file leaves out is cleared on update (no system prompt in the file means none on
//! the agent), except `name` and `model`, which an agent always has.

use std::collections::HashSet;
use std::path::Path;
use std::process::ExitCode;

use serde::Deserialize as _;
use serde_json::{Map, Value};

use super::ServerArgs;
use super::client::{Api, CallError};

/// Fields of an agent a file may set (`POST /v1/agents`), plus `id` to pin which agent.
const FIELDS: &[&str] = &[
    "id",
    "name",
    "model",
    "description",
    "system",
    "tools",
    "mcp_servers",
    "skills",
    "multiagent",
    "execution_identity",
    "metadata",
];
/// Fields cleared on update when the file leaves them out.
const CLEARED_WHEN_ABSENT: &[&str] = &[
    "description",
    "system",
    "tools",
    "mcp_servers",
    "skills",
    "multiagent",
    "execution_identity",
];

/// One agent as the file describes it.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentFile {
    /// Where it is in the file, for messages: `agent 2 (\`reviewer\`)`.
    pub label: String,
    /// The agent it is, when the file pins it.
    pub id: Option<String>,
    /// Its name, by which it is matched when there is no `id`.
    pub name: Option<String>,
    /// The fields as written, without `id`.
    pub body: Map<String, Value>,
}

/// Levenshtein distance, for "did you mean".
fn distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// Reads the agents of a file's text: JSON when it looks like JSON, else YAML (one document
/// or several). Checks each entry's shape, so a typo fails before anything is sent.
pub fn parse(text: &str, json_hint: bool) -> anyhow::Result<Vec<AgentFile>> {
    let trimmed = text.trim_start();
    let docs: Vec<Value> = if json_hint || trimmed.starts_with('{') || trimmed.starts_with('[') {
        match serde_json::from_str(text) {
            Ok(v) => vec![v],
            Err(json_err) if json_hint => anyhow::bail!("not valid JSON: {json_err}"),
            Err(_) => yaml_documents(text)?,
        }
    } else {
        yaml_documents(text)?
    };
    let mut entries = Vec::new();
    for doc in docs {
        match doc {
            Value::Null => {}
            Value::Array(items) => entries.extend(items),
            v => entries.push(v),
        }
    }
    anyhow::ensure!(!entries.is_empty(), "the file describes no agent");
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for (i, entry) in entries.into_iter().enumerate() {
        let n = i + 1;
        let Value::Object(mut body) = entry else {
            anyhow::bail!("agent {n}: expected a mapping of fields (name, model, …)");
        };
        let name = match body.get("name") {
            None => None,
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
            Some(_) => anyhow::bail!("agent {n}: `name` must be a non-empty string"),
        };
        let label = match &name {
            Some(name) => format!("agent {n} (`{name}`)"),
            None => format!("agent {n}"),
        };
        for key in body.keys() {
            if !FIELDS.contains(&key.as_str()) {
                let near = FIELDS
                    .iter()
                    .filter(|f| distance(f, key) <= 2)
                    .min_by_key(|f| distance(f, key));
                match near {
                    Some(f) => {
                        anyhow::bail!("{label}: unknown field `{key}` (did you mean `{f}`?)")
                    }
                    None => anyhow::bail!(
                        "{label}: unknown field `{key}`; an agent has {}",
                        FIELDS[1..].join(", ")
                    ),
                }
            }
        }
        let id = match body.remove("id") {
            None => None,
            Some(Value::String(s)) if !s.trim().is_empty() => Some(s.trim().to_string()),
            Some(_) => anyhow::bail!("{label}: `id` must be an agent id string"),
        };
        let key = match (&id, &name) {
            (Some(id), _) => format!("id {id}"),
            (None, Some(name)) => format!("name {name}"),
            (None, None) => anyhow::bail!("{label}: needs a `name` (or the `id` of an agent)"),
        };
        anyhow::ensure!(
            seen.insert(key.clone()),
            "{label}: another agent in the file has the same {key}"
        );
        out.push(AgentFile {
            label,
            id,
            name,
            body,
        });
    }
    Ok(out)
}

fn yaml_documents(text: &str) -> anyhow::Result<Vec<Value>> {
    serde_norway::Deserializer::from_str(text)
        .map(|doc| Value::deserialize(doc).map_err(|e| anyhow::anyhow!("not valid YAML: {e}")))
        .collect()
}

/// The update that makes `current` what the file says: fields the file leaves out are
/// cleared (null), metadata keys it leaves out are deleted, and the current version is
/// named so a concurrent edit is refused rather than overwritten.
pub fn update_body(file: &AgentFile, current: &Value) -> Value {
    let mut body = file.body.clone();
    for field in CLEARED_WHEN_ABSENT {
        body.entry(*field).or_insert(Value::Null);
    }
    let mut metadata = match body.remove("metadata") {
        Some(Value::Object(m)) => m,
        _ => Map::new(),
    };
    if let Some(old) = current["metadata"].as_object() {
        for k in old.keys() {
            metadata.entry(k.clone()).or_insert(Value::Null);
        }
    }
    body.insert("metadata".into(), Value::Object(metadata));
    body.insert("version".into(), current["version"].clone());
    Value::Object(body)
}

/// What applying one agent did.
fn outcome(verb: &str, agent: &Value) -> String {
    format!(
        "{verb} {} v{} ({})",
        agent["id"].as_str().unwrap_or("?"),
        agent["version"],
        agent["name"].as_str().unwrap_or("?")
    )
}

/// Applies one agent; returns the line saying what happened.
async fn apply_one(
    api: &Api,
    file: &AgentFile,
    existing: &mut Option<Vec<Value>>,
) -> Result<String, anyhow::Error> {
    let current = match (&file.id, &file.name) {
        (Some(id), _) => match api.get(&format!("/v1/agents/{id}")).await {
            Ok(a) => Some(a),
            Err(CallError::Status { status: 404, .. }) => anyhow::bail!(
                "there is no agent `{id}` on this server (leave `id` out to create the agent by name)"
            ),
            Err(e) => return Err(e.into()),
        },
        (None, Some(name)) => {
            if existing.is_none() {
                *existing = Some(api.list_all("/v1/agents", 100).await?);
            }
            let same: Vec<&Value> = existing
                .iter()
                .flatten()
                .filter(|a| a["name"].as_str() == Some(name))
                .collect();
            match same.as_slice() {
                [] => None,
                [one] => Some((*one).clone()),
                several => anyhow::bail!(
                    "{} agents are named `{name}` ({}); add `id:` to say which one this is",
                    several.len(),
                    several
                        .iter()
                        .filter_map(|a| a["id"].as_str())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            }
        }
        (None, None) => unreachable!("parse requires a name or an id"),
    };
    Ok(match current {
        None => outcome(
            "created",
            &api.post("/v1/agents", &Value::Object(file.body.clone()))
                .await?,
        ),
        Some(current) => {
            let id = current["id"].as_str().unwrap_or_default();
            let after = api
                .post(&format!("/v1/agents/{id}"), &update_body(file, &current))
                .await?;
            let verb = if after["version"] == current["version"] {
                "unchanged"
            } else {
                "updated"
            };
            outcome(verb, &after)
        }
    })
}

/// `mast agents apply FILE`: one line per agent on stdout; stops at the first agent the
/// server refuses (later ones may depend on it), exiting 1.
pub async fn apply(server: &ServerArgs, path: &Path) -> anyhow::Result<ExitCode> {
    let (text, shown) = if path.as_os_str() == "-" {
        (std::io::read_to_string(std::io::stdin())?, "stdin".into())
    } else {
        let text = std::fs::read_to_string(path)
            .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", path.display()))?;
        (text, path.display().to_string())
    };
    let json_hint = path.extension().is_some_and(|e| e == "json");
    let files = parse(&text, json_hint).map_err(|e| anyhow::anyhow!("{shown}: {e:#}"))?;
    let api = Api::new(server)?;
    let mut existing = None;
    for file in &files {
        match apply_one(&api, file, &mut existing).await {
            Ok(line) => println!("{line}"),
            Err(e) => {
                eprintln!("error: {shown}: {}: {e:#}", file.label);
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// An agent's model id: the API gives a model config (`{"id": …}`); a bare string is read too.
fn model_id(agent: &Value) -> &str {
    agent["model"]["id"]
        .as_str()
        .or(agent["model"].as_str())
        .unwrap_or("?")
}

/// `mast agents list`: the workspace's agents as a table (id, name, latest version, model,
/// last update), or with `json` the API's agent objects as one array; every page, or the
/// first `limit` agents.
pub async fn list(server: &ServerArgs, limit: Option<u32>, json: bool) -> anyhow::Result<()> {
    let api = Api::new(server)?;
    let agents = api
        .list("/v1/agents", &[], 100, limit.map(|l| l as usize))
        .await?;
    if json {
        println!("{}", serde_json::to_string_pretty(&agents)?);
        return Ok(());
    }
    if agents.is_empty() {
        eprintln!(
            "no agents on {}; `mast agents apply FILE` creates them",
            api.base()
        );
        return Ok(());
    }
    let rows: Vec<Vec<String>> = agents
        .iter()
        .map(|a| {
            vec![
                a["id"].as_str().unwrap_or("?").to_string(),
                super::table::cell(a["name"].as_str().unwrap_or_default(), 40),
                format!("v{}", a["version"]),
                model_id(a).to_string(),
                super::table::short_time(a["updated_at"].as_str().unwrap_or_default()),
            ]
        })
        .collect();
    print!(
        "{}",
        super::table::render(&["ID", "NAME", "VERSION", "MODEL", "UPDATED"], &rows)
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_yaml_lists_documents_and_json() {
        let yaml = "name: a\nmodel: mast-scripted\n---\n- name: b\n  model: mast-scripted\n  system: |\n    two\n    lines\n";
        let agents = parse(yaml, false).unwrap();
        assert_eq!(agents.len(), 2);
        assert_eq!(agents[1].body["system"], "two\nlines\n");
        let json = r#"[{"id": "agent_1", "model": "m"}, {"name": "c", "model": "m"}]"#;
        let agents = parse(json, true).unwrap();
        assert_eq!(agents[0].id.as_deref(), Some("agent_1"));
        assert!(!agents[0].body.contains_key("id"));
        assert_eq!(agents[1].label, "agent 2 (`c`)");
    }

    #[test]
    fn refuses_typos_and_duplicates_before_sending_anything() {
        let e = parse("name: a\nmodel: m\nsytem: hi\n", false).unwrap_err();
        assert_eq!(
            e.to_string(),
            "agent 1 (`a`): unknown field `sytem` (did you mean `system`?)"
        );
        let e = parse("- name: a\n  model: m\n- name: a\n  model: n\n", false).unwrap_err();
        assert!(e.to_string().contains("same name a"), "{e}");
        assert!(parse("model: m\n", false).is_err(), "needs a name");
        assert!(parse("just text", false).is_err());
        assert!(parse("name: [unclosed", false).is_err());
        assert!(parse("", false).is_err());
    }

    #[test]
    fn an_update_clears_what_the_file_leaves_out() {
        let file = parse("name: a\nmodel: m\nmetadata: {team: x}\n", false)
            .unwrap()
            .remove(0);
        let current = json!({"id": "agent_1", "version": 3, "metadata": {"team": "y", "old": "z"}});
        let body = update_body(&file, &current);
        assert_eq!(body["version"], 3);
        assert_eq!(body["system"], Value::Null);
        assert_eq!(body["tools"], Value::Null);
        assert_eq!(body["metadata"], json!({"team": "x", "old": null}));
        assert_eq!(body["model"], "m");
    }
}
