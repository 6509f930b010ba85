//! The integration suite: real servers on 127.0.0.1:0 over SQLite and Postgres.

mod support;

mod agents;
mod cli;
mod cli_client;
mod crash;
mod doctor;
mod engine;
mod environments;
mod errors;
mod escalation;
mod files;
mod first_hour;
mod history;
mod host_addresses;
mod keys;
mod limits;
mod logs;
mod mcp;
mod multiagent;
mod openai;
mod openapi;
mod operability;
mod outage;
mod packages;
mod race;
mod replicas;
mod sandbox;
mod sessions;
mod store;
mod stream;
mod strict;
mod toolset;
mod vaults;
mod vaults_api;
mod work;
