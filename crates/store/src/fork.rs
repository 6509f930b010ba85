//! Records of a session fork (Mast's own `POST /v1/sessions/{id}/fork`): the new session with
//! its threads and the events it copies, written by [`super::ForkStore::insert_fork`] in one
//! transaction.

use super::{NewEvent, SessionRecord, ThreadRecord};

/// Everything a fork writes. The events take sequence numbers `1..=events.len()`, which are
/// the original's own (a fork copies a prefix of the log), so positions the copied events
/// record (`internal.after_seq`) stay true.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionFork {
    /// The new session row (idle, no lease); its `last_seq` is set by the store.
    pub session: SessionRecord,
    /// Its threads, the primary first.
    pub threads: Vec<ThreadRecord>,
    /// The copied events in sequence order, each with the id of the event it copies.
    pub events: Vec<ForkedEvent>,
}

/// One copied event: the copy (new id, ids it names remapped) and the original's id.
#[derive(Debug, Clone, PartialEq)]
pub struct ForkedEvent {
    pub event: NewEvent,
    pub forked_from: String,
}
