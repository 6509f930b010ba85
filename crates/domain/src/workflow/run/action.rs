//! What a transition asks of the engine, in the order its events must be committed.

/// One step of a run for the engine to carry out and record, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// The plan entered phase number `phase` (an index of the plan's `phases`).
    PhaseStarted {
        /// From 0.
        phase: usize,
    },
    /// Create the run thread `thread_id` (the id the engine's generator gave) running the
    /// plan's agent `agent_key`, its first message `prompt`, already cut to the text limit.
    StartAgent {
        /// The id the new thread must have: the state already knows it by this id.
        thread_id: String,
        /// A key of the plan's `agents`.
        agent_key: String,
        /// The rendered prompt.
        prompt: String,
        /// The map item, from 0 (its `{{index}}` is one more); `None` for an agent step.
        item: Option<usize>,
    },
    /// The plan left phase number `phase`, or the run's end closed it.
    PhaseEnded {
        /// From 0.
        phase: usize,
    },
    /// The run is over; always the last action, after the open phase's end.
    Ended(RunEnd),
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunEnd {
    /// The plan finished; `result` is the rendered `result`, cut to the text limit.
    Completed {
        /// What the primary agent reads.
        result: String,
    },
    /// Stopped from outside: by the agent, or by archiving the session.
    Stopped,
    /// An error end.
    Error {
        /// The `error.type` clients see.
        kind: RunErrorKind,
        /// Short server text for clients: never any of the run's or its agents' text.
        message: String,
        /// For the primary agent only: may name the step and the agent at fault.
        detail: String,
    },
}

/// Why a run ended in error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunErrorKind {
    /// The plan failed (a `split` by `json` on something else) or a failed agent ended it.
    ProgramError,
    /// A step would have started more agents than a run may.
    ThreadLimitError,
    /// The run's lifetime passed; only the engine knows the time, so only it ends a run so.
    TimeoutError,
    /// The server could not continue the run.
    UnknownError,
}

impl RunErrorKind {
    /// The `error.type` of the run's `workflow_run.error` and `status_ended`.
    pub fn error_type(self) -> &'static str {
        match self {
            RunErrorKind::ProgramError => "program_error",
            RunErrorKind::ThreadLimitError => "thread_limit_error",
            RunErrorKind::TimeoutError => "timeout_error",
            RunErrorKind::UnknownError => "unknown_error",
        }
    }
}

impl RunEnd {
    /// An error end.
    pub fn error(
        kind: RunErrorKind,
        message: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        RunEnd::Error {
            kind,
            message: message.into(),
            detail: detail.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_are_the_error_types_clients_see() {
        let cases = [
            (RunErrorKind::ProgramError, "program_error"),
            (RunErrorKind::ThreadLimitError, "thread_limit_error"),
            (RunErrorKind::TimeoutError, "timeout_error"),
            (RunErrorKind::UnknownError, "unknown_error"),
        ];
        for (kind, ty) in cases {
            assert_eq!(kind.error_type(), ty);
        }
        assert_eq!(
            RunEnd::error(RunErrorKind::TimeoutError, "m", "d"),
            RunEnd::Error {
                kind: RunErrorKind::TimeoutError,
                message: "m".into(),
                detail: "d".into()
            }
        );
    }
}
