//! A run's state between transitions: what the engine stores, and what it asks of it
//! without advancing the plan (outcomes, threads to stop, counts, an end from outside).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::super::plan::Plan;
use super::action::{Action, RunEnd};
use super::cursor::{Cursor, Slot};
use super::held::Held;

/// Everything needed to go on with a run, as the engine stores it. It serialises to JSON
/// with stable field names, and a state read back continues exactly as the original would.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunState {
    pub(super) cursor: Cursor,
    /// The phase started and not yet ended.
    pub(super) open_phase: Option<usize>,
    /// How many phases have ended; always the first ones, since phases run in order.
    pub(super) phases_ended: usize,
    pub(super) vars: BTreeMap<String, Held>,
    pub(super) started: u64,
    pub(super) returned: u64,
    pub(super) failed: u64,
    pub(super) ended: bool,
}

/// What a run's agents have done so far; the run's end notice reports them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Agents started over the run's life.
    pub started: u64,
    /// Started and not yet returned or failed.
    pub working: u64,
    /// Returned a result.
    pub returned: u64,
    /// Failed, whatever the step's `on_error`.
    pub failed: u64,
}

impl RunState {
    /// A run of `plan` that has done nothing yet: its variables are the inputs.
    pub fn new(plan: &Plan) -> Self {
        Self {
            cursor: Cursor::start(),
            open_phase: None,
            phases_ended: 0,
            vars: plan
                .inputs
                .iter()
                .map(|(name, input)| (name.clone(), Held::from(input)))
                .collect(),
            started: 0,
            returned: 0,
            failed: 0,
            ended: false,
        }
    }

    /// Records that the agent on `thread_id` returned; its result is that thread's. `false`
    /// when the run has no such working agent (unknown, already settled, or the run has
    /// ended), so replaying an outcome changes nothing.
    pub fn agent_returned(&mut self, thread_id: &str) -> bool {
        self.settle(thread_id, Slot::Returned)
    }

    /// Records that the agent on `thread_id` failed (its turn ended in failure, its thread
    /// could not be created or was terminated). `false` as for [`Self::agent_returned`].
    pub fn agent_failed(&mut self, thread_id: &str) -> bool {
        self.settle(thread_id, Slot::Failed)
    }

    fn settle(&mut self, thread_id: &str, outcome: fn(String) -> Slot) -> bool {
        if self.ended {
            return false;
        }
        let Some(agents) = &mut self.cursor.agents else {
            return false;
        };
        let Some(slot) = agents
            .slots
            .iter_mut()
            .find(|s| matches!(s, Slot::Working(id) if id == thread_id))
        else {
            return false;
        };
        *slot = outcome(thread_id.to_string());
        match slot {
            Slot::Returned(_) => self.returned += 1,
            _ => self.failed += 1,
        }
        true
    }

    /// The run's threads that have started and not returned or failed. After an end they
    /// are the threads the engine must stop.
    pub fn working_threads(&self) -> Vec<String> {
        self.cursor
            .agents
            .iter()
            .flat_map(|a| &a.slots)
            .filter_map(|s| match s {
                Slot::Working(id) => Some(id.clone()),
                _ => None,
            })
            .collect()
    }

    /// The agents' counts.
    pub fn counts(&self) -> Counts {
        Counts {
            started: self.started,
            working: self.cursor.agents.as_ref().map_or(0, |a| a.working()) as u64,
            returned: self.returned,
            failed: self.failed,
        }
    }

    /// The phase started and not yet ended, from 0.
    pub fn open_phase(&self) -> Option<usize> {
        self.open_phase
    }

    /// How many phases have ended: the first ones, in order.
    pub fn phases_ended(&self) -> usize {
        self.phases_ended
    }

    /// Whether the run has ended; it then does nothing more.
    pub fn is_ended(&self) -> bool {
        self.ended
    }

    /// Ends the run from outside with `end` (stopped, or an error such as a timeout): the
    /// open phase's end, then the run's. Nothing once the run has ended. The threads still
    /// working are [`Self::working_threads`].
    pub fn stop(&mut self, end: RunEnd) -> Vec<Action> {
        let mut actions = Vec::new();
        if !self.ended {
            self.end(end, &mut actions);
        }
        actions
    }

