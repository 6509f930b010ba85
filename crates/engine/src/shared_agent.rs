//! The agent a thread's loop runs, shared rather than copied: a runner wakes for every turn,
//! and copying the agent (its system prompt, every tool schema) per wake was measurable for
//! an agent with a long prompt and many tools.

use std::ops::Deref;
use std::sync::Arc;

use mast_domain::agent::SessionAgent;
use mast_domain::session::SessionBody;

/// The primary thread's agent is the session body's (which `engine::bodies` keeps parsed
/// between wakes); a delegate thread's is its own.
#[derive(Debug, Clone)]
pub enum SharedAgent {
    /// The agent of this session body.
    Session(Arc<SessionBody>),
    /// An agent of its own (a delegate's).
    Own(Arc<SessionAgent>),
}

impl Deref for SharedAgent {
    type Target = SessionAgent;

    fn deref(&self) -> &SessionAgent {
        match self {
            SharedAgent::Session(body) => &body.agent,
            SharedAgent::Own(agent) => agent,
        }
    }
}
