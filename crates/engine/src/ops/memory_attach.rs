//! Attaching memory stores at session creation: each store named in `resources` exists in
//! the workspace and is not archived, and gets a mount path no other resource of the session
//! uses. The resource snapshots the store's name and description.

use super::OpError;
use crate::Engine;
use mast_domain::invalid::Invalid;
use mast_domain::memory::archived;
use mast_domain::memory_resource::{
    MemoryStoreParams, MemoryStoreResource, MemoryStoreResourceTag, mount_path,
};
use mast_domain::resource::{ResourceParams, check_free};
use mast_domain::session::SessionBody;

impl Engine {
    /// The resources attaching `list`, in order; refuses a store that is missing or archived,
    /// and two stores (or a store and a file or repository) that would share a mount path.
    pub(super) async fn resolve_memory_stores(
        &self,
        ws: &str,
        list: &[MemoryStoreParams],
        others: &[ResourceParams],
    ) -> Result<Vec<MemoryStoreResource>, OpError> {
        let mut out: Vec<MemoryStoreResource> = Vec::with_capacity(list.len());
        for p in list {
            let store = self
                .inner
                .store
                .get_memory_store(ws, &p.memory_store_id)
                .await?
                .ok_or_else(|| OpError::MemoryStoreNotFound(p.memory_store_id.clone()))?;
            if store.archived_at.is_some() {
                return Err(archived(&store.id, "it cannot be attached to new sessions").into());
            }
            let path = mount_path(&store.name, &store.id);
            let taken = out
                .iter()
                .map(|o| o.mount_path.as_str())
                .chain(others.iter().map(ResourceParams::mount_path));
            check_free(&p.at, taken, &path).map_err(|e| {
                Invalid::new(format!(
                    "{} (memory store `{}` named `{}` mounts at `{path}`; rename one of the stores)",
                    e.message, store.id, store.name
                ))
            })?;
            out.push(MemoryStoreResource {
                tag: MemoryStoreResourceTag::Tag,
                memory_store_id: store.id,
                access: p.access,
                instructions: p.instructions.clone(),
                name: store.name,
                description: store.description,
                mount_path: path,
            });
        }
        Ok(out)
    }
}

/// Appends the attached stores to the draft session's resources (after its files); true
/// when there were any, so the stored body must be written anew.
pub(super) fn add_to_body(
    body: &mut SessionBody,
    stores: Vec<MemoryStoreResource>,
) -> Result<bool, serde_json::Error> {
    if stores.is_empty() {
        return Ok(false);
    }
    for s in stores {
        body.resources.push(serde_json::to_value(s)?);
    }
    Ok(true)
}
