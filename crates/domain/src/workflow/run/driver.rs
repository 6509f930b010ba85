//! A stand-in for the engine in tests: it checks a plan, keeps the run's state, gives
//! threads ids `sthr_1`, `sthr_2`, …, remembers what each returned, and answers agents in
//! the order a test chooses. With `roundtrip` set, it stores the state as JSON and reads it
//! back before every call, as the engine does between transitions.

use std::collections::BTreeMap;

use serde_json::Value;

use super::super::check::check;
use super::super::examples::workflows;
use super::super::limits::Limits;
use super::super::plan::Plan;
use super::{Action, RunEnd, RunState};

/// An agent the run started and the driver has not answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    pub thread_id: String,
    pub agent_key: String,
    pub prompt: String,
    pub item: Option<usize>,
}

pub struct Driver {
    pub plan: Plan,
    pub limits: Limits,
    pub state: RunState,
    /// What each returned thread returned.
    pub texts: BTreeMap<String, String>,
    /// Started and not yet answered, in the order they started.
    pub working: Vec<Started>,
    /// Every action, in order.
    pub log: Vec<Action>,
    /// The most agents ever working at once.
    pub most_working: usize,
    pub roundtrip: bool,
    ids: u64,
}

impl Driver {
    pub fn new(plan: Value) -> Self {
        Self::with_limits(plan, Limits::default())
    }

    pub fn with_limits(plan: Value, limits: Limits) -> Self {
        let plan = check(&plan, &workflows(), 1, &limits).unwrap_or_else(|e| panic!("{e}"));
        Self {
            state: RunState::new(&plan),
            plan,
            limits,
            texts: BTreeMap::new(),
            working: Vec::new(),
            log: Vec::new(),
            most_working: 0,
            roundtrip: false,
            ids: 0,
        }
    }

    fn reload(&mut self) {
        if self.roundtrip {
            let json = serde_json::to_string(&self.state).unwrap();
            let back: RunState = serde_json::from_str(&json).unwrap();
            assert_eq!(back, self.state, "{json}");
            assert_eq!(serde_json::to_string(&back).unwrap(), json);
            self.state = back;
        }
    }

    pub fn advance(&mut self) -> Vec<Action> {
        self.reload();
        let texts = &self.texts;
        let results = |id: &str| {
            texts
                .get(id)
                .cloned()
                .unwrap_or_else(|| panic!("read the result of {id}, which did not return"))
        };
        let ids = &mut self.ids;
        let mut new_id = || {
            *ids += 1;
            format!("sthr_{ids}")
        };
        let actions = self
            .state
            .advance(&self.plan, &results, &self.limits, &mut new_id);
        for a in &actions {
            if let Action::StartAgent {
                thread_id,
                agent_key,
                prompt,
                item,
            } = a
            {
                self.working.push(Started {
                    thread_id: thread_id.clone(),
                    agent_key: agent_key.clone(),
                    prompt: prompt.clone(),
                    item: *item,
                });
            }
        }
        if !self.state.is_ended() {
            assert_eq!(self.state.counts().working, self.working.len() as u64);
            let mut listed = self.state.working_threads();
            let mut mine: Vec<_> = self.working.iter().map(|w| w.thread_id.clone()).collect();
            listed.sort();
            mine.sort();
            assert_eq!(listed, mine);
        }
        self.most_working = self.most_working.max(self.working.len());
        self.log.extend(actions.iter().cloned());
        actions
    }

    fn take(&mut self, thread_id: &str) {
        let at = self
            .working
            .iter()
            .position(|w| w.thread_id == thread_id)
            .unwrap_or_else(|| panic!("{thread_id} is not working"));
        self.working.remove(at);
    }

    /// The agent on `thread_id` returns `text`; then the run advances.
    pub fn answer(&mut self, thread_id: &str, text: &str) -> Vec<Action> {
        self.take(thread_id);
        self.texts.insert(thread_id.to_string(), text.to_string());
        self.reload();
        assert!(self.state.agent_returned(thread_id), "{thread_id}");
        self.advance()
    }

    /// The agent on `thread_id` fails; then the run advances.
    pub fn fail(&mut self, thread_id: &str) -> Vec<Action> {
        self.take(thread_id);
        self.reload();
        assert!(self.state.agent_failed(thread_id), "{thread_id}");
        self.advance()
    }

    /// Runs to the end, answering the agent `pick` chooses among those working with what
    /// `reply` says (`None`: it fails).
    pub fn run_with(
        &mut self,
        mut pick: impl FnMut(&[Started]) -> usize,
        mut reply: impl FnMut(&Started) -> Option<String>,
    ) -> RunEnd {
        self.advance();
        while !self.state.is_ended() {
            assert!(
                !self.working.is_empty(),
                "waiting on nothing: {:?}",
                self.log
            );
            let next = self.working[pick(&self.working)].clone();
            match reply(&next) {
                Some(text) => self.answer(&next.thread_id, &text),
                None => self.fail(&next.thread_id),
            };
        }
        match self.log.last() {
            Some(Action::Ended(end)) => end.clone(),
            other => panic!("ended without an end: {other:?}"),
        }
    }

    /// Runs to the end, answering the oldest working agent first.
    pub fn run(&mut self, reply: impl FnMut(&Started) -> Option<String>) -> RunEnd {
        self.run_with(|_| 0, reply)
    }
}

/// An agent that does what its prompt says: `say X` returns X.
pub fn say(a: &Started) -> Option<String> {
    Some(
        a.prompt
            .strip_prefix("say ")
            .unwrap_or_else(|| panic!("not a say prompt: {}", a.prompt))
            .to_string(),
    )
}

/// The thread ids `sthr_1` … `sthr_n`.
pub fn id(n: usize) -> String {
    format!("sthr_{n}")
}

/// A `StartAgent` action.
pub fn start(n: usize, agent: &str, prompt: &str, item: Option<usize>) -> Action {
    Action::StartAgent {
        thread_id: id(n),
        agent_key: agent.to_string(),
        prompt: prompt.to_string(),
        item,
    }
}

/// The run's completed end with `result`.
pub fn completed(result: &str) -> Action {
    Action::Ended(RunEnd::Completed {
        result: result.to_string(),
    })
}
