//! Where a run is in its plan: the phase, the nest of step lists the current step sits in
//! (a phase's steps, a repeat's body in some round, an if's branch), and the agents of the
//! current agent or map step. Indices only, so the state stays small and reads back against
//! the stored plan; a state that does not fit its plan resolves to nothing rather than
//! panicking.

use serde::{Deserialize, Serialize};

use super::super::plan::{Plan, Step};

/// The interpreter's position.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Cursor {
    /// The phase the run is in, or the next to start; the number of phases once all ended.
    pub phase: usize,
    /// The step lists the current step is nested in, outermost (the phase's own) first;
    /// empty between phases.
    pub frames: Vec<Frame>,
    /// The agents of the current agent or map step, from when it begins until it completes.
    pub agents: Option<StepAgents>,
}

/// One list of steps being run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Frame {
    /// Which list: the phase's, or the body of the step the enclosing frame is at.
    pub body: Body,
    /// The step of this list now running; the list's length once its last step is done.
    pub step: usize,
}

/// What a frame's list of steps is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Body {
    /// The phase's own steps.
    Phase,
    /// A repeat's steps, in round `round` (from 1).
    Repeat {
        /// From 1; what `{{round}}` renders.
        round: u64,
    },
    /// An if's `then` steps.
    Then,
    /// An if's `else` steps.
    Else,
}

/// The agents of one agent or map step. Items start in order, so the items not yet started
/// are those past the last slot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct StepAgents {
    /// How many agents the step runs: 1, or the map's items when it began.
    pub items: usize,
    /// One per started item, in item order.
    pub slots: Vec<Slot>,
}

/// A started agent of the current step, by its thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Slot {
    /// Started, no outcome yet.
    Working(String),
    /// Returned; its result is that thread's.
    Returned(String),
    /// Failed; the thread is kept for the error's detail.
    Failed(String),
}

impl StepAgents {
    /// Agents started and not yet returned or failed.
    pub fn working(&self) -> usize {
        self.slots
            .iter()
            .filter(|s| matches!(s, Slot::Working(_)))
            .count()
    }

    /// Whether every agent of the step has started and returned or failed.
    pub fn settled(&self) -> bool {
        self.slots.len() >= self.items && self.working() == 0
    }
}

impl Cursor {
    /// A run that has not started its first phase.
    pub fn start() -> Self {
        Self {
            phase: 0,
            frames: Vec::new(),
            agents: None,
        }
    }

    /// The list of steps of the innermost frame.
    pub fn steps<'p>(&self, plan: &'p Plan) -> Option<&'p [Step]> {
        steps_of(plan, self.phase, &self.frames)
    }

    /// The repeat or if step whose body the innermost frame runs; `None` at a phase's steps.
    pub fn holder<'p>(&self, plan: &'p Plan) -> Option<&'p Step> {
        let (_, outer) = self.frames.split_last()?;
        let parent = outer.last()?;
        steps_of(plan, self.phase, outer)?.get(parent.step)
    }

    /// The round of the innermost repeat the current step is in.
    pub fn round(&self) -> Option<u64> {
        self.frames.iter().rev().find_map(|f| match f.body {
            Body::Repeat { round } => Some(round),
            _ => None,
        })
    }

    /// The plan path of the current step, as a refused plan's error names it
    /// (`phases[1].steps[0].repeat.steps[2]`), for an error's detail.
    pub fn path(&self) -> String {
        let mut path = format!("phases[{}]", self.phase);
        for f in &self.frames {
            path.push_str(match f.body {
                Body::Phase => ".steps",
                Body::Repeat { .. } => ".repeat.steps",
                Body::Then => ".if.then",
                Body::Else => ".if.else",
            });
            path.push_str(&format!("[{}]", f.step));
        }
        path
    }
}

