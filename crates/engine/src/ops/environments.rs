//! Environments: create, read, update, list, archive, delete. Names are unique in a
//! workspace, an update that changes nothing writes nothing, and an environment that live
//! sessions use is not deleted.

use super::OpError;
use crate::Engine;
use mast_domain::environment::{
    Environment, EnvironmentCreate, EnvironmentSpec, EnvironmentTag, EnvironmentUpdate,
};
use mast_domain::ids::new_id;
use mast_domain::query::Scan;
use mast_domain::time;
use mast_store::{EnvironmentDeletion, StoreError};

impl Engine {
    /// Saves a new environment.
    pub async fn create_environment(
        &self,
        ws: &str,
        create: EnvironmentCreate,
    ) -> Result<Environment, OpError> {
        let spec = create.into_spec()?;
        let now = self.now();
        let env = build(
            &new_id("env"),
            spec,
            time::format(now),
            time::format(now),
            None,
        );
        self.inner
            .store
            .insert_environment(ws, &env, now)
            .await
            .map_err(|e| name_taken(e, &env.name))?;
        Ok(env)
    }

    /// One environment of the workspace.
    pub async fn environment(&self, ws: &str, id: &str) -> Result<Environment, OpError> {
        self.inner
            .store
            .get_environment(ws, id)
            .await?
            .ok_or_else(|| OpError::EnvironmentNotFound(id.to_string()))
    }

    /// Applies `update`; sessions started afterwards use the result.
    pub async fn update_environment(
        &self,
        ws: &str,
        id: &str,
        update: EnvironmentUpdate,
    ) -> Result<Environment, OpError> {
        let current = self.environment(ws, id).await?;
        let spec = update.apply(&current)?;
        let now = self.now();
        let env = build(
            id,
            spec,
            current.created_at.clone(),
            time::format(now),
            None,
        );
        if env.name == current.name
            && env.description == current.description
            && env.config == current.config
            && env.metadata == current.metadata
            && env.scope == current.scope
        {
            return Ok(current);
        }
        self.inner
            .store
            .update_environment(ws, &env, now, false)
            .await
            .map_err(|e| name_taken(e, &env.name))?;
        Ok(env)
    }

    /// A page of the workspace's environments.
    pub async fn list_environments(
        &self,
        ws: &str,
        include_archived: bool,
        scan: &Scan<String>,
    ) -> Result<Vec<Environment>, OpError> {
        Ok(self
            .inner
            .store
            .list_environments(ws, include_archived, scan)
            .await?)
    }

    /// Archives the environment (no new sessions start in it); archiving twice is a no-op.
    pub async fn archive_environment(&self, ws: &str, id: &str) -> Result<Environment, OpError> {
        let mut env = self.environment(ws, id).await?;
        if env.archived_at.is_some() {
            return Ok(env);
        }
        let now = self.now();
        env.archived_at = Some(time::format(now));
        env.updated_at = time::format(now);
        self.inner
            .store
            .update_environment(ws, &env, now, true)
            .await?;
        Ok(env)
    }

    /// Deletes the environment with its worker keys and work queue, unless sessions that are
    /// not archived use it.
    pub async fn delete_environment(&self, ws: &str, id: &str) -> Result<(), OpError> {
        match self.inner.store.delete_environment(ws, id).await? {
            EnvironmentDeletion::Deleted => Ok(()),
            EnvironmentDeletion::Missing => Err(OpError::EnvironmentNotFound(id.to_string())),
            EnvironmentDeletion::InUse { sessions, total } => Err(OpError::Conflict(format!(
                "environment `{id}` is used by {total} session{} that {} not archived ({}{}); archive or delete {} first, \
                 or archive the environment instead (no new sessions start in it, existing ones carry on)",
                if total == 1 { "" } else { "s" },
                if total == 1 { "is" } else { "are" },
                sessions.join(", "),
                if total > sessions.len() as i64 {
                    ", …"
                } else {
                    ""
                },
                if total == 1 { "it" } else { "them" },
            ))),
        }
    }
}

fn name_taken(e: StoreError, name: &str) -> OpError {
    match e {
        StoreError::Conflict(_) => {
            OpError::Conflict(format!("an environment named `{name}` already exists"))
        }
        e => e.into(),
    }
}

fn build(
    id: &str,
    spec: EnvironmentSpec,
    created_at: String,
    updated_at: String,
    archived_at: Option<String>,
) -> Environment {
    Environment {
        tag: EnvironmentTag::Tag,
        id: id.to_string(),
        name: spec.name,
        description: spec.description,
        config: spec.config,
        metadata: spec.metadata,
        scope: spec.scope,
        created_at,
        updated_at,
        archived_at,
    }
}
