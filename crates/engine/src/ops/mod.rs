//! The engine's front door: every operation the API performs on sessions and threads.
//!
//! Each operation owns its whole effect — the store transaction that decides it, publishing
//! what it appended, waking or interrupting runners, queueing self-hosted work — and returns
//! a typed result or an [`OpError`]. The API layer only translates HTTP to these calls and
//! their results back to HTTP.

mod agents;
mod create;
mod environment_keys;
mod environments;
mod error;
mod event_log;
mod events;
mod fork;
mod health;
mod input_hooks;
mod memories;
mod memory_attach;
mod memory_stores;
mod models;
mod outcome_rubrics;
mod resources;
mod sessions;
mod skills;
mod threads;
mod txn;
pub mod views;
mod work;
mod work_queue;

pub use error::OpError;
pub use event_log::{EventLog, EventRecord, StreamStart};
pub use health::OpsCounts;
pub use memories::MemoryEdit;
pub use models::CatalogEntry;
pub use work_queue::{Claimed, WorkRecord, WorkStats};