/// The list of steps `frames` lead to in phase `phase`.
fn steps_of<'p>(plan: &'p Plan, phase: usize, frames: &[Frame]) -> Option<&'p [Step]> {
    let (first, rest) = frames.split_first()?;
    if first.body != Body::Phase {
        return None;
    }
    let mut list = plan.phases.get(phase)?.steps.as_slice();
    let mut at = first.step;
    for f in rest {
        list = match (list.get(at)?, &f.body) {
            (Step::Repeat(r), Body::Repeat { .. }) => &r.steps,
            (Step::If(s), Body::Then) => &s.then,
            (Step::If(s), Body::Else) => &s.otherwise,
            _ => return None,
        };
        at = f.step;
    }
    Some(list)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::super::parse::parse;
    use super::*;

    fn plan() -> Plan {
        parse(&json!({
            "agents": {},
            "phases": [
                {"name": "a", "steps": []},
                {"name": "b", "steps": [
                    {"set": {"var": "v", "value": "0"}},
                    {"repeat": {"max_rounds": 3, "steps": [
                        {"set": {"var": "v", "value": "1"}},
                        {"if": {"when": {"all": []},
                                "then": [{"set": {"var": "v", "value": "then"}}],
                                "else": [{"set": {"var": "v", "value": "else"}}]}}
                    ]}}
                ]}
            ]
        }))
        .unwrap()
    }

    fn frame(body: Body, step: usize) -> Frame {
        Frame { body, step }
    }

    fn set_value(step: &Step) -> &str {
        match step {
            Step::Set(s) => s.value.source(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn frames_lead_to_their_list_and_holder() {
        let plan = plan();
        let repeat = Body::Repeat { round: 2 };
        let at = |phase, frames: Vec<Frame>| Cursor {
            phase,
            frames,
            agents: None,
        };
        let c = at(1, vec![frame(Body::Phase, 0)]);
        assert_eq!(set_value(&c.steps(&plan).unwrap()[0]), "0");
        assert!(c.holder(&plan).is_none());
        assert_eq!((c.round(), c.path().as_str()), (None, "phases[1].steps[0]"));

        let c = at(1, vec![frame(Body::Phase, 1), frame(repeat.clone(), 0)]);
        assert_eq!(c.steps(&plan).unwrap().len(), 2);
        assert!(matches!(c.holder(&plan), Some(Step::Repeat(_))));
        assert_eq!(c.round(), Some(2));
        assert_eq!(c.path(), "phases[1].steps[1].repeat.steps[0]");

        for (body, want, name) in [(Body::Then, "then", "then"), (Body::Else, "else", "else")] {
            let c = at(
                1,
                vec![
                    frame(Body::Phase, 1),
                    frame(repeat.clone(), 1),
                    frame(body, 0),
                ],
            );
            assert_eq!(set_value(&c.steps(&plan).unwrap()[0]), want);
            assert!(matches!(c.holder(&plan), Some(Step::If(_))));
            assert_eq!(c.round(), Some(2));
            assert_eq!(
                c.path(),
                format!("phases[1].steps[1].repeat.steps[1].if.{name}[0]")
            );
        }

        // A frame past its list's end still resolves: the list is done, not missing.
        let c = at(0, vec![frame(Body::Phase, 0)]);
        assert_eq!(c.steps(&plan).unwrap().len(), 0);
    }

    #[test]
    fn a_state_that_does_not_fit_the_plan_resolves_to_nothing() {
        let plan = plan();
        let cases = [
            (0, vec![]),
            (2, vec![frame(Body::Phase, 0)]),
            (1, vec![frame(Body::Then, 0)]),
            (1, vec![frame(Body::Phase, 0), frame(Body::Then, 0)]),
            (1, vec![frame(Body::Phase, 1), frame(Body::Then, 0)]),
            (
                1,
                vec![frame(Body::Phase, 7), frame(Body::Repeat { round: 1 }, 0)],
            ),
        ];
        for (phase, frames) in cases {
            let c = Cursor {
                phase,
                frames: frames.clone(),
                agents: None,
            };
            assert!(c.steps(&plan).is_none(), "{phase} {frames:?}");
        }
    }

    #[test]
    fn a_step_settles_once_every_item_has_an_outcome() {
        let w = |s: &str| Slot::Working(s.into());
        let r = |s: &str| Slot::Returned(s.into());
        let f = |s: &str| Slot::Failed(s.into());
        let cases = [
            (2, vec![], 0, false),
            (2, vec![r("a")], 0, false),
            (2, vec![r("a"), w("b")], 1, false),
            (2, vec![r("a"), f("b")], 0, true),
            (1, vec![w("a")], 1, false),
            (0, vec![], 0, true),
        ];
        for (items, slots, working, settled) in cases {
            let a = StepAgents {
                items,
                slots: slots.clone(),
            };
            assert_eq!((a.working(), a.settled()), (working, settled), "{slots:?}");
        }
    }
}
