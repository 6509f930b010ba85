//! A memory store's memories and their versions: every create, change and delete is one
//! store write that also records an immutable version naming its author; a version can be
//! redacted unless it holds a memory's current content.

use super::OpError;
use crate::Engine;
use crate::memory::ListPage;
use mast_domain::ids::new_id;
use mast_domain::invalid::Invalid;
use mast_domain::memory::{self, Actor, Memory, MemoryVersion};
use mast_domain::query::{MemoryVersionFilter, Scan};
use mast_store::memory::{MAX_MEMORIES_PER_STORE, MemoryChange};
use mast_store::{MemoryWrite, MemoryWriteOutcome, RedactOutcome, StoreError};

/// What an update asks of a memory: a new path and/or new content, applied only while its
/// content has `expected_sha256` when that is given.
#[derive(Debug, Clone, Default)]
pub struct MemoryEdit {
    pub path: Option<String>,
    pub content: Option<String>,
    pub expected_sha256: Option<String>,
}

impl Engine {
    /// Creates a memory at `path` and records its `created` version.
    pub async fn create_memory(
        &self,
        ws: &str,
        store_id: &str,
        path: String,
        content: String,
        actor: Option<Actor>,
    ) -> Result<Memory, OpError> {
        let change = MemoryChange::Create {
            id: new_id("mem"),
            path,
            content,
        };
        self.write_memory(ws, store_id, change, None, actor)
            .await?
            .ok_or_else(|| internal("a created memory came back empty"))
    }

    /// Replaces a memory's content and/or path, recording a `modified` version; with
    /// `expected_sha256`, only while its content still has that hash. A change to nothing
    /// records nothing.
    pub async fn update_memory(
        &self,
        ws: &str,
        store_id: &str,
        id: &str,
        edit: MemoryEdit,
        actor: Option<Actor>,
    ) -> Result<Memory, OpError> {
        let change = MemoryChange::Update {
            id: id.to_string(),
            path: edit.path,
            content: edit.content,
        };
        self.write_memory(ws, store_id, change, edit.expected_sha256, actor)
            .await?
            .ok_or_else(|| OpError::MemoryNotFound(id.to_string()))
    }

    /// Deletes a memory, recording a `deleted` version; with `expected_sha256`, only while
    /// its content still has that hash.
    pub async fn delete_memory(
        &self,
        ws: &str,
        store_id: &str,
        id: &str,
        expected_sha256: Option<String>,
        actor: Option<Actor>,
    ) -> Result<(), OpError> {
        let change = MemoryChange::Delete { id: id.to_string() };
        self.write_memory(ws, store_id, change, expected_sha256, actor)
            .await?;
        Ok(())
    }

    /// One memory of the store.
    pub async fn memory(&self, ws: &str, store_id: &str, id: &str) -> Result<Memory, OpError> {
        self.memory_store(ws, store_id).await?;
        self.inner
            .store
            .get_memory(ws, store_id, id)
            .await?
            .ok_or_else(|| OpError::MemoryNotFound(id.to_string()))
    }

    /// A page of the store's tree below `prefix` at `depth`, from the path bound `from`.
    pub async fn list_memories(
        &self,
        ws: &str,
        store_id: &str,
        prefix: &str,
        depth: usize,
        from: Option<String>,
        limit: usize,
    ) -> Result<ListPage, OpError> {
        self.memory_store(ws, store_id).await?;
        Ok(crate::memory::list_page(
            self.inner.store.as_ref(),
            ws,
            store_id,
            prefix,
            depth,
            from,
            limit,
        )
        .await?)
    }

    /// A page of the store's versions that `filter` keeps, newest first.
    pub async fn list_memory_versions(
        &self,
        ws: &str,
        store_id: &str,
        filter: &MemoryVersionFilter,
        scan: &Scan<String>,
    ) -> Result<Vec<MemoryVersion>, OpError> {
        self.memory_store(ws, store_id).await?;
        Ok(self
            .inner
            .store
            .list_memory_versions(ws, store_id, filter, scan)
            .await?)
    }

    /// One version of the store.
    pub async fn memory_version(
        &self,
        ws: &str,
        store_id: &str,
        id: &str,
    ) -> Result<MemoryVersion, OpError> {
        self.memory_store(ws, store_id).await?;
        self.inner
            .store
            .get_memory_version(ws, store_id, id)
            .await?
            .ok_or_else(|| OpError::MemoryVersionNotFound(id.to_string()))
    }

    /// Removes a version's content, path and hash for good; not the version holding a
    /// memory's current content.
    pub async fn redact_memory_version(
        &self,
        ws: &str,
        store_id: &str,
        id: &str,
        by: Option<Actor>,
    ) -> Result<MemoryVersion, OpError> {
        self.memory_store(ws, store_id).await?;
        match self
            .inner
            .store
            .redact_memory_version(ws, store_id, id, by.as_ref(), self.now())
            .await?
        {
            RedactOutcome::Redacted(v) => Ok(*v),
            RedactOutcome::NotFound => Err(OpError::MemoryVersionNotFound(id.to_string())),
            RedactOutcome::Current => Err(Invalid::new(format!(
                "memory version `{id}` holds its memory's current content: update or delete the memory before redacting it"
            ))
            .into()),
        }
    }

    async fn write_memory(
        &self,
        ws: &str,
        store_id: &str,
        change: MemoryChange,
        expected_sha256: Option<String>,
        actor: Option<Actor>,
    ) -> Result<Option<Memory>, OpError> {
        let memory_id = change.memory_id().to_string();
        let w = MemoryWrite {
            store_id: store_id.to_string(),
            change,
            expected_sha256,
            version_id: new_id("memver"),
            actor,
            at: self.now(),
        };
        match self.inner.store.write_memory(ws, &w).await? {
            MemoryWriteOutcome::Written { memory, .. } => Ok(memory),
            MemoryWriteOutcome::Unchanged(m) => Ok(Some(m)),
            o => Err(refused(o, store_id, &memory_id)),
        }
    }
}

/// Why a write did not apply.
fn refused(o: MemoryWriteOutcome, store_id: &str, memory_id: &str) -> OpError {
    match o {
        MemoryWriteOutcome::StoreNotFound => OpError::MemoryStoreNotFound(store_id.to_string()),
        MemoryWriteOutcome::StoreArchived => {
            memory::archived(store_id, "its memories cannot be created or changed").into()
        }
        MemoryWriteOutcome::MemoryNotFound => OpError::MemoryNotFound(memory_id.to_string()),
        MemoryWriteOutcome::PathTaken { memory_id: holder } => OpError::MemoryPathTaken(holder),
        MemoryWriteOutcome::PreconditionFailed { current_sha256 } => {
            OpError::MemoryPreconditionFailed(current_sha256)
        }
        MemoryWriteOutcome::StoreFull => Invalid::with_code(
            "memory_store_full",
            format!(
                "memory store `{store_id}` already holds {MAX_MEMORIES_PER_STORE} memories, the most a store may hold; \
                 delete some before creating more"
            ),
        )
        .into(),
        MemoryWriteOutcome::Written { .. } | MemoryWriteOutcome::Unchanged(_) => {
            internal("a written memory reported as refused")
        }
    }
}

fn internal(what: &'static str) -> OpError {
    OpError::Store(StoreError::Internal(anyhow::anyhow!(what)))
}
