//! The references a plan makes, checked in document order: each `use` names a key of
//! `agents`, and each variable read is an input or assigned by an earlier step. Earlier means
//! earlier in the text, not "on every path": a variable assigned in one branch of an `if`
//! counts as assigned after it, and reads as "" when that branch did not run. Inside a
//! repeat, a step reading what a later step of the same repeat assigns is refused, even
//! though the second round would have it: such a variable must be set before the repeat.

use std::collections::{BTreeMap, BTreeSet};

use super::error::{PlanError, PlanResult};
use super::plan::{Agent, Cond, Over, Plan, Step};
use super::template::{Piece, Tmpl};

/// Checks every `use` and every variable read of `plan`.
pub fn check_flow(plan: &Plan) -> PlanResult<()> {
    let mut flow = Flow {
        agents: &plan.agents,
        assigned: plan.inputs.keys().cloned().collect(),
    };
    let top = Place {
        binding: None,
        in_repeat: false,
    };
    for (i, phase) in plan.phases.iter().enumerate() {
        flow.steps(&format!("phases[{i}].steps"), &phase.steps, top)?;
    }
    if let Some(result) = &plan.result {
        flow.tmpl("result", result, top)?;
    }
    Ok(())
}

/// What a template's position gives it besides the run's variables.
#[derive(Debug, Clone, Copy)]
struct Place<'a> {
    /// A map prompt's `as` name; also what makes `{{index}}` available.
    binding: Option<&'a str>,
    in_repeat: bool,
}

struct Flow<'a> {
    agents: &'a BTreeMap<String, Agent>,
    assigned: BTreeSet<String>,
}

