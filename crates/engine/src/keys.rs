//! Credentials as the API and the CLI see them: API keys, environment keys and work tokens,
//! looked up by their hash, and new API keys minted. Keys are stored hashed
//! ([`mast_domain::keys::hash_key`]); the key itself is shown once, when it is made.

use std::sync::Arc;

use mast_domain::keys::{API_KEY_PREFIX, ENVIRONMENT_KEY_PREFIX, hash_key};
use mast_domain::time;
use mast_domain::work::{EnvironmentKey, EnvironmentKeyTag};
use mast_store::{Store, StoreResult};

pub use mast_store::{KeyKind, KeyRecord, WorkRecord};

/// The credential lookups and key minting, over the store.
#[derive(Clone)]
pub struct Keys {
    store: Arc<dyn Store>,
}

/// A key just made: shown once, then only its hash is stored.
#[derive(Debug, Clone)]
pub struct NewKey {
    /// The key's id (`apikey_…` or `envkey_…`), by which it is listed and revoked.
    pub id: String,
    /// The workspace it belongs to.
    pub workspace_id: String,
    /// The key itself.
    pub key: String,
}

impl Keys {
    /// Credentials kept in `store`.
    pub fn new(store: Arc<dyn Store>) -> Self {
        Keys { store }
    }

    /// The workspace of the unrevoked API key with this hash, if any.
    pub async fn workspace_for_key(&self, key_hash: &str) -> StoreResult<Option<String>> {
        self.store.workspace_for_key(key_hash).await
    }

    /// How many API keys were ever created, revoked ones included: zero means the server may
    /// run open.
    pub async fn count_api_keys(&self) -> StoreResult<i64> {
        self.store.count_api_keys().await
    }

    /// The (workspace, environment) of the unrevoked environment key with this hash.
    pub async fn environment_for_key(
        &self,
        key_hash: &str,
    ) -> StoreResult<Option<(String, String)>> {
        self.store.environment_for_key(key_hash).await
    }

    /// The live work item whose sessions token has this hash.
    pub async fn work_for_token(&self, token_hash: &str) -> StoreResult<Option<WorkRecord>> {
        self.store.work_for_token(token_hash).await
    }

    /// Every credential of every workspace, API keys then environment keys, oldest first.
    pub async fn list(&self) -> StoreResult<Vec<KeyRecord>> {
        self.store.list_keys().await
    }

    /// Makes a new API key for `workspace` (created if missing).
    pub async fn mint_api_key(&self, workspace: &str) -> StoreResult<NewKey> {
        mint_api_key(self.store.as_ref(), workspace).await
    }
}

/// Makes a new API key for `workspace` (created if missing) in `store`: for callers holding
/// a store of their own (the CLI, before any server runs).
pub async fn mint_api_key(store: &dyn Store, workspace: &str) -> StoreResult<NewKey> {
    let ws = store.ensure_workspace(workspace).await?;
    let key = format!("{API_KEY_PREFIX}{}", mast_domain::ids::new_secret(48));
    let id = mast_domain::ids::new_id("apikey");
    store.insert_api_key(&id, &ws, &hash_key(&key)).await?;
    Ok(NewKey {
        id,
        workspace_id: ws,
        key,
    })
}

/// Makes a new worker key for environment `env_id` of `ws` in `store`, shown once; only its
/// hash is stored. The caller has checked the environment is self-hosted.
pub async fn mint_environment_key(
    store: &dyn Store,
    ws: &str,
    env_id: &str,
) -> StoreResult<EnvironmentKey> {
    let key = format!(
        "{ENVIRONMENT_KEY_PREFIX}{}",
        mast_domain::ids::new_secret(48)
    );
    let id = mast_domain::ids::new_id("envkey");
    store
        .insert_environment_key(&id, ws, env_id, &hash_key(&key))
        .await?;
    Ok(EnvironmentKey {
        tag: EnvironmentKeyTag::Tag,
        id,
        environment_id: env_id.to_string(),
        created_at: time::format(store.clock().now()),
        key: Some(key),
    })
}
