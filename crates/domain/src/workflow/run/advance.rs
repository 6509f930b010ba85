//! Running a plan as far as it goes without waiting on an agent.

use std::collections::BTreeMap;

use super::super::limits::Limits;
use super::super::plan::{AgentStep, Cond, MapStep, OnError, Over, Plan, Step};
use super::super::split::split;
use super::super::template::Tmpl;
use super::super::vars::{Scope, Var, truncate};
use super::Results;
use super::action::{Action, RunEnd, RunErrorKind};
use super::cursor::{Body, Frame, Slot, StepAgents};
use super::held::{Held, HeldItem, Reads, Text, over_count, over_item};
use super::state::RunState;

impl RunState {
    /// Runs the plan until it must wait on an agent or ends, and returns what happened, in
    /// order: phases started and ended, agents to start (the engine creates each thread with
    /// the id `new_thread_id` gave), and last the run's end. Nothing when the run waits on
    /// the same agents as before or has ended, so calling it again is harmless.
    ///
    /// `plan` must be the checked plan the run was created from, and `limits` the server's
    /// (the agent limit, the concurrency ceiling and the text limit are read here). An end
    /// always closes the open phase first. After an error end [`Self::working_threads`]
    /// names the agents the engine must stop.
    pub fn advance(
        &mut self,
        plan: &Plan,
        results: &dyn Results,
        limits: &Limits,
        new_thread_id: &mut dyn FnMut() -> String,
    ) -> Vec<Action> {
        if self.ended {
            return Vec::new();
        }
        let mut run = Run {
            plan,
            limits,
            text: Text {
                results,
                max_chars: limits.max_text_chars,
            },
            new_thread_id,
            actions: Vec::new(),
        };
        loop {
            match run.next(self) {
                Flow::On => {}
                Flow::Wait => break,
                Flow::End(end) => {
                    self.end(end, &mut run.actions);
                    break;
                }
            }
        }
        run.actions
    }
}

/// What one move of the interpreter leaves it to do.
enum Flow {
    /// Move again.
    On,
    /// Every agent that may start has; wait for an outcome.
    Wait,
    /// The run ends.
    End(RunEnd),
}

/// One transition's view: the plan, the limits and the engine's callbacks, around the state.
struct Run<'a> {
    plan: &'a Plan,
    limits: &'a Limits,
    text: Text<'a>,
    new_thread_id: &'a mut dyn FnMut() -> String,
    actions: Vec<Action>,
}

/// An agent or a map step, seen alike: an agent step runs one item, one at a time, and
/// saves its one outcome rather than a list.
struct Launch<'p> {
    kind: &'static str,
    agent: &'p str,
    prompt: &'p Tmpl,
    save: Option<&'p str>,
    on_error: OnError,
    max_parallel: usize,
    /// A map's items and the name each is bound to.
    map: Option<(&'p Over, &'p str)>,
}

impl<'p> Launch<'p> {
    fn agent(s: &'p AgentStep) -> Self {
        Self {
            kind: "agent",
            agent: &s.agent,
            prompt: &s.prompt,
            save: s.save.as_deref(),
            on_error: s.on_error,
            max_parallel: 1,
            map: None,
        }
    }

    fn map(s: &'p MapStep, limits: &Limits) -> Self {
        // A checked plan's max_parallel is within the limit already; this keeps an unchecked
        // one from working more agents than the run may, or none at all.
        let ceiling = limits.max_running_threads;
        let parallel = s.max_parallel.map_or(ceiling, |n| n.min(ceiling)).max(1);
        Self {
            kind: "map",
            agent: &s.agent,
            prompt: &s.prompt,
            save: s.save.as_deref(),
            on_error: s.on_error,
            max_parallel: usize::try_from(parallel).unwrap_or(usize::MAX),
            map: Some((&s.over, &s.bind)),
        }
    }
}