impl Flow<'_> {
    fn steps(&mut self, at: &str, steps: &[Step], place: Place) -> PlanResult<()> {
        for (i, step) in steps.iter().enumerate() {
            let at = format!("{at}[{i}]");
            match step {
                Step::Agent(s) => {
                    let at = format!("{at}.agent");
                    self.uses(&at, &s.agent)?;
                    self.tmpl(&format!("{at}.prompt"), &s.prompt, place)?;
                    self.assigned.extend(s.save.clone());
                }
                Step::Map(s) => {
                    let at = format!("{at}.map");
                    self.uses(&at, &s.agent)?;
                    if let Over::Var(name) = &s.over {
                        self.read(&format!("{at}.over"), name, place)?;
                    }
                    let prompt = Place {
                        binding: Some(&s.bind),
                        ..place
                    };
                    self.tmpl(&format!("{at}.prompt"), &s.prompt, prompt)?;
                    self.assigned.extend(s.save.clone());
                }
                Step::Set(s) => {
                    self.tmpl(&format!("{at}.set.value"), &s.value, place)?;
                    self.assigned.insert(s.var.clone());
                }
                Step::Split(s) => {
                    self.tmpl(&format!("{at}.split.text"), &s.text, place)?;
                    self.assigned.insert(s.var.clone());
                }
                Step::Repeat(s) => {
                    let inner = Place {
                        in_repeat: true,
                        ..place
                    };
                    self.steps(&format!("{at}.repeat.steps"), &s.steps, inner)?;
                    if let Some(until) = &s.until {
                        self.cond(&format!("{at}.repeat.until"), until, inner)?;
                    }
                }
                Step::If(s) => {
                    self.cond(&format!("{at}.if.when"), &s.when, place)?;
                    self.steps(&format!("{at}.if.then"), &s.then, place)?;
                    self.steps(&format!("{at}.if.else"), &s.otherwise, place)?;
                }
            }
        }
        Ok(())
    }

    fn uses(&self, at: &str, key: &str) -> PlanResult<()> {
        if self.agents.contains_key(key) {
            return Ok(());
        }
        let at = format!("{at}.use");
        let keys = if self.agents.is_empty() {
            "`agents` is empty".to_string()
        } else {
            let keys: Vec<String> = self.agents.keys().map(|k| format!("`{k}`")).collect();
            format!("keys: {}", keys.join(", "))
        };
        Err(PlanError::program(
            &at,
            format!("`{at}` names `{key}`, which is not a key of `agents` ({keys})"),
        ))
    }

    fn cond(&self, at: &str, cond: &Cond, place: Place) -> PlanResult<()> {
        match cond {
            Cond::Contains(c) => self.tmpl(&format!("{at}.contains.text"), &c.text, place),
            Cond::Equals(c) => self.tmpl(&format!("{at}.equals.text"), &c.text, place),
            Cond::Failed(name) => self.read(&format!("{at}.failed"), name, place),
            Cond::Empty(name) => self.read(&format!("{at}.empty"), name, place),
            Cond::Not(c) => self.cond(&format!("{at}.not"), c, place),
            Cond::All(cs) => cs
                .iter()
                .enumerate()
                .try_for_each(|(i, c)| self.cond(&format!("{at}.all[{i}]"), c, place)),
            Cond::Any(cs) => cs
                .iter()
                .enumerate()
                .try_for_each(|(i, c)| self.cond(&format!("{at}.any[{i}]"), c, place)),
        }
    }

    fn tmpl(&self, at: &str, tmpl: &Tmpl, place: Place) -> PlanResult<()> {
        for piece in tmpl.pieces() {
            match piece {
                Piece::Text(_) => {}
                Piece::Var { name, .. } => self.read(at, name, place)?,
                Piece::Index if place.binding.is_none() => {
                    return Err(PlanError::program(
                        at,
                        format!("`{at}` uses `{{{{index}}}}`, which only a map's `prompt` has"),
                    ));
                }
                Piece::Round if !place.in_repeat => {
                    return Err(PlanError::program(
                        at,
                        format!("`{at}` uses `{{{{round}}}}`, which exists only inside a `repeat`"),
                    ));
                }
                Piece::Index | Piece::Round => {}
            }
        }
        Ok(())
    }

    fn read(&self, at: &str, name: &str, place: Place) -> PlanResult<()> {
        if place.binding == Some(name) || self.assigned.contains(name) {
            return Ok(());
        }
        let hint = if place.in_repeat {
            "; to read a value from the previous round, set the variable before the `repeat`"
        } else {
            ""
        };
        Err(PlanError::program(
            at,
            format!(
                "`{at}` reads the variable `{name}`, which is not in `inputs` and not assigned by an earlier step{hint}"
            ),
        ))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::parse::parse;
    use super::*;

    fn flow(steps: serde_json::Value) -> PlanResult<()> {
        check_flow(
            &parse(&json!({"agents": {}, "phases": [{"name": "p", "steps": steps}]})).unwrap(),
        )
    }

    #[test]
    fn an_if_cannot_test_what_its_own_branch_assigns() {
        let e = flow(
            json!([{"if": {"when": {"empty": "v"}, "then": [{"set": {"var": "v", "value": ""}}]}}]),
        )
        .unwrap_err();
        assert_eq!(e.path, "phases[0].steps[0].if.when.empty");
    }

    #[test]
    fn a_use_with_no_agents_says_so() {
        let e = flow(json!([{"agent": {"use": "w", "prompt": ""}}])).unwrap_err();
        assert_eq!(e.path, "phases[0].steps[0].agent.use");
        assert!(e.message().ends_with("(`agents` is empty)"), "{e}");
    }

    #[test]
    fn a_binding_is_not_visible_outside_its_prompt() {
        let e = flow(json!([
            {"map": {"over": ["x"], "as": "it", "use": "w", "prompt": "{{it}}"}}
        ]))
        .unwrap_err();
        // The prompt is fine; the missing agent is what fails.
        assert_eq!(e.path, "phases[0].steps[0].map.use");
        let plan = parse(&json!({
            "agents": {"w": {"system": "s"}},
            "phases": [{"name": "p", "steps": [
                {"map": {"over": ["x"], "as": "it", "use": "w", "prompt": "{{it}}"}},
                {"set": {"var": "v", "value": "{{it}}"}}
            ]}]
        }))
        .unwrap();
        let e = check_flow(&plan).unwrap_err();
        assert_eq!(e.path, "phases[0].steps[1].set.value");
    }
}
