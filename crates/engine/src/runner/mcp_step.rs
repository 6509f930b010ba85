//! The MCP side of a thread's model request: connecting the servers its agent uses before the
//! request, and telling the user about each that could not be reached.

use super::{Loop, RunError, Waited};
use crate::mcp::connect::Reach;
use mast_domain::tools::Tool;

impl Loop<'_> {
    /// Connects to the MCP servers this thread's agent uses (those not connected yet, in
    /// parallel), tells the user about each failure with a `session.error` naming the
    /// server, and sets the MCP tools the next request offers. False when an interrupt came
    /// first.
    pub(super) async fn prepare_mcp(&mut self) -> Result<bool, RunError> {
        if !self
            .scope
            .agent
            .tools
            .iter()
            .any(|t| matches!(t, Tool::McpToolset { .. }))
        {
            return Ok(true);
        }
        let reach = self.mcp_reach();
        let failures = match self
            .interruptible(self.crew.mcp.prepare(&self.scope.agent, &reach))
            .await?
        {
            Waited::Done(f) => f,
            Waited::Interrupted => return Ok(false),
        };
        self.kit.mcp_offer = Default::default();
        let taken = self
            .offered_tools()
            .iter()
            .map(|t| t.name.clone())
            .collect();
        self.kit.mcp_offer = self.crew.mcp.offer(&self.scope.agent, &taken);
        if !failures.is_empty() {
            self.report_mcp_failures(failures).await?;
        }
        Ok(true)
    }

    /// What connecting to this session's MCP servers needs.
    pub(super) fn mcp_reach(&self) -> Reach<'_> {
        Reach {
            session_id: &self.scope.sid,
            environment: &self.scope.body.environment,
            guard: self.inner.toolbox.netguard(),
            credentials: &*self.inner.credentials,
            timeout: self.inner.config.mcp_connect_timeout,
        }
    }

    /// One `session.error` per MCP failure. The turn goes on without that server's tools,
    /// and the server is tried again before a later request, so the status is `retrying`.
    pub(super) async fn report_mcp_failures(
        &mut self,
        failures: Vec<crate::mcp::connect::Failure>,
    ) -> Result<(), RunError> {
        let thread = self.scope.thread.clone();
        let clock = self.inner.store.clock().clone();
        self.commit(
            move |_, _| {
                let now = clock.now();
                Ok(failures
                    .iter()
                    .map(|f| f.retrying_event(&thread, now))
                    .collect())
            },
            vec![],
        )
        .await?;
        Ok(())
    }
}
