//! Memory stores themselves: create, read, update, list, archive (irreversible), delete;
//! and who a memory request acts as. Memories and their versions are in
//! [`super::memories`].

use super::OpError;
use crate::Engine;
use mast_domain::ids::new_id;
use mast_domain::keys::{WORK_TOKEN_PREFIX, hash_key};
use mast_domain::memory::{
    Actor, MemoryStore, MemoryStoreCreate, MemoryStoreTag, MemoryStoreUpdate,
};
use mast_domain::query::{MemoryStoreFilter, Scan};
use mast_domain::time;

impl Engine {
    /// Saves a new memory store.
    pub async fn create_memory_store(
        &self,
        ws: &str,
        create: MemoryStoreCreate,
    ) -> Result<MemoryStore, OpError> {
        let (name, description, metadata) = create.into_parts()?;
        let now = self.now();
        let store = MemoryStore {
            tag: MemoryStoreTag::Tag,
            id: new_id("memstore"),
            name,
            description,
            metadata,
            created_at: time::format(now),
            updated_at: time::format(now),
            archived_at: None,
        };
        self.inner
            .store
            .insert_memory_store(ws, &store, now)
            .await?;
        Ok(store)
    }

    /// One memory store of the workspace, archived or not.
    pub async fn memory_store(&self, ws: &str, id: &str) -> Result<MemoryStore, OpError> {
        self.inner
            .store
            .get_memory_store(ws, id)
            .await?
            .ok_or_else(|| OpError::MemoryStoreNotFound(id.to_string()))
    }

    /// Applies `update` (metadata is a patch); an update that changes nothing writes
    /// nothing, and an archived store takes none.
    pub async fn update_memory_store(
        &self,
        ws: &str,
        id: &str,
        update: MemoryStoreUpdate,
    ) -> Result<MemoryStore, OpError> {
        let mut store = self.memory_store(ws, id).await?;
        let Some((name, description, metadata)) = update.apply(&store)? else {
            return Ok(store);
        };
        let now = self.now();
        store.name = name;
        store.description = description;
        store.metadata = metadata;
        store.updated_at = time::format(now);
        self.inner
            .store
            .update_memory_store(ws, &store, now, false)
            .await?;
        Ok(store)
    }

    /// A page of the workspace's memory stores.
    pub async fn list_memory_stores(
        &self,
        ws: &str,
        filter: &MemoryStoreFilter,
        scan: &Scan<String>,
    ) -> Result<Vec<MemoryStore>, OpError> {
        Ok(self
            .inner
            .store
            .list_memory_stores(ws, filter, scan)
            .await?)
    }

    /// Archives the store for good; archiving again changes nothing.
    pub async fn archive_memory_store(&self, ws: &str, id: &str) -> Result<MemoryStore, OpError> {
        let mut store = self.memory_store(ws, id).await?;
        if store.archived_at.is_some() {
            return Ok(store);
        }
        let now = self.now();
        store.archived_at = Some(time::format(now));
        store.updated_at = time::format(now);
        self.inner
            .store
            .update_memory_store(ws, &store, now, true)
            .await?;
        Ok(store)
    }

    /// Deletes the store with every memory and version in it.
    pub async fn delete_memory_store(&self, ws: &str, id: &str) -> Result<(), OpError> {
        if !self.inner.store.delete_memory_store(ws, id).await? {
            return Err(OpError::MemoryStoreNotFound(id.to_string()));
        }
        Ok(())
    }

    /// Who a request presenting `key` acts as, for `created_by` and `redacted_by`: the API
    /// key's id, or the session of a self-hosted worker's work token (it writes as that
    /// session); nobody recorded for a key the store does not know.
    pub async fn memory_actor(&self, key: &str) -> Result<Option<Actor>, OpError> {
        let store = &self.inner.store;
        if key.starts_with(WORK_TOKEN_PREFIX) {
            return Ok(store
                .work_for_token(&hash_key(key))
                .await?
                .map(|w| Actor::SessionActor {
                    session_id: w.session_id,
                }));
        }
        Ok(store
            .api_key_id_for_hash(&hash_key(key))
            .await?
            .map(|api_key_id| Actor::ApiActor { api_key_id }))
    }
}
