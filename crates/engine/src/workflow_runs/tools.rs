//! The three platform tools the primary agent starts and manages runs with. Clients never
//! see these calls: their answers are kept privately with the model response that made them.

use serde_json::json;

use mast_domain::tools::ToolDef;
use mast_domain::workflow::{Limits, plan_schema};

/// Starts a run of a plan.
pub const START_RUN: &str = "ant__start_workflow_run";
/// Reports on one run, or on the session's runs.
pub const GET_RUN: &str = "ant__get_workflow_run";
/// Stops a run.
pub const STOP_RUN: &str = "ant__stop_workflow_run";

/// Whether `name` is one of the workflow platform tools.
pub fn is_platform_tool(name: &str) -> bool {
    matches!(name, START_RUN | GET_RUN | STOP_RUN)
}

/// The tools offered to the primary thread's model while workflows are enabled.
pub fn tool_defs(limits: &Limits) -> Vec<ToolDef> {
    vec![
        ToolDef {
            name: START_RUN.into(),
            description: format!(
                "Start a workflow run: a plan that runs other agents in phases, in the background, and \
                 combines what they return. The plan is a JSON program (see the input schema): `agents` \
                 defines who works (an inline agent with its own `system` prompt, or a predefined agent), \
                 `phases` run in order, each a list of steps — `agent` (one agent on a prompt), `map` (one \
                 agent per item of a list, in parallel), `set`, `split` (text into a list by lines or a \
                 JSON array), `repeat` (up to 20 rounds, until a condition holds) and `if`. Templates \
                 insert variables: {{{{VAR}}}}, {{{{VAR.N}}}}, {{{{VAR.count}}}}, {{{{VAR.failed}}}}, \
                 {{{{index}}}} in a map and {{{{round}}}} in a repeat. An agent returns the text of its \
                 last message; save it with `save`. `result` is what you read when the run ends (by \
                 default every variable as JSON). The run works while you go on or end your turn; when \
                 it ends you get a turn with its result. Limits: {} runs open at once, {} agents working \
                 at once in a run, {} agents per run, a lifetime of at most {} seconds.",
                limits.max_open_runs,
                limits.max_running_threads,
                limits.max_agents_per_run,
                limits.lifetime_seconds
            ),
            input_schema: plan_schema(limits),
        },
        ToolDef {
            name: GET_RUN.into(),
            description: "Report on a workflow run of this session: its status, phase, agents and, once it \
                          completed, its output. Without `workflow_run_id`, every run of the session, newest \
                          first."
                .into(),
            input_schema: json!({"type": "object", "properties": {
                "workflow_run_id": {"type": "string", "description": "The run (`wrun_…`)."}},
                "additionalProperties": false}),
        },
        ToolDef {
            name: STOP_RUN.into(),
            description: "Stop a workflow run of this session: its agents stop and it ends `stopped`.".into(),
            input_schema: json!({"type": "object", "properties": {
                "workflow_run_id": {"type": "string", "description": "The run (`wrun_…`)."}},
                "required": ["workflow_run_id"], "additionalProperties": false}),
        },
    ]
}