impl<'a> Run<'a> {
    fn next(&mut self, s: &mut RunState) -> Flow {
        let Some(open) = s.open_phase else {
            return self.between_phases(s);
        };
        if open != s.cursor.phase {
            return misfit(s);
        }
        let Some(steps) = s.cursor.steps(self.plan) else {
            return misfit(s);
        };
        let at = s.cursor.frames.last().map_or(0, |f| f.step);
        match steps.get(at) {
            None if s.cursor.agents.is_none() => self.list_done(s),
            Some(Step::Agent(step)) => self.launch(s, Launch::agent(step)),
            Some(Step::Map(step)) => self.launch(s, Launch::map(step, self.limits)),
            Some(_) if s.cursor.agents.is_some() => misfit(s),
            Some(Step::Set(step)) => {
                let value = truncate(self.render(s, &step.value), self.limits.max_text_chars);
                s.vars.insert(step.var.clone(), Held::Text(value));
                next_step(s);
                Flow::On
            }
            Some(Step::Split(step)) => {
                let text = self.render(s, &step.text);
                let cut = text.chars().nth(self.limits.max_text_chars).is_some();
                match split(&truncate(text, self.limits.max_text_chars), step.by) {
                    Ok(items) => {
                        let items = items.into_iter().map(HeldItem::Text).collect();
                        s.vars.insert(step.var.clone(), Held::List(items));
                        next_step(s);
                        Flow::On
                    }
                    Err(e) => {
                        let why = if cut {
                            format!(
                                " (its text was cut at {} characters first)",
                                self.limits.max_text_chars
                            )
                        } else {
                            String::new()
                        };
                        Flow::End(RunEnd::error(
                            RunErrorKind::ProgramError,
                            "a split step's text is not a JSON list",
                            format!("`{}.split`: {e}{why}", s.cursor.path()),
                        ))
                    }
                }
            }
            Some(Step::Repeat(_)) => {
                s.cursor.frames.push(Frame {
                    body: Body::Repeat { round: 1 },
                    step: 0,
                });
                Flow::On
            }
            Some(Step::If(step)) => {
                let body = if self.holds(s, &step.when) {
                    Body::Then
                } else {
                    Body::Else
                };
                s.cursor.frames.push(Frame { body, step: 0 });
                Flow::On
            }
            None => misfit(s),
        }
    }

    /// No phase is open: start the next one, or finish the plan after the last.
    fn between_phases(&mut self, s: &mut RunState) -> Flow {
        let phase = s.cursor.phase;
        if !s.cursor.frames.is_empty() || s.cursor.agents.is_some() {
            return misfit(s);
        }
        if phase == self.plan.phases.len() {
            return Flow::End(RunEnd::Completed {
                result: self.result(s),
            });
        }
        if phase > self.plan.phases.len() {
            return misfit(s);
        }
        s.open_phase = Some(phase);
        s.cursor.frames.push(Frame {
            body: Body::Phase,
            step: 0,
        });
        self.actions.push(Action::PhaseStarted { phase });
        Flow::On
    }

    /// The innermost list's last step is done: end the phase, leave the branch, or run the
    /// repeat again.
    fn list_done(&mut self, s: &mut RunState) -> Flow {
        let Some(frame) = s.cursor.frames.last() else {
            return misfit(s);
        };
        match frame.body {
            Body::Phase => {
                let phase = s.cursor.phase;
                s.cursor.frames.clear();
                s.open_phase = None;
                s.phases_ended += 1;
                s.cursor.phase += 1;
                self.actions.push(Action::PhaseEnded { phase });
            }
            Body::Then | Body::Else => {
                s.cursor.frames.pop();
                next_step(s);
            }
            Body::Repeat { round } => {
                let Some(Step::Repeat(repeat)) = s.cursor.holder(self.plan) else {
                    return misfit(s);
                };
                let done = round >= repeat.max_rounds
                    || repeat.until.as_ref().is_some_and(|c| self.holds(s, c));
                if done {
                    s.cursor.frames.pop();
                    next_step(s);
                } else if let Some(frame) = s.cursor.frames.last_mut() {
                    *frame = Frame {
                        body: Body::Repeat { round: round + 1 },
                        step: 0,
                    };
                }
            }
        }
        Flow::On
    }

