//! The per-turn workspace checkpoint a fork at an earlier event is given
//! (see [`mast_sandbox::checkpoints`]): the primary thread takes it just before its first
//! built-in tool call after each `user.message`.

use mast_domain::events::kind;

use super::Loop;

impl Loop<'_> {
    /// Takes the checkpoint of the latest consumed `user.message`, unless it was taken. A
    /// failure is logged and the call goes on: the checkpoint only serves later forks, which
    /// then get the next checkpoint's (or the live) workspace.
    pub(super) async fn checkpoint_workspace(&self, workspace: &std::path::Path) {
        if self.child_name().is_some() || self.scope.self_hosted {
            return;
        }
        let Some(message) = self.view.events.iter().rev().find(|e| {
            e.kind == kind::USER_MESSAGE
                && e.processed_at.is_some()
                && e.internal
                    .as_ref()
                    .and_then(|i| i.get("discarded"))
                    .is_none()
        }) else {
            return;
        };
        let cps = self.inner.toolbox.checkpoints();
        let (sid, id, ws, position) = (
            self.scope.sid.clone(),
            message.id.clone(),
            workspace.to_path_buf(),
            self.view.last_seq,
        );
        let taken = tokio::task::spawn_blocking(move || {
            if cps.has(&sid, &id)? {
                return Ok(None);
            }
            cps.take(&sid, &ws, &id, position).map(Some)
        })
        .await;
        match taken {
            Ok(Ok(Some(e))) => tracing::debug!(
                session = %self.scope.sid, event = %e.event_id, bytes = e.bytes, files = e.files,
                micros = e.micros, "workspace checkpoint taken"
            ),
            Ok(Ok(None)) => {}
            Ok(Err(e)) => {
                tracing::warn!(session = %self.scope.sid, error = %e, "the workspace checkpoint could not be taken")
            }
            Err(e) => {
                tracing::warn!(session = %self.scope.sid, error = %e, "the workspace checkpoint task failed")
            }
        }
    }
}
