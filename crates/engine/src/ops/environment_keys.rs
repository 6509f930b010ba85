//! A self-hosted environment's worker keys: minted with an API key and shown once, listed
//! without the keys themselves, revoked at once.

use super::OpError;
use crate::Engine;
use mast_domain::invalid::Invalid;
use mast_domain::time;
use mast_domain::work::{EnvironmentKey, EnvironmentKeyTag};

impl Engine {
    /// Mints a worker key for a self-hosted, unarchived environment; the key is in the
    /// answer and nowhere else.
    pub async fn create_environment_key(
        &self,
        ws: &str,
        env_id: &str,
    ) -> Result<EnvironmentKey, OpError> {
        let env = self.self_hosted_environment(ws, env_id).await?;
        if env.archived_at.is_some() {
            return Err(Invalid::with_code(
                "environment_archived",
                format!("environment `{env_id}` is archived"),
            )
            .into());
        }
        Ok(crate::keys::mint_environment_key(&*self.inner.store, ws, env_id).await?)
    }

    /// The environment's live worker keys, oldest first, without their secrets.
    pub async fn list_environment_keys(
        &self,
        ws: &str,
        env_id: &str,
    ) -> Result<Vec<EnvironmentKey>, OpError> {
        self.self_hosted_environment(ws, env_id).await?;
        let keys = self.inner.store.list_environment_keys(env_id).await?;
        Ok(keys
            .into_iter()
            .map(|(id, created_at)| EnvironmentKey {
                tag: EnvironmentKeyTag::Tag,
                id,
                environment_id: env_id.to_string(),
                created_at: time::format(created_at),
                key: None,
            })
            .collect())
    }

    /// Revokes a worker key; its workers get 401 from their next request.
    pub async fn revoke_environment_key(
        &self,
        ws: &str,
        env_id: &str,
        key_id: &str,
    ) -> Result<(), OpError> {
        self.self_hosted_environment(ws, env_id).await?;
        if !self
            .inner
            .store
            .delete_environment_key(env_id, key_id)
            .await?
        {
            return Err(OpError::NotFound(format!(
                "environment key `{key_id}` not found"
            )));
        }
        Ok(())
    }
}