    /// An agent or map step: begins it, ends the run on a failure it may not survive,
    /// starts the agents concurrency allows, and completes it once every agent has an
    /// outcome.
    fn launch(&mut self, s: &mut RunState, l: Launch) -> Flow {
        if s.cursor.agents.is_none() {
            let items = l.map.map_or(1, |(over, _)| over_count(&s.vars, over));
            let max = self.limits.max_agents_per_run;
            if s.started.saturating_add(items as u64) > max {
                return Flow::End(RunEnd::error(
                    RunErrorKind::ThreadLimitError,
                    format!("the run would start more than {max} agents"),
                    format!(
                        "`{}.{}` would start {items} agents after {} were started; a run may start at most {max}",
                        s.cursor.path(),
                        l.kind,
                        s.started
                    ),
                ));
            }
            s.cursor.agents = Some(StepAgents {
                items,
                slots: Vec::new(),
            });
        }
        let Some(agents) = &s.cursor.agents else {
            return misfit(s);
        };
        if l.on_error == OnError::Fail
            && let Some((i, id)) = agents.slots.iter().enumerate().find_map(|(i, s)| match s {
                Slot::Failed(id) => Some((i, id)),
                _ => None,
            })
        {
            let which = match l.map {
                Some(_) => format!(" of item {}", i + 1),
                None => String::new(),
            };
            return Flow::End(RunEnd::error(
                RunErrorKind::ProgramError,
                "an agent failed",
                format!(
                    "`{}.{}`: the agent `{}`{which} (thread {id}) failed, and the step's on_error is fail",
                    s.cursor.path(),
                    l.kind,
                    l.agent
                ),
            ));
        }
        if let Some(flow) = self.start_agents(s, &l) {
            return flow;
        }
        match s.cursor.agents.take() {
            Some(agents) if agents.settled() => {
                if let Some(name) = l.save {
                    s.vars
                        .insert(name.to_string(), saved(agents.slots, l.map.is_some()));
                }
                next_step(s);
                Flow::On
            }
            agents => {
                s.cursor.agents = agents;
                Flow::Wait
            }
        }
    }

    /// Starts the step's next items, in order, while it has fewer than its maximum working.
    /// The variables a prompt reads cannot change while its step runs, so they are read once.
    fn start_agents(&mut self, s: &mut RunState, l: &Launch) -> Option<Flow> {
        let mut vars: Option<BTreeMap<String, Var>> = None;
        loop {
            let agents = s.cursor.agents.as_ref()?;
            let k = agents.slots.len();
            if k >= agents.items || agents.working() >= l.max_parallel {
                return None;
            }
            let vars = vars.get_or_insert_with(|| {
                let reads = Reads::of_tmpl(l.prompt);
                let reads = match l.map {
                    Some((_, bind)) => reads.without(bind),
                    None => reads,
                };
                reads.resolve(&s.vars, &self.text)
            });
            let scope = scope(s, vars);
            let prompt = match l.map {
                None => l.prompt.render(&scope),
                Some((over, bind)) => {
                    let Some(item) = over_item(&s.vars, over, k, &self.text) else {
                        return Some(misfit(s));
                    };
                    l.prompt.render(&scope.in_map(bind, &item, k + 1))
                }
            };
            let thread_id = (self.new_thread_id)();
            s.cursor
                .agents
                .as_mut()?
                .slots
                .push(Slot::Working(thread_id.clone()));
            s.started += 1;
            self.actions.push(Action::StartAgent {
                thread_id,
                agent_key: l.agent.to_string(),
                prompt: truncate(prompt, self.limits.max_text_chars),
                item: l.map.map(|_| k),
            });
        }
    }

