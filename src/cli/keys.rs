//! `mast keys create|list|revoke`: API keys (and environments' worker keys) in the store.
//!
//! These work on the store directly, with or without a server running. A revocation reaches
//! running servers at once: on Postgres the store tells every replica in the revoking
//! transaction, and a SQLite server does not cache keys (see `api::auth`).

use std::process::ExitCode;

use serde_json::json;

use super::StoreArgs;
use crate::api::auth::{ENVIRONMENT_KEY_PREFIX, hash_key};
use crate::domain::time;
use crate::store::{KeyKind, KeyRecord, Revocation};

/// `mast keys create`: prints the key alone on stdout (so `KEY=$(mast keys create)` works);
/// what was created where goes to stderr.
pub async fn create(
    store: &StoreArgs,
    workspace: &str,
    environment: Option<&str>,
) -> anyhow::Result<ExitCode> {
    let opened = store.open().await?;
    let s = opened.store.as_ref();
    let made = match environment {
        Some(env) => {
            let k = crate::mint_environment_key(s, workspace, env).await?;
            eprintln!(
                "created worker key {} for environment {env} (workspace `{workspace}`) in {}",
                k.id, opened.place
            );
            k
        }
        None => {
            let k = crate::mint_api_key(s, workspace).await?;
            eprintln!(
                "created API key {} for workspace `{workspace}` in {}",
                k.id, opened.place
            );
            k
        }
    };
    opened.warn_if_created();
    println!("{}", made.key);
    Ok(ExitCode::SUCCESS)
}

/// A key as `keys list --json` prints it.
fn key_json(k: &KeyRecord) -> serde_json::Value {
    let (kind, environment) = match &k.kind {
        KeyKind::Api => ("api_key", None),
        KeyKind::Environment { environment_id } => ("environment_key", Some(environment_id)),
    };
    json!({
        "id": k.id,
        "kind": kind,
        "workspace_id": k.workspace_id,
        "workspace": k.workspace_name,
        "environment_id": environment,
        "created_at": time::format(k.created_at),
        "revoked_at": time::format_opt(k.revoked_at),
    })
}

/// A time for a table: to the second, UTC.
fn short_time(micros: i64) -> String {
    super::table::short_time(&time::format(micros))
}

/// The table `keys list` prints.
pub fn table(keys: &[KeyRecord]) -> String {
    let rows: Vec<Vec<String>> = keys
        .iter()
        .map(|k| {
            let status = match (&k.kind, k.revoked_at) {
                (KeyKind::Api, None) => "active".to_string(),
                (KeyKind::Api, Some(at)) => format!("revoked {}", short_time(at)),
                (KeyKind::Environment { environment_id }, _) => {
                    format!("worker key of {environment_id}")
                }
            };
            vec![
                k.id.clone(),
                k.workspace_name.clone(),
                short_time(k.created_at),
                status,
            ]
        })
        .collect();
    super::table::render(&["ID", "WORKSPACE", "CREATED", "STATUS"], &rows)
}

/// `mast keys list`.
pub async fn list(store: &StoreArgs, as_json: bool) -> anyhow::Result<ExitCode> {
    let opened = store.open_existing().await?;
    let keys = opened.store.list_keys().await?;
    if as_json {
        let all: Vec<_> = keys.iter().map(key_json).collect();
        println!("{}", serde_json::to_string_pretty(&all)?);
        return Ok(ExitCode::SUCCESS);
    }
    if keys.is_empty() {
        eprintln!(
            "no keys in {}: the server runs open on loopback until one exists; create one with `mast keys create`",
            opened.place
        );
        return Ok(ExitCode::SUCCESS);
    }
    print!("{}", table(&keys));
    eprintln!("({} keys in {})", keys.len(), opened.place);
    Ok(ExitCode::SUCCESS)
}

/// `mast keys revoke ID`: by id, or by the key itself (a leaked key is what one has in hand).
pub async fn revoke(store: &StoreArgs, given: &str) -> anyhow::Result<ExitCode> {
    let opened = store.open_existing().await?;
    let s = opened.store.as_ref();
    let keys = s.list_keys().await?;
    let given = given.trim();
    let by_secret = given.starts_with(crate::domain::keys::API_KEY_PREFIX)
        || given.starts_with(ENVIRONMENT_KEY_PREFIX);
    let found = if by_secret {
        let hash = hash_key(given);
        keys.iter().find(|k| k.key_hash == hash)
    } else {
        keys.iter().find(|k| k.id == given)
    };
    let Some(key) = found else {
        eprintln!(
            "error: no key {} in {}; `mast keys list` shows the ids",
            if by_secret {
                "matches the one given".to_string()
            } else {
                format!("has the id `{given}`")
            },
            opened.place
        );
        return Ok(ExitCode::FAILURE);
    };
    match &key.kind {
        KeyKind::Environment { environment_id } => {
            // Worker keys are looked up on every request, so deleting one is enough.
            s.delete_environment_key(environment_id, &key.id).await?;
            eprintln!(
                "revoked worker key {} of environment {environment_id} (workspace `{}`) in {}; its workers get 401 from now on",
                key.id, key.workspace_name, opened.place
            );
        }
        KeyKind::Api => match s.revoke_api_key(&key.id).await? {
            Revocation::Revoked => {
                eprintln!(
                    "revoked API key {} (workspace `{}`) in {}; it is refused from now on by every server using this store",
                    key.id, key.workspace_name, opened.place
                );
                let active = keys
                    .iter()
                    .filter(|k| k.kind == KeyKind::Api && k.revoked_at.is_none() && k.id != key.id)
                    .count();
                if active == 0 {
                    eprintln!(
                        "warning: no active API key remains, so every request will be refused (a server does not \
                         go back to open mode); create one with `mast keys create`"
                    );
                }
            }
            Revocation::AlreadyRevoked(at) => eprintln!(
                "API key {} was already revoked at {}",
                key.id,
                short_time(at)
            ),
            Revocation::NotFound => {
                anyhow::bail!("API key {} disappeared while being revoked", key.id)
            }
        },
    }
    Ok(ExitCode::SUCCESS)
}
