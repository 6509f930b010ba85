//! Running a checked plan: a pure state machine the engine drives one transition at a time.
//!
//! The engine keeps a [`RunState`] in the session's engine state and, inside the transaction
//! of each transition, calls [`RunState::advance`], carries out the [`Action`]s it returns in
//! order (phase events, agent threads to create, the run's end) and later reports each
//! agent's outcome ([`RunState::agent_returned`], [`RunState::agent_failed`]) before
//! advancing again. Nothing here reads a clock, a database or a thread: a run's lifetime and
//! being stopped come from outside through [`RunState::stop`].
//!
//! The state never holds an agent's result, only the id of the thread that returned it: a
//! run can have a thousand results of a hundred thousand characters each, and the state is
//! rewritten under the session's row lock at every transition. Rendering asks [`Results`]
//! for the texts it shows, and only for those: `{{notes.count}}` reads no result at all.
//! What the plan produced itself (`set`, `split`, inputs) is text and is kept.

mod action;
mod advance;
mod cursor;
mod held;
mod state;

#[cfg(test)]
mod driver;
#[cfg(test)]
mod scenarios;

pub use action::{Action, RunEnd, RunErrorKind};
pub use state::{Counts, RunState};

/// Where the interpreter reads what an agent returned. The engine implements it over the
/// run threads' logs (the text of the last `agent.message` of the turn that returned).
///
/// Rendering cuts each text to the run's text limit itself, so an implementation may return
/// it whole; it may be asked for the same thread more than once in one transition.
pub trait Results {
    /// The result of the agent that returned on `thread_id`.
    fn text(&self, thread_id: &str) -> String;
}

impl<F: Fn(&str) -> String> Results for F {
    fn text(&self, thread_id: &str) -> String {
        self(thread_id)
    }
}
