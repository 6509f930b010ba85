//! Wire types and validation: what clients send and receive, independent of HTTP and storage.

pub mod agent;
pub mod budget;
pub mod content;
pub mod credential;
pub mod credential_validation;
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
// Webhooks (Mast's own management API).
pub mod webhook;