    fn render(&self, s: &RunState, tmpl: &Tmpl) -> String {
        let vars = Reads::of_tmpl(tmpl).resolve(&s.vars, &self.text);
        tmpl.render(&scope(s, &vars))
    }

    fn holds(&self, s: &RunState, cond: &Cond) -> bool {
        let vars = Reads::of_cond(cond).resolve(&s.vars, &self.text);
        cond.holds(&scope(s, &vars))
    }

    fn result(&self, s: &RunState) -> String {
        let reads = match &self.plan.result {
            Some(t) => Reads::of_tmpl(t),
            None => Reads::everything(&s.vars),
        };
        let vars = reads.resolve(&s.vars, &self.text);
        self.plan.render_result(&vars, self.limits.max_text_chars)
    }
}

/// The scope of the current step: the run's variables and the innermost repeat's round.
fn scope<'v>(s: &RunState, vars: &'v BTreeMap<String, Var>) -> Scope<'v> {
    let scope = Scope::new(vars);
    match s.cursor.round() {
        Some(round) => scope.in_round(usize::try_from(round).unwrap_or(usize::MAX)),
        None => scope,
    }
}

/// What a completed step saves: a map's outcomes as a list in item order, an agent step's
/// one outcome.
fn saved(slots: Vec<Slot>, list: bool) -> Held {
    let item = |slot: Slot| match slot {
        Slot::Returned(id) => HeldItem::Thread(id),
        Slot::Working(_) | Slot::Failed(_) => HeldItem::Failed,
    };
    if list {
        return Held::List(slots.into_iter().map(item).collect());
    }
    match slots.into_iter().next().map(item) {
        Some(HeldItem::Thread(id)) => Held::Thread(id),
        _ => Held::Failed,
    }
}

fn next_step(s: &mut RunState) {
    if let Some(frame) = s.cursor.frames.last_mut() {
        frame.step += 1;
    }
}

