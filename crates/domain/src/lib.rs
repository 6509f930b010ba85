//! Wire types and validation: what clients send and receive, independent of HTTP and storage.
//!
//! Every resource and event has its serde types here (with the schemas the OpenAPI document is
//! generated from), with the checks a request must pass before anything else runs (unknown fields,
//! limits, rules a body alone decides), the errors those checks give (`invalid`), and the shared
//! vocabulary of every layer: ids that sort by creation time (`ids`), microsecond time (`time`),
//! key hashing (`keys`), list prices and money in integer nanodollars (`prices`), and what a list
//! may ask for (`query`: page direction, scans, each resource's filters). Pure rules the layers
//! above apply live here too: how hook verdicts combine (`hook_answer`), cron schedules
//! (`schedule`), skill bundles (`skill_bundle`), outcome transitions (`outcome`), workflow plans
//! (`workflow`: the program a session's agent hands over to run many agents, checked before a
//! run exists, and the interpreter that runs it as a state machine the engine drives).
//!
//! This crate depends on no other Mast crate; every other one depends on it. So it also holds two
//! small helpers, which need nothing of Mast's, that the store, the sandbox, the models and the
//! engine all use, and this is the one crate they share: `error_chain` (an error's text with its
//! causes) and `private_fs` (server-private directories 0700 and files 0600). Nothing here talks to
//! a database, a model or a client: that belongs in the crates above.

pub mod agent;
pub mod budget;
pub mod clock;
pub mod content;
pub mod credential;
pub mod credential_validation;
pub mod custom_tool;
pub mod deployment;
pub mod environment;
pub mod error_chain;
pub mod events;
pub mod fields;
pub mod file;
pub mod fork;
pub mod private_fs;
// Hooks (Mast's own addition): their configuration, and what endpoints answer.
pub mod hook;
pub mod hook_answer;
pub mod ids;
pub mod invalid;
pub mod keys;
pub mod memory;
pub mod memory_resource;
pub mod metadata;
pub mod model_config;
pub mod multiagent;
pub mod outcome;
pub mod patch;
pub mod prices;
pub mod query;
pub mod repository;
pub mod resource;
pub mod schedule;
pub mod session;
pub mod skill;
pub mod skill_bundle;
pub mod tag;
pub mod thread;
pub mod time;
pub mod tools;
pub mod vault;
pub mod work;
pub mod workflow;
// Webhooks (Mast's own management API).
pub mod webhook;
