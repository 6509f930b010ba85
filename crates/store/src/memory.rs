//! The records and decisions of memory stores that both backends share: a
//! backend reads the rows a write needs under its store's lock, [`decide`] says what to do,
//! and the backend writes exactly that, so both stores answer every case the same way.

use mast_domain::memory::{
    Actor, Memory, MemoryTag, MemoryVersion, MemoryVersionTag, Operation, sha256_hex,
};
use mast_domain::time::{self, Micros};

pub use mast_domain::query::{MemoryStoreFilter, MemoryVersionFilter};

/// A change to one memory.
#[derive(Debug, Clone, PartialEq)]
pub enum MemoryChange {
    /// A new memory (`id` minted by the caller).
    Create {
        id: String,
        path: String,
        content: String,
    },
    /// New content and/or a new path for an existing memory.
    Update {
        id: String,
        path: Option<String>,
        content: Option<String>,
    },
    /// Deletes a memory (its versions stay).
    Delete { id: String },
}

impl MemoryChange {
    /// The memory the change is about.
    pub fn memory_id(&self) -> &str {
        match self {
            MemoryChange::Create { id, .. }
            | MemoryChange::Update { id, .. }
            | MemoryChange::Delete { id } => id,
        }
    }

    /// The path the change moves the memory to, if any.
    pub fn target_path(&self) -> Option<&str> {
        match self {
            MemoryChange::Create { path, .. } => Some(path),
            MemoryChange::Update { path, .. } => path.as_deref(),
            MemoryChange::Delete { .. } => None,
        }
    }
}

/// A write to a memory store, applied atomically with its version.
#[derive(Debug, Clone, PartialEq)]
pub struct MemoryWrite {
    pub store_id: String,
    pub change: MemoryChange,
    /// Applies only while the memory's content has this SHA-256.
    pub expected_sha256: Option<String>,
    /// The id of the version the write records.
    pub version_id: String,
    pub actor: Option<Actor>,
    pub at: Micros,
}

/// What a memory write did, or why it did nothing.
#[derive(Debug, Clone, PartialEq)]
pub enum MemoryWriteOutcome {
    /// Written: the memory as it now is (None once deleted) and the version recorded.
    Written {
        memory: Option<Memory>,
        version: Box<MemoryVersion>,
    },
    /// The update would change nothing; no version was written.
    Unchanged(Memory),
    StoreNotFound,
    /// Archived stores take no new or changed memories.
    StoreArchived,
    MemoryNotFound,
    /// Another memory has the target path.
    PathTaken {
        memory_id: String,
    },
    /// The memory's content no longer has the expected SHA-256.
    PreconditionFailed {
        current_sha256: String,
    },
    /// A create in a store that already holds [`MAX_MEMORIES_PER_STORE`] memories.
    StoreFull,
}

pub use mast_domain::memory_resource::MAX_MEMORIES_PER_STORE;

/// What a backend must write for a [`MemoryWrite`].
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Refuse (or report no change) with this outcome; write nothing.
    Answer(MemoryWriteOutcome),
    /// Insert this memory (create) and the version.
    Insert(Memory, MemoryVersion),
    /// Replace the memory's row with this one, and insert the version.
    Replace(Memory, MemoryVersion),
    /// Delete the memory's row, and insert the version.
    Remove(MemoryVersion),
}

/// The store row a write sees: whether it exists and is archived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreState {
    Missing,
    Live,
    Archived,
}

fn version(
    w: &MemoryWrite,
    memory_id: &str,
    op: Operation,
    content: Option<(&str, &str)>,
) -> MemoryVersion {
    MemoryVersion {
        tag: MemoryVersionTag::Tag,
        id: w.version_id.clone(),
        memory_id: memory_id.to_string(),
        memory_store_id: w.store_id.clone(),
        operation: op,
        created_at: time::format(w.at),
        path: content.map(|(p, _)| p.to_string()),
        content: content.and_then(|(_, c)| (op != Operation::Deleted).then(|| c.to_string())),
        content_sha256: content
            .filter(|_| op != Operation::Deleted)
            .map(|(_, c)| sha256_hex(c)),
        content_size_bytes: content
            .filter(|_| op != Operation::Deleted)
            .map(|(_, c)| c.len() as i64),
        created_by: w.actor.clone(),
        redacted_at: None,
        redacted_by: None,
    }
}

