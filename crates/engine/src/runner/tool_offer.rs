//! The tool definitions a thread's model request offers: the agent's custom and built-in
//! tools (for the primary thread kept with the session's parsed body between wakes), then
//! the delegation tools and the MCP tools of the moment.

use std::sync::Arc;

use serde_json::Value;

use super::Loop;
use crate::shared_agent::SharedAgent;
use mast_domain::tools::{Tool, ToolDef};

impl Loop<'_> {
    fn custom_tools(&self) -> Vec<ToolDef> {
        self.scope
            .agent
            .tools
            .iter()
            .filter_map(|t| match t {
                Tool::Custom(c) => Some(ToolDef {
                    name: c.name.clone(),
                    description: c.description.clone(),
                    input_schema: Value::Object(c.input_schema.0.clone()),
                }),
                _ => None,
            })
            .collect()
    }

    /// The custom tools and the enabled built-in tools: what the agent alone decides. The
    /// primary thread's are kept with the session's parsed body between wakes.
    fn agent_tools(&self) -> Arc<Vec<ToolDef>> {
        let build = || {
            let mut tools = self.custom_tools();
            tools.extend(mast_sandbox::definitions(&self.scope.agent.tools));
            tools
        };
        match &self.scope.agent {
            SharedAgent::Session(body) => self.inner.bodies.tools(&self.scope.sid, body, build),
            SharedAgent::Own(_) => Arc::new(build()),
        }
    }

    /// Whether this thread's model may start workflow runs: the primary thread only, while
    /// the session's `workflows` is enabled (run threads and delegates never nest runs).
    pub(super) fn starts_workflows(&self) -> bool {
        self.is_primary() && crate::workflow_runs::enabled(&self.scope.body.agent)
    }

    /// Custom tools, the enabled built-in tools, (coordinators) the delegation tools and
    /// the MCP tools of the last [`Loop::prepare_mcp`].
    pub(super) fn offered_tools(&self) -> Arc<Vec<ToolDef>> {
        let base = self.agent_tools();
        let workflows = self.starts_workflows();
        if self.scope.roster.is_none() && self.kit.mcp_offer.defs.is_empty() && !workflows {
            return base;
        }
        let mut tools = Vec::clone(&base);
        if let Some(r) = &self.scope.roster {
            tools.extend(r.tools());
        }
        if workflows {
            tools.extend(crate::workflow_runs::tool_defs(
                &self.inner.config.workflows.limits,
            ));
        }
        tools.extend(self.kit.mcp_offer.defs.iter().cloned());
        Arc::new(tools)
    }
}
