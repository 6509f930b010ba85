//! The skills note a thread's system prompt ends with.

use super::{Loop, RunError};
use crate::skills::note;

impl Loop<'_> {
    /// `system` with the note on this thread's agent's skills appended.
    pub(super) async fn with_skills_note(
        &self,
        system: Option<String>,
    ) -> Result<Option<String>, RunError> {
        if self.scope.agent.skills.is_empty() {
            return Ok(system);
        }
        let store = &*self.inner.store;
        let ws = store
            .get_session_by_id(&self.scope.sid)
            .await?
            .map(|r| r.workspace_id)
            .ok_or(RunError::Gone)?;
        let note = note(store, &ws, &self.scope.agent.skills, self.scope.self_hosted).await?;
        Ok(mast_domain::skill::with_note(system, note))
    }
}
