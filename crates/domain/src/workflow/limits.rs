//! The numbers a plan and its run must stay within. One struct, with the defaults Mast ships,
//! so the binary can override each from its `MAST_WORKFLOW_*` setting and every check reads
//! the same values.

/// Highest `max_rounds` a `repeat` may ask for; part of the format, not a server setting.
pub const MAX_ROUNDS: u64 = 20;

/// Characters kept of a run's or phase's `name`; the rest is cut, not refused.
pub const NAME_CHARS: usize = 64;

/// Characters kept of a run's or phase's `description`; the rest is cut, not refused.
pub const DESCRIPTION_CHARS: usize = 256;

/// Length limit of a KEY or VAR, in characters.
pub const IDENTIFIER_CHARS: usize = 64;

/// Limits on plans and runs. The size limits refuse a plan with `unknown_error`; the others
/// lower what a plan asks for, or are enforced by the engine while a run goes on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of the plan as compact JSON (`MAST_WORKFLOW_MAX_PLAN_BYTES`).
    pub max_plan_bytes: usize,
    /// Phases in one plan.
    pub max_phases: usize,
    /// Steps in one plan, those inside `repeat` and `if` included.
    pub max_steps: usize,
    /// How deep steps nest: a phase's own steps are at depth 1, the steps of a `repeat` or
    /// an `if` branch one deeper than the step holding them.
    pub max_nesting: usize,
    /// Keys of `agents`.
    pub max_agent_definitions: usize,
    /// Items of every literal `over` list of the plan together.
    pub max_over_items: usize,
    /// Threads working at once in one run (`MAST_WORKFLOW_MAX_RUNNING_THREADS`): the default
    /// and ceiling of a map's `max_parallel`.
    pub max_running_threads: u64,
    /// Agents one run may start over its life (`MAST_WORKFLOW_MAX_AGENTS`); the engine's.
    pub max_agents_per_run: u64,
    /// Runs open at once in a session (`MAST_WORKFLOW_MAX_OPEN_RUNS`); the engine's.
    pub max_open_runs: u64,
    /// A run's lifetime in seconds, default and maximum (`MAST_WORKFLOW_LIFETIME_SECONDS`).
    pub lifetime_seconds: u64,
    /// Characters of a rendered prompt, an agent result or the rendered `result` before it
    /// is cut (`MAST_WORKFLOW_MAX_TEXT_CHARS`).
    pub max_text_chars: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_plan_bytes: 64 * 1024,
            max_phases: 20,
            max_steps: 200,
            max_nesting: 4,
            max_agent_definitions: 50,
            max_over_items: 1_000,
            max_running_threads: 64,
            max_agents_per_run: 1_000,
            max_open_runs: 10,
            lifetime_seconds: 86_400,
            max_text_chars: 100_000,
        }
    }
}