    /// Closes the open phase and ends the run. The cursor stays where it was, so the threads
    /// left working can still be listed.
    pub(super) fn end(&mut self, end: RunEnd, actions: &mut Vec<Action>) {
        if let Some(phase) = self.open_phase.take() {
            self.phases_ended += 1;
            actions.push(Action::PhaseEnded { phase });
        }
        self.ended = true;
        actions.push(Action::Ended(end));
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::action::RunErrorKind;
    use super::super::cursor::{Body, Frame, StepAgents};
    use super::super::held::HeldItem;
    use super::*;

    /// A run in its second phase, inside a repeat, with a map step half done.
    fn mid_run() -> RunState {
        RunState {
            cursor: Cursor {
                phase: 1,
                frames: vec![
                    Frame {
                        body: Body::Phase,
                        step: 2,
                    },
                    Frame {
                        body: Body::Repeat { round: 2 },
                        step: 0,
                    },
                ],
                agents: Some(StepAgents {
                    items: 4,
                    slots: vec![
                        Slot::Returned("sthr_1".into()),
                        Slot::Working("sthr_2".into()),
                        Slot::Working("sthr_3".into()),
                    ],
                }),
            },
            open_phase: Some(1),
            phases_ended: 1,
            vars: BTreeMap::from([
                ("topic".into(), Held::Text("tides".into())),
                (
                    "notes".into(),
                    Held::List(vec![HeldItem::Thread("sthr_0".into()), HeldItem::Failed]),
                ),
            ]),
            started: 5,
            returned: 2,
            failed: 1,
            ended: false,
        }
    }

    #[test]
    fn a_new_run_holds_the_inputs_and_nothing_else() {
        let plan = crate::workflow::parse(
            &json!({"agents": {}, "inputs": {"q": "why", "l": ["a"]}, "phases": []}),
        )
        .unwrap();
        let s = RunState::new(&plan);
        assert_eq!(
            serde_json::to_value(&s).unwrap(),
            json!({
                "cursor": {"phase": 0, "frames": [], "agents": null},
                "open_phase": null,
                "phases_ended": 0,
                "vars": {"l": {"list": [{"text": "a"}]}, "q": {"text": "why"}},
                "started": 0, "returned": 0, "failed": 0,
                "ended": false
            })
        );
        assert_eq!(s.counts(), Counts::default());
        assert_eq!(
            (s.open_phase(), s.phases_ended(), s.is_ended()),
            (None, 0, false)
        );
        assert!(s.working_threads().is_empty());
    }

    /// The stored form is pinned: renaming a field would strand the runs already stored.
    #[test]
    fn the_stored_form_is_stable() {
        let want = json!({
            "cursor": {
                "phase": 1,
                "frames": [
                    {"body": "phase", "step": 2},
                    {"body": {"repeat": {"round": 2}}, "step": 0}
                ],
                "agents": {"items": 4, "slots": [
                    {"returned": "sthr_1"}, {"working": "sthr_2"}, {"working": "sthr_3"}
                ]}
            },
            "open_phase": 1,
            "phases_ended": 1,
            "vars": {
                "notes": {"list": [{"thread": "sthr_0"}, "failed"]},
                "topic": {"text": "tides"}
            },
            "started": 5, "returned": 2, "failed": 1,
            "ended": false
        });
        assert_eq!(serde_json::to_value(mid_run()).unwrap(), want);
        assert_eq!(serde_json::from_value::<RunState>(want).unwrap(), mid_run());
    }

    #[test]
    fn outcomes_settle_working_agents_once() {
        let mut s = mid_run();
        assert_eq!(s.working_threads(), ["sthr_2", "sthr_3"]);
        assert_eq!(
            s.counts(),
            Counts {
                started: 5,
                working: 2,
                returned: 2,
                failed: 1
            }
        );
        // Unknown, and already settled: nothing changes.
        for id in ["sthr_9", "sthr_1", ""] {
            assert!(!s.agent_returned(id), "{id}");
            assert!(!s.agent_failed(id), "{id}");
        }
        assert_eq!(s, mid_run());

        assert!(s.agent_returned("sthr_2"));
        assert!(!s.agent_returned("sthr_2"), "a replay");
        assert!(!s.agent_failed("sthr_2"), "a late, contradicting outcome");
        assert!(s.agent_failed("sthr_3"));
        assert!(!s.agent_failed("sthr_3"));
        assert!(s.working_threads().is_empty());
        assert_eq!(
            s.counts(),
            Counts {
                started: 5,
                working: 0,
                returned: 3,
                failed: 2
            }
        );
        assert_eq!(
            s.cursor.agents.unwrap().slots,
            [
                Slot::Returned("sthr_1".into()),
                Slot::Returned("sthr_2".into()),
                Slot::Failed("sthr_3".into())
            ]
        );
    }

    #[test]
    fn outcomes_between_steps_are_ignored() {
        let mut s = mid_run();
        s.cursor.agents = None;
        assert!(!s.agent_returned("sthr_2"));
        assert!(!s.agent_failed("sthr_2"));
        assert_eq!(s.counts().working, 0);
    }

    #[test]
    fn stop_closes_the_open_phase_then_ends_once() {
        let cases = [
            RunEnd::Stopped,
            RunEnd::error(RunErrorKind::TimeoutError, "the run's lifetime passed", ""),
        ];
        for end in cases {
            let mut s = mid_run();
            assert_eq!(
                s.stop(end.clone()),
                [Action::PhaseEnded { phase: 1 }, Action::Ended(end.clone())]
            );
            assert!(s.is_ended());
            assert_eq!((s.open_phase(), s.phases_ended()), (None, 2));
            // The engine stops these; the run takes no outcome from them any more.
            assert_eq!(s.working_threads(), ["sthr_2", "sthr_3"]);
            assert!(!s.agent_returned("sthr_2"));
            assert!(!s.agent_failed("sthr_3"));
            assert_eq!(s.counts().returned, 2);
            assert!(s.stop(RunEnd::Stopped).is_empty(), "a second stop");
        }

        // Between phases there is no phase to close.
        let mut s = mid_run();
        s.open_phase = None;
        assert_eq!(s.stop(RunEnd::Stopped), [Action::Ended(RunEnd::Stopped)]);
        assert_eq!(s.phases_ended(), 1);
    }
}
