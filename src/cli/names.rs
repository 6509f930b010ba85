//! Agents and environments named on the command line by id or by name: a person remembers
//! `reviewer`, a script keeps `agent_011C…`, and both should work. An id is tried as an id
//! first; anything else is looked up among the names, where an ambiguous or unknown one is
//! refused with what there is to choose from rather than guessed.

use serde_json::Value;

use super::client::{Api, CallError};

/// A kind of resource that can be named.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `/v1/agents`.
    Agent,
    /// `/v1/environments`.
    Environment,
}

impl Kind {
    fn path(self) -> &'static str {
        match self {
            Kind::Agent => "/v1/agents",
            Kind::Environment => "/v1/environments",
        }
    }

    /// The id prefix: only a value with it is worth a request by id.
    fn id_prefix(self) -> &'static str {
        match self {
            Kind::Agent => "agent_",
            Kind::Environment => "env_",
        }
    }

    /// The word for one, in messages.
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Agent => "agent",
            Kind::Environment => "environment",
        }
    }

    /// The words for several, in messages.
    fn plural(self) -> &'static str {
        match self {
            Kind::Agent => "agents",
            Kind::Environment => "environments",
        }
    }
}

/// The resource `given` names: the one with that id, else the one with that name. Archived
/// ones count only when no active one has the name, so an old namesake never makes a name
/// ambiguous.
pub async fn resolve(api: &Api, kind: Kind, given: &str) -> anyhow::Result<Value> {
    let given = given.trim();
    anyhow::ensure!(!given.is_empty(), "the {} is empty", kind.noun());
    // Ids are opaque, but asking for a name as an id would be a wasted request (and a
    // name may hold characters a path cannot).
    if given.starts_with(kind.id_prefix()) {
        match api.get(&format!("{}/{given}", kind.path())).await {
            Ok(found) => return Ok(found),
            Err(CallError::Status { status: 404, .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let all = api
        .list(kind.path(), &[("include_archived", "true")], 100, None)
        .await?;
    pick(kind, given, &all).cloned()
}

/// The one of `all` named `given` (see [`resolve`]), or why there is none.
pub fn pick<'a>(kind: Kind, given: &str, all: &'a [Value]) -> anyhow::Result<&'a Value> {
    let named = |archived: bool| -> Vec<&'a Value> {
        all.iter()
            .filter(|r| r["name"].as_str() == Some(given) && r["archived_at"].is_null() != archived)
            .collect()
    };
    let mut found = named(false);
    if found.is_empty() {
        found = named(true);
    }
    match found.as_slice() {
        [one] => Ok(one),
        [] => {
            let mut names: Vec<&str> = all
                .iter()
                .filter(|r| r["archived_at"].is_null())
                .filter_map(|r| r["name"].as_str())
                .collect();
            names.sort_unstable();
            names.dedup();
            let there = match names.len() {
                0 => format!("there are no {}", kind.plural()),
                n if n <= 10 => format!("{}: {}", kind.plural(), names.join(", ")),
                n => format!(
                    "{n} {}, among them {}, …",
                    kind.plural(),
                    names[..10].join(", ")
                ),
            };
            anyhow::bail!("no {} has the id or name `{given}` ({there})", kind.noun())
        }
        several => {
            let mut ids: Vec<&str> = several.iter().filter_map(|r| r["id"].as_str()).collect();
            ids.sort_unstable();
            anyhow::bail!(
                "{} {} are named `{given}` ({}): give the id instead",
                several.len(),
                kind.plural(),
                ids.join(", ")
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_name_picks_one_or_says_why_not() {
        let all = [
            json!({"id": "agent_1", "name": "coder", "archived_at": null}),
            json!({"id": "agent_2", "name": "twin", "archived_at": null}),
            json!({"id": "agent_3", "name": "twin", "archived_at": null}),
            json!({"id": "agent_4", "name": "coder", "archived_at": "2026-01-01T00:00:00Z"}),
            json!({"id": "agent_5", "name": "old", "archived_at": "2026-01-01T00:00:00Z"}),
        ];
        // (given, the id picked, or the error)
        let table: &[(&str, Result<&str, &str>)] = &[
            ("coder", Ok("agent_1")),
            ("old", Ok("agent_5")),
            (
                "twin",
                Err("2 agents are named `twin` (agent_2, agent_3): give the id instead"),
            ),
            (
                "nobody",
                Err("no agent has the id or name `nobody` (agents: coder, twin)"),
            ),
        ];
        for (given, want) in table {
            let got = pick(Kind::Agent, given, &all)
                .map(|a| a["id"].as_str().unwrap())
                .map_err(|e| e.to_string());
            assert_eq!(got, want.map_err(str::to_string), "{given}");
        }
        let e = pick(Kind::Environment, "dev", &[]).unwrap_err();
        assert_eq!(
            e.to_string(),
            "no environment has the id or name `dev` (there are no environments)"
        );
    }
}