/// The state names a step its plan does not have: stored for another plan, or damaged. The
/// run cannot go on, and guessing could start agents the plan never asked for.
fn misfit(s: &RunState) -> Flow {
    Flow::End(RunEnd::error(
        RunErrorKind::UnknownError,
        "the run could not continue",
        format!(
            "the run's state (at `{}`) does not fit its plan",
            s.cursor.path()
        ),
    ))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::super::parse::parse;
    use super::*;

    fn no_results(id: &str) -> String {
        panic!("no agent ran, yet {id} was read")
    }

    fn no_threads() -> String {
        panic!("no agent may start")
    }

    /// Runs an unchecked plan that starts no agent to its end.
    fn run(plan: serde_json::Value, limits: &Limits) -> (RunState, Vec<Action>) {
        let plan = parse(&plan).unwrap();
        let mut state = RunState::new(&plan);
        let actions = state.advance(&plan, &no_results, limits, &mut no_threads);
        (state, actions)
    }

    #[test]
    fn a_map_works_within_the_ceiling_even_unchecked() {
        let limits = Limits {
            max_running_threads: 3,
            ..Limits::default()
        };
        let cases = [
            (None, 3),
            (Some(2), 2),
            (Some(3), 3),
            (Some(100), 3),
            (Some(0), 1),
        ];
        for (asked, want) in cases {
            let plan = parse(&json!({
                "agents": {"a": {"system": "s"}},
                "phases": [{"name": "p", "steps": [
                    {"map": {"over": ["x"], "as": "i", "use": "a", "prompt": ""}}
                ]}]
            }))
            .unwrap();
            let Step::Map(mut m) = plan.phases[0].steps[0].clone() else {
                panic!()
            };
            // Set here, since reading a plan refuses 0.
            m.max_parallel = asked;
            let m = &m;
            assert_eq!(Launch::map(m, &limits).max_parallel, want, "{asked:?}");
        }
    }

    #[test]
    fn a_completed_step_saves_its_outcomes() {
        let r = |s: &str| Slot::Returned(s.into());
        let f = |s: &str| Slot::Failed(s.into());
        let t = |s: &str| HeldItem::Thread(s.into());
        let cases = [
            (vec![r("a")], false, Held::Thread("a".into())),
            (vec![f("a")], false, Held::Failed),
            (vec![], true, Held::List(vec![])),
            (
                vec![r("a"), f("b"), r("c")],
                true,
                Held::List(vec![t("a"), HeldItem::Failed, t("c")]),
            ),
        ];
        for (slots, list, want) in cases {
            assert_eq!(saved(slots.clone(), list), want, "{slots:?}");
        }
    }

    #[test]
    fn steps_without_agents_run_in_one_transition() {
        let (state, actions) = run(
            json!({
                "agents": {},
                "inputs": {"text": "b\na\n\nc"},
                "phases": [
                    {"name": "p", "steps": [
                        {"split": {"var": "items", "text": "{{text}}", "by": "lines"}},
                        {"set": {"var": "log", "value": ""}},
                        {"repeat": {"max_rounds": 5, "steps": [
                            {"set": {"var": "log", "value": "{{log}}{{round}}:{{items.count}} "}},
                            {"if": {"when": {"equals": {"text": "{{round}}", "value": "2"}},
                                "then": [{"set": {"var": "two", "value": "round {{round}}"}}],
                                "else": [{"set": {"var": "other", "value": "{{other}}{{round}}"}}]}}
                        ], "until": {"contains": {"text": "{{log}}", "value": "3:"}}}}
                    ]},
                    {"name": "q", "steps": []}
                ],
                "result": "{{log}}| {{two}} | {{other}} | {{items.2}}"
            }),
            &Limits::default(),
        );
        assert_eq!(
            actions,
            [
                Action::PhaseStarted { phase: 0 },
                Action::PhaseEnded { phase: 0 },
                Action::PhaseStarted { phase: 1 },
                Action::PhaseEnded { phase: 1 },
                Action::Ended(RunEnd::Completed {
                    result: "1:3 2:3 3:3 | round 2 | 13 | a".into()
                })
            ]
        );
        assert!(state.is_ended());
        assert_eq!(state.phases_ended(), 2);
    }

    #[test]
    fn set_values_are_cut_before_they_are_kept() {
        let limits = Limits {
            max_text_chars: 4,
            ..Limits::default()
        };
        let (state, _) = run(
            json!({"agents": {}, "phases": [{"name": "p", "steps": [
                {"set": {"var": "v", "value": "abcdef"}},
                {"split": {"var": "l", "text": "ab\ncd", "by": "lines"}}
            ]}]}),
            &limits,
        );
        assert_eq!(state.vars["v"], Held::Text("abcd\n[truncated]".into()));
        assert_eq!(
            state.vars["l"],
            Held::List(vec![
                HeldItem::Text("ab".into()),
                HeldItem::Text("c".into()),
                HeldItem::Text("[truncated]".into())
            ])
        );
    }

    #[test]
    fn a_cursor_that_disagrees_with_the_open_phase_is_a_misfit() {
        let plan = parse(&json!({"agents": {}, "phases": [
            {"name": "p", "steps": []}, {"name": "q", "steps": []}
        ]}))
        .unwrap();
        let mut state = RunState::new(&plan);
        state.open_phase = Some(1);
        let actions = state.advance(&plan, &no_results, &Limits::default(), &mut no_threads);
        assert_eq!(actions[0], Action::PhaseEnded { phase: 1 });
        assert!(matches!(
            &actions[1],
            Action::Ended(RunEnd::Error {
                kind: RunErrorKind::UnknownError,
                ..
            })
        ));
    }
}
