//! The size limits of a plan. A plan over one is refused as `unknown_error`, not
//! `program_error`: it is well formed, just bigger than this server takes.

use std::io;

use serde_json::Value;

use super::error::{PlanError, PlanResult};
use super::limits::Limits;
use super::plan::{Over, Plan, Step};

/// Refuses a plan whose compact JSON is over `max_plan_bytes`. Checked on the JSON before
/// reading it, so an oversized plan costs no more than counting its bytes.
pub fn check_bytes(plan: &Value, limits: &Limits) -> PlanResult<()> {
    let mut counter = ByteCounter(0);
    serde_json::to_writer(&mut counter, plan).expect("counting bytes cannot fail");
    if counter.0 > limits.max_plan_bytes {
        return Err(PlanError::size_limit(
            "",
            format!(
                "the plan is {} bytes of JSON; at most {} are allowed",
                counter.0, limits.max_plan_bytes
            ),
        ));
    }
    Ok(())
}

struct ByteCounter(usize);

impl io::Write for ByteCounter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len();
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Refuses a plan over a limit on phases, agent definitions, steps, nesting or literal
/// `over` items. The error names the first member past the limit, in document order.
pub fn check_sizes(plan: &Plan, limits: &Limits) -> PlanResult<()> {
    if plan.agents.len() > limits.max_agent_definitions {
        return Err(PlanError::size_limit(
            "agents",
            format!(
                "`agents` defines {} agents; at most {} are allowed",
                plan.agents.len(),
                limits.max_agent_definitions
            ),
        ));
    }
    if plan.phases.len() > limits.max_phases {
        return Err(PlanError::size_limit(
            "phases",
            format!(
                "`phases` has {} phases; at most {} are allowed",
                plan.phases.len(),
                limits.max_phases
            ),
        ));
    }
    let mut tally = Tally {
        limits,
        steps: 0,
        over_items: 0,
    };
    for (i, phase) in plan.phases.iter().enumerate() {
        tally.steps(&format!("phases[{i}].steps"), &phase.steps, 1)?;
    }
    Ok(())
}

struct Tally<'a> {
    limits: &'a Limits,
    steps: usize,
    over_items: usize,
}

impl Tally<'_> {
    fn steps(&mut self, at: &str, steps: &[Step], depth: usize) -> PlanResult<()> {
        for (i, step) in steps.iter().enumerate() {
            let path = format!("{at}[{i}]");
            self.steps += 1;
            if self.steps > self.limits.max_steps {
                return Err(PlanError::size_limit(
                    &path,
                    format!(
                        "`{path}` is step number {} of the plan; at most {} are allowed, nested steps included",
                        self.steps, self.limits.max_steps
                    ),
                ));
            }
            if depth > self.limits.max_nesting {
                return Err(PlanError::size_limit(
                    &path,
                    format!(
                        "`{path}` is nested {depth} deep (a phase's own steps are 1 deep); at most {} is allowed",
                        self.limits.max_nesting
                    ),
                ));
            }
            match step {
                Step::Map(m) => {
                    if let Over::Items(items) = &m.over {
                        self.over_items += items.len();
                        if self.over_items > self.limits.max_over_items {
                            let path = format!("{path}.map.over");
                            return Err(PlanError::size_limit(
                                &path,
                                format!(
                                    "`{path}` brings the plan's literal `over` items to {}; at most {} are allowed",
                                    self.over_items, self.limits.max_over_items
                                ),
                            ));
                        }
                    }
                }
                Step::Repeat(r) => {
                    self.steps(&format!("{path}.repeat.steps"), &r.steps, depth + 1)?;
                }
                Step::If(s) => {
                    self.steps(&format!("{path}.if.then"), &s.then, depth + 1)?;
                    self.steps(&format!("{path}.if.else"), &s.otherwise, depth + 1)?;
                }
                Step::Agent(_) | Step::Set(_) | Step::Split(_) => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::parse::parse;
    use super::*;

    #[test]
    fn bytes_are_counted_as_compact_json() {
        let plan = json!({"agents": {}, "phases": [], "name": "é"});
        let compact = serde_json::to_vec(&plan).unwrap().len();
        let at = Limits {
            max_plan_bytes: compact,
            ..Limits::default()
        };
        check_bytes(&plan, &at).unwrap();
        let below = Limits {
            max_plan_bytes: compact - 1,
            ..Limits::default()
        };
        let e = check_bytes(&plan, &below).unwrap_err();
        assert_eq!(
            (e.kind, e.path.as_str()),
            (super::super::ErrorKind::SizeLimit, "")
        );
        assert!(e.message().starts_with("the plan is"), "{e}");
    }

    #[test]
    fn literal_items_add_up_across_phases_and_branches() {
        let map =
            |n: usize| json!({"map": {"over": vec!["x"; n], "as": "i", "use": "a", "prompt": ""}});
        let plan = parse(&json!({"agents": {}, "phases": [
            {"name": "a", "steps": [{"if": {"when": {"all": []}, "then": [map(2)], "else": [map(2)]}}]},
            {"name": "b", "steps": [map(1), {"map": {"over": "v", "as": "i", "use": "a", "prompt": ""}}]}
        ]}))
        .unwrap();
        let limits = |max_over_items| Limits {
            max_over_items,
            ..Limits::default()
        };
        check_sizes(&plan, &limits(5)).unwrap();
        let e = check_sizes(&plan, &limits(4)).unwrap_err();
        assert_eq!(e.path, "phases[1].steps[0].map.over");
    }
}