/// Decides a write from the rows it read: the store's state, the memory it addresses
/// (updates and deletes), the id of the memory holding the target path, if any, and how
/// many memories the store holds (read for creates only; 0 otherwise).
pub fn decide(
    w: &MemoryWrite,
    store: StoreState,
    current: Option<&Memory>,
    path_holder: Option<&str>,
    held: usize,
) -> Decision {
    use MemoryWriteOutcome as O;
    let deleting = matches!(w.change, MemoryChange::Delete { .. });
    match store {
        StoreState::Missing => return Decision::Answer(O::StoreNotFound),
        StoreState::Archived if !deleting => return Decision::Answer(O::StoreArchived),
        _ => {}
    }
    if let MemoryChange::Create { id, path, content } = &w.change {
        if let Some(holder) = path_holder {
            return Decision::Answer(O::PathTaken {
                memory_id: holder.to_string(),
            });
        }
        if held >= MAX_MEMORIES_PER_STORE {
            return Decision::Answer(O::StoreFull);
        }
        let v = version(w, id, Operation::Created, Some((path, content)));
        let m = Memory {
            tag: MemoryTag::Tag,
            id: id.clone(),
            memory_store_id: w.store_id.clone(),
            path: path.clone(),
            content: Some(content.clone()),
            content_sha256: sha256_hex(content),
            content_size_bytes: content.len() as i64,
            memory_version_id: v.id.clone(),
            created_at: time::format(w.at),
            updated_at: time::format(w.at),
        };
        return Decision::Insert(m, v);
    }
    let Some(current) = current else {
        return Decision::Answer(O::MemoryNotFound);
    };
    if let Some(expected) = &w.expected_sha256
        && *expected != current.content_sha256
    {
        return Decision::Answer(O::PreconditionFailed {
            current_sha256: current.content_sha256.clone(),
        });
    }
    let old_content = current.content.clone().unwrap_or_default();
    match &w.change {
        MemoryChange::Delete { id } => Decision::Remove(version(
            w,
            id,
            Operation::Deleted,
            Some((&current.path, &old_content)),
        )),
        MemoryChange::Update { id, path, content } => {
            if let Some(holder) = path_holder.filter(|h| *h != current.id) {
                return Decision::Answer(O::PathTaken {
                    memory_id: holder.to_string(),
                });
            }
            let new_path = path.clone().unwrap_or_else(|| current.path.clone());
            let new_content = content.clone().unwrap_or_else(|| old_content.clone());
            if new_path == current.path && new_content == old_content {
                return Decision::Answer(O::Unchanged(current.clone()));
            }
            let v = version(w, id, Operation::Modified, Some((&new_path, &new_content)));
            let m = Memory {
                path: new_path,
                content_sha256: sha256_hex(&new_content),
                content_size_bytes: new_content.len() as i64,
                content: Some(new_content),
                memory_version_id: v.id.clone(),
                updated_at: time::format(w.at),
                ..current.clone()
            };
            Decision::Replace(m, v)
        }
        MemoryChange::Create { .. } => unreachable!("handled above"),
    }
}

/// What redacting a version did.
#[derive(Debug, Clone, PartialEq)]
pub enum RedactOutcome {
    /// Redacted now, or earlier (idempotent): the version as it now is.
    Redacted(Box<MemoryVersion>),
    NotFound,
    /// The version holds the current content of a memory that still exists.
    Current,
}

/// The version with its content, path and hash removed, as redaction leaves it.
pub fn redacted(mut v: MemoryVersion, by: Option<Actor>, at: Micros) -> MemoryVersion {
    v.path = None;
    v.content = None;
    v.content_sha256 = None;
    v.content_size_bytes = None;
    v.redacted_at = Some(time::format(at));
    v.redacted_by = by;
    v
}

/// The id columns of an actor: `(api_key_id, session_id)`.
pub fn actor_ids(a: Option<&Actor>) -> (Option<&str>, Option<&str>) {
    match a {
        Some(Actor::ApiActor { api_key_id }) => (Some(api_key_id), None),
        Some(Actor::SessionActor { session_id }) => (None, Some(session_id)),
        None => (None, None),
    }
}
