//! Workflow plans: the declarative program the session's agent hands to
//! `ant__start_workflow_run`, which the server checks whole before a run exists and then
//! interprets step by step, running the agents in session threads.
//!
//! This module is pure: it reads and checks plans ([`check`], [`parse`]), describes them to
//! the model ([`plan_schema`]), and holds the rules the interpreter applies at each step —
//! rendering templates ([`Tmpl::render`]), evaluating conditions ([`Cond::holds`]), splitting
//! text into lists ([`split`]), cutting long text ([`truncate`]) and the default result
//! ([`default_result`], [`Plan::render_result`]) — and the interpreter itself: a run's
//! [`RunState`], which [`RunState::advance`] moves through the plan and turns into
//! [`Action`]s. Creating the agents' threads, reading their results ([`Results`]),
//! persisting the state, keeping time and emitting the events belong to the engine.
//!
//! A refused plan is a [`PlanError`]: its [`ErrorKind`] tells a size limit (`unknown_error`)
//! from any other broken rule (`program_error`), and it converts into the [`Invalid`] every
//! domain check returns.
//!
//! [`Invalid`]: crate::invalid::Invalid

mod check;
mod condition;
mod error;
mod flow;
mod ident;
mod limits;
mod parse;
mod plan;
mod roster;
mod run;
mod schema;
mod size;
mod split;
mod template;
mod vars;

#[cfg(test)]
mod examples;

pub use check::check;
pub use error::{ErrorKind, PlanError, PlanResult};
pub use ident::{RESERVED_VARS, is_identifier, is_var};
pub use limits::{DESCRIPTION_CHARS, IDENTIFIER_CHARS, Limits, MAX_ROUNDS, NAME_CHARS};
pub use parse::parse;
pub use plan::{
    Agent, AgentStep, Compare, Cond, IfStep, InlineAgent, Input, MapStep, OnError, Over, Phase,
    Plan, RepeatStep, SetStep, SplitBy, SplitStep, Step,
};
pub use roster::{ListedAgent, RosterEntry, Workflows};
pub use run::{Action, Counts, Results, RunEnd, RunErrorKind, RunState};
pub use schema::plan_schema;
pub use split::{SplitError, split};
pub use template::{Member, Piece, Tmpl};
pub use vars::{Item, Scope, TRUNCATED, Var, default_result, truncate};
