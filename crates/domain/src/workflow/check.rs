//! Everything checked before a run exists, in one call: the size limits, the shape, the
//! agents against the session's setting, the references and the order of variables; and the
//! plan's normalised form, which is what the run executes and what is stored.

use serde_json::Value;

use super::error::PlanResult;
use super::flow::check_flow;
use super::ident::cut;
use super::limits::{DESCRIPTION_CHARS, Limits, NAME_CHARS};
use super::parse::parse;
use super::plan::{Agent, Plan, Step};
use super::roster::Workflows;
use super::size::{check_bytes, check_sizes};

/// Checks a plan sent to `ant__start_workflow_run` and returns it normalised: every
/// `predefined` replaced by the listed agent's id, an inline agent's name defaulted to its
/// KEY, the run's name filled in (`Workflow run <run_number>` when blank) and names and
/// descriptions cut to 64 and 256 characters, `lifetime_seconds` and every `max_parallel`
/// set and lowered to the limits, `on_error` explicit.
///
/// `run_number` is this run's position among the session's runs, from 1. A plan over a size
/// limit fails with [`super::ErrorKind::SizeLimit`], any other problem with
/// [`super::ErrorKind::Program`].
pub fn check(
    plan: &Value,
    workflows: &Workflows,
    run_number: u64,
    limits: &Limits,
) -> PlanResult<Plan> {
    check_bytes(plan, limits)?;
    let mut plan = parse(plan)?;
    check_sizes(&plan, limits)?;
    for (key, agent) in plan.agents.iter_mut() {
        let at = format!("agents.{key}");
        match agent {
            Agent::Predefined { predefined } => {
                *predefined = workflows.resolve(&format!("{at}.predefined"), predefined)?;
            }
            Agent::Inline(inline) => {
                workflows.allow_inline(&at)?;
                inline.name.get_or_insert_with(|| key.clone());
            }
        }
    }
    check_flow(&plan)?;
    normalise(&mut plan, run_number, limits);
    Ok(plan)
}

fn normalise(plan: &mut Plan, run_number: u64, limits: &Limits) {
    let name = plan
        .name
        .as_deref()
        .map(|n| cut(n, NAME_CHARS))
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| format!("Workflow run {run_number}"));
    plan.name = Some(name);
    plan.description = plan
        .description
        .as_deref()
        .map(|d| cut(d, DESCRIPTION_CHARS));
    plan.lifetime_seconds = Some(
        plan.lifetime_seconds
            .map_or(limits.lifetime_seconds, |s| s.min(limits.lifetime_seconds)),
    );
    for phase in &mut plan.phases {
        phase.name = cut(&phase.name, NAME_CHARS);
        phase.description = phase
            .description
            .as_deref()
            .map(|d| cut(d, DESCRIPTION_CHARS));
        cap_parallel(&mut phase.steps, limits.max_running_threads);
    }
}

/// A map works with at most the run's concurrency limit, which is also its default.
fn cap_parallel(steps: &mut [Step], limit: u64) {
    for step in steps {
        match step {
            Step::Map(m) => m.max_parallel = Some(m.max_parallel.map_or(limit, |n| n.min(limit))),
            Step::Repeat(r) => cap_parallel(&mut r.steps, limit),
            Step::If(s) => {
                cap_parallel(&mut s.then, limit);
                cap_parallel(&mut s.otherwise, limit);
            }
            Step::Agent(_) | Step::Set(_) | Step::Split(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::error::ErrorKind;
    use super::super::examples::{
        LEAD, accepted_plans, full_plan, minimal_plan, one_step_plan, workflows,
    };
    use super::super::roster::{ListedAgent, RosterEntry};
    use super::*;

    fn refused(plan: &Value) -> super::super::error::PlanError {
        check(plan, &workflows(), 7, &Limits::default()).unwrap_err()
    }

    #[test]
    fn the_full_plan_passes_and_is_normalised() {
        let plan = check(&full_plan(), &workflows(), 7, &Limits::default()).unwrap();
        let mut want = full_plan();
        want["lifetime_seconds"] = json!(86_400);
        want["agents"]["planner"] = json!({"predefined": "agent_plan"});
        want["agents"]["lead"] = json!({"predefined": "agent_lead"});
        want["agents"]["writer"]["name"] = json!("writer");
        let research = &mut want["phases"][1]["steps"];
        research[0]["map"]["max_parallel"] = json!(64);
        research[1]["map"]["on_error"] = json!("fail");
        let write = &mut want["phases"][2]["steps"][1]["repeat"]["steps"];
        write[0]["agent"]["on_error"] = json!("fail");
        want["phases"][0]["steps"][0]["agent"]["on_error"] = json!("fail");
        assert_eq!(serde_json::to_value(&plan).unwrap(), want);
        // What is stored reads back as the same plan.
        let back: Plan = serde_json::from_value(want).unwrap();
        assert_eq!(back, plan);
    }

    #[test]
    fn every_example_passes() {
        for plan in accepted_plans() {
            check(&plan, &workflows(), 1, &Limits::default())
                .unwrap_or_else(|e| panic!("{e}: {plan}"));
        }
    }

    #[test]
    fn names_are_filled_in_or_cut() {
        let long = "n".repeat(70);
        let cases = [
            (json!(null), "Workflow run 7".to_string()),
            (json!(""), "Workflow run 7".to_string()),
            (json!(" \t"), "Workflow run 7".to_string()),
            (json!("Mine"), "Mine".to_string()),
            (json!(long), "n".repeat(64)),
            (
                json!(format!("{}x", " ".repeat(64))),
                "Workflow run 7".to_string(),
            ),
        ];
        for (name, want) in cases {
            let mut plan = minimal_plan();
            plan["name"] = name.clone();
            let plan = check(&plan, &workflows(), 7, &Limits::default()).unwrap();
            assert_eq!(plan.name.as_deref(), Some(want.as_str()), "{name}");
        }
        let mut plan = one_step_plan();
        plan["description"] = json!("d".repeat(300));
        plan["phases"][0]["name"] = json!("é".repeat(65));
        plan["phases"][0]["description"] = json!("ü".repeat(257));
        let plan = check(&plan, &workflows(), 1, &Limits::default()).unwrap();
        assert_eq!(plan.description, Some("d".repeat(256)));
        assert_eq!(plan.phases[0].name, "é".repeat(64));
        assert_eq!(plan.phases[0].description, Some("ü".repeat(256)));
    }

    #[test]
    fn lifetime_and_parallelism_are_lowered_to_the_limits() {
        let limits = Limits {
            lifetime_seconds: 600,
            max_running_threads: 8,
            ..Limits::default()
        };
        let cases = [
            (None, None, 600, 8),
            (Some(1), Some(1), 1, 1),
            (Some(600), Some(8), 600, 8),
            (Some(601), Some(9), 600, 8),
            (Some(u64::MAX), Some(u64::MAX), 600, 8),
        ];
        for (lifetime, parallel, want_lifetime, want_parallel) in cases {
            let mut plan = json!({
                "agents": {"a": {"system": "s"}},
                "phases": [{"name": "p", "steps": [{"if": {"when": {"all": []}, "then": [
                    {"map": {"over": ["x"], "as": "i", "use": "a", "prompt": "{{i}}"}}
                ]}}]}]
            });
            if let Some(l) = lifetime {
                plan["lifetime_seconds"] = json!(l);
            }
            if let Some(p) = parallel {
                plan["phases"][0]["steps"][0]["if"]["then"][0]["map"]["max_parallel"] = json!(p);
            }
            let plan = check(&plan, &workflows(), 1, &limits).unwrap();
            assert_eq!(plan.lifetime_seconds, Some(want_lifetime));
            let Step::If(s) = &plan.phases[0].steps[0] else {
                panic!()
            };
            let Step::Map(m) = &s.then[0] else { panic!() };
            assert_eq!(m.max_parallel, Some(want_parallel), "{parallel:?}");
        }
    }

    /// Each case: a change to a valid plan, the path the error must name, and words its
    /// message must hold. Every one is a `program_error`.
    #[test]
    fn each_rule_refuses_with_the_path() {
        type Change = fn(&mut Value);
        let cases: Vec<(Change, &str, &str)> = vec![
            (|p| p["agnts"] = json!({}), "agnts", "did you mean `agents`"),
            (
                |p| p["phases"][0]["steps"][0]["agent"]["prompts"] = json!("x"),
                "phases[0].steps[0].agent.prompts",
                "is not a known field of an agent step",
            ),
            (
                |p| p["agents"]["a"]["model"] = json!("x"),
                "agents.a.model",
                "not a known field of an inline agent",
            ),
            (
                |p| p["agents"]["a"] = json!({"predefined": "Planner", "system": "s"}),
                "agents.a.system",
                "not a known field of a predefined agent",
            ),
            (
                |p| p["phases"][0]["steps"][0]["agent"]["use"] = json!("b"),
                "phases[0].steps[0].agent.use",
                "names `b`, which is not a key of `agents` (keys: `a`)",
            ),
            (
                |p| p["agents"]["a"] = json!({"predefined": "Nobody"}),
                "agents.a.predefined",
                "neither the id nor the name",
            ),
            (
                |p| p["agents"]["a"] = json!({"predefined": "planner"}),
                "agents.a.predefined",
                "neither the id nor the name",
            ),
            (
                |p| p["phases"][0]["steps"][0]["agent"]["prompt"] = json!("{{later}}"),
                "phases[0].steps[0].agent.prompt",
                "reads the variable `later`, which is not in `inputs`",
            ),
            (
                |p| p["phases"][0]["steps"][0]["agent"]["prompt"] = json!("{{index}}"),
                "phases[0].steps[0].agent.prompt",
                "only a map's `prompt` has",
            ),
            (
                |p| p["phases"][0]["steps"][0]["agent"]["prompt"] = json!("{{round}}"),
                "phases[0].steps[0].agent.prompt",
                "only inside a `repeat`",
            ),
            (
                |p| p["phases"][0]["steps"][0]["agent"]["save"] = json!("index"),
                "phases[0].steps[0].agent.save",
                "may not be named `index`",
            ),
            (
                |p| p["phases"][0]["steps"][0]["agent"]["save"] = json!("round"),
                "phases[0].steps[0].agent.save",
                "may not be named `round`",
            ),
            (
                |p| p["phases"][0]["steps"][0]["agent"]["save"] = json!("2nd"),
                "phases[0].steps[0].agent.save",
                "must be a variable name",
            ),
            (
                |p| p["phases"][0]["steps"][0]["agent"]["save"] = json!("x".repeat(65)),
                "phases[0].steps[0].agent.save",
                "(got 65 characters)",
            ),
            (
                |p| p["agents"] = json!({"bad-key": {"system": "s"}}),
                "agents.bad-key",
                "not a valid agent key",
            ),
            (
                |p| p["inputs"] = json!({"my var": "x"}),
                "inputs.my var",
                "must be a variable name",
            ),
            (
                |p| p["inputs"] = json!({"round": "x"}),
                "inputs.round",
                "may not be named `round`",
            ),
            (
                |p| p["inputs"] = json!({"v": [1]}),
                "inputs.v[0]",
                "must be a string",
            ),
            (
                |p| p["phases"][0]["name"] = json!(" "),
                "phases[0].name",
                "must not be empty",
            ),
            (
                |p| p["phases"][0]["name"] = json!(null),
                "phases[0].name",
                "is required",
            ),
            (
                |p| p["phases"][0]["steps"][0] = json!({"repeat": {"max_rounds": 0, "steps": []}}),
                "phases[0].steps[0].repeat.max_rounds",
                "must be between 1 and 20 (got 0)",
            ),
            (
                |p| p["phases"][0]["steps"][0] = json!({"repeat": {"max_rounds": 21, "steps": []}}),
                "phases[0].steps[0].repeat.max_rounds",
                "must be between 1 and 20 (got 21)",
            ),
            (
                |p| {
                    p["phases"][0]["steps"][0] = json!({"repeat": {"max_rounds": 2.5, "steps": []}})
                },
                "phases[0].steps[0].repeat.max_rounds",
                "must be an integer between 1 and 20",
            ),
            (
                |p| p["lifetime_seconds"] = json!(0),
                "lifetime_seconds",
                "must be at least 1 (got 0)",
            ),
            (
                |p| p["lifetime_seconds"] = json!(-5),
                "lifetime_seconds",
                "must be at least 1 (got -5)",
            ),
            (
                |p| p["phases"][0]["steps"][0] = json!({"map": {"over": ["x"], "as": "i", "use": "a", "prompt": "", "max_parallel": 0}}),
                "phases[0].steps[0].map.max_parallel",
                "must be at least 1",
            ),
            (
                |p| {
                    p["phases"][0]["steps"][0] =
                        json!({"map": {"over": "nothing", "as": "i", "use": "a", "prompt": ""}})
                },
                "phases[0].steps[0].map.over",
                "reads the variable `nothing`",
            ),
            (
                |p| {
                    p["phases"][0]["steps"][0] =
                        json!({"map": {"over": 3, "as": "i", "use": "a", "prompt": ""}})
                },
                "phases[0].steps[0].map.over",
                "must be a variable name or a list of strings",
            ),
            (
                |p| p["phases"][0]["steps"][0] = json!({"agent": {}, "set": {}}),
                "phases[0].steps[0]",
                "exactly one key",
            ),
            (
                |p| p["phases"][0]["steps"][0] = json!({"mapp": {}}),
                "phases[0].steps[0].mapp",
                "did you mean `map`",
            ),
            (
                |p| {
                    p["phases"][0]["steps"][0] =
                        json!({"split": {"var": "v", "text": "", "by": "words"}})
                },
                "phases[0].steps[0].split.by",
                "must be one of `lines`, `json` (got `words`)",
            ),
            (
                |p| p["phases"][0]["steps"][0]["agent"]["on_error"] = json!("ignore"),
                "phases[0].steps[0].agent.on_error",
                "must be one of `fail`, `continue`",
            ),
            (
                |p| {
                    p["phases"][0]["steps"][0] =
                        json!({"if": {"when": {"empty": "out"}, "then": []}})
                },
                "phases[0].steps[0].if.when.empty",
                "reads the variable `out`",
            ),
            (
                |p| {
                    p["phases"][0]["steps"][0] = json!({"if": {"when": {"never": "x"}, "then": []}})
                },
                "phases[0].steps[0].if.when.never",
                "not a known field of a condition",
            ),
            (
                |p| p["result"] = json!("{{out.first}}"),
                "result",
                "asks for `first`",
            ),
            (
                |p| p["result"] = json!("{{missing}}"),
                "result",
                "reads the variable `missing`",
            ),
            (|p| *p = json!([]), "", "the plan must be a JSON object"),
            (
                |p| {
                    p.as_object_mut().unwrap().remove("phases");
                },
                "phases",
                "`phases` is required",
            ),
        ];
        for (change, path, words) in cases {
            let mut plan = one_step_plan();
            change(&mut plan);
            let e = refused(&plan);
            assert_eq!(e.kind, ErrorKind::Program, "{e}");
            assert_eq!(e.path, path, "{e}");
            assert!(e.message().contains(words), "{path}: {e}");
            if !path.is_empty() {
                assert!(e.message().contains(&format!("`{path}")), "{e}");
            }
        }
    }

    #[test]
    fn predefined_names_must_be_unique_in_the_list() {
        let twins = [
            RosterEntry::Agent(ListedAgent {
                id: "agent_1",
                name: "Twin",
            }),
            RosterEntry::Agent(ListedAgent {
                id: "agent_2",
                name: "Twin",
            }),
        ];
        let w = Workflows {
            predefined_agents: &twins,
            session_agent: LEAD,
            inline_agents: true,
        };
        let plan = json!({"agents": {"t": {"predefined": "Twin"}}, "phases": []});
        let e = check(&plan, &w, 1, &Limits::default()).unwrap_err();
        assert_eq!(e.path, "agents.t.predefined");
        assert!(e.message().contains("name one by its id"), "{e}");
        let plan = json!({"agents": {"t": {"predefined": "agent_2"}}, "phases": []});
        let plan = check(&plan, &w, 1, &Limits::default()).unwrap();
        assert_eq!(
            plan.agents["t"],
            Agent::Predefined {
                predefined: "agent_2".into()
            }
        );
    }

    #[test]
    fn inline_agents_need_the_setting() {
        let w = Workflows {
            inline_agents: false,
            ..workflows()
        };
        let e = check(&one_step_plan(), &w, 1, &Limits::default()).unwrap_err();
        assert_eq!((e.kind, e.path.as_str()), (ErrorKind::Program, "agents.a"));
        assert!(e.message().contains("inline agents are disabled"), "{e}");
        let predefined = json!({
            "agents": {"a": {"predefined": "Researcher"}},
            "phases": [{"name": "p", "steps": [{"agent": {"use": "a", "prompt": "hi"}}]}]
        });
        check(&predefined, &w, 1, &Limits::default()).unwrap();
        let none = Workflows {
            predefined_agents: &[],
            ..w
        };
        let e = check(&one_step_plan(), &none, 1, &Limits::default()).unwrap_err();
        assert!(e.message().ends_with("disabled for this session"), "{e}");
    }

    /// Reads are checked in document order, not by what runs first.
    #[test]
    fn variables_are_read_only_after_an_assignment_in_document_order() {
        let plan = |steps: Value, result: Value| {
            json!({
                "agents": {"a": {"system": "s"}},
                "inputs": {"given": "g"},
                "phases": [{"name": "p", "steps": steps}],
                "result": result
            })
        };
        let ok = [
            // Assigned in a branch: readable after the if, and in the else branch.
            plan(
                json!([{"if": {"when": {"empty": "given"}, "then": [{"set": {"var": "v", "value": ""}}],
                               "else": [{"set": {"var": "w", "value": "{{v}}"}}]}}]),
                json!("{{v}}{{w}}"),
            ),
            // A map's binding and index in its prompt; its save after it.
            plan(
                json!([{"map": {"over": "given", "as": "it", "use": "a", "prompt": "{{it}} {{index}}", "save": "all"}}]),
                json!("{{all}}"),
            ),
            // A repeat's until reads what its steps assign, and {{round}}.
            plan(
                json!([{"repeat": {"max_rounds": 2, "steps": [{"set": {"var": "v", "value": "{{round}}"}}],
                                   "until": {"equals": {"text": "{{v}}", "value": "{{round}}"}}}}]),
                json!("{{v}}"),
            ),
            // A map inside a repeat has both.
            plan(
                json!([{"repeat": {"max_rounds": 2, "steps": [
                    {"map": {"over": ["x"], "as": "it", "use": "a", "prompt": "{{round}}.{{index}}"}}]}}]),
                Value::Null,
            ),
        ];
        for p in ok {
            check(&p, &workflows(), 1, &Limits::default()).unwrap_or_else(|e| panic!("{e}: {p}"));
        }
        let refused_cases = [
            (
                plan(
                    json!([{"set": {"var": "v", "value": "{{w}}"}}, {"set": {"var": "w", "value": ""}}]),
                    Value::Null,
                ),
                "phases[0].steps[0].set.value",
                "`w`",
            ),
            (
                plan(
                    json!([{"repeat": {"max_rounds": 2, "steps": [
                        {"agent": {"use": "a", "prompt": "{{review}}"}},
                        {"agent": {"use": "a", "prompt": "x", "save": "review"}}]}}]),
                    Value::Null,
                ),
                "phases[0].steps[0].repeat.steps[0].agent.prompt",
                "set the variable before the `repeat`",
            ),
            (
                plan(
                    json!([{"map": {"over": "given", "as": "it", "use": "a", "prompt": ""}}]),
                    json!("{{it}}"),
                ),
                "result",
                "`it`",
            ),
            (
                plan(
                    json!([{"split": {"var": "v", "text": "{{v}}", "by": "lines"}}]),
                    Value::Null,
                ),
                "phases[0].steps[0].split.text",
                "`v`",
            ),
            (
                plan(
                    json!([{"repeat": {"max_rounds": 1, "steps": []}}]),
                    json!("{{round}}"),
                ),
                "result",
                "only inside a `repeat`",
            ),
            (
                plan(
                    json!([{"map": {"over": ["x"], "as": "it", "use": "a", "prompt": "", "save": "s"}},
                           {"if": {"when": {"equals": {"text": "{{index}}", "value": "1"}}, "then": []}}]),
                    Value::Null,
                ),
                "phases[0].steps[1].if.when.equals.text",
                "only a map's `prompt` has",
            ),
            (
                plan(
                    json!([{"if": {"when": {"any": [{"empty": "given"}, {"not": {"failed": "x"}}]}, "then": []}}]),
                    Value::Null,
                ),
                "phases[0].steps[0].if.when.any[1].not.failed",
                "`x`",
            ),
        ];
        for (p, path, words) in refused_cases {
            let e = refused(&p);
            assert_eq!(e.path, path, "{e}");
            assert!(e.message().contains(words), "{e}");
        }
    }

    /// Each size limit at the limit passes and one past it is refused as a size limit.
    #[test]
    fn size_limits_are_unknown_errors() {
        let limits = Limits::default();
        fn step() -> Value {
            json!({"set": {"var": "v", "value": "x"}})
        }
        fn in_phase(steps: Vec<Value>) -> Value {
            json!({"agents": {"a": {"system": "s"}}, "phases": [{"name": "p", "steps": steps}]})
        }
        fn phases(n: usize) -> Value {
            json!({"agents": {}, "phases": (0..n).map(|_| json!({"name": "p", "steps": []})).collect::<Vec<_>>()})
        }
        fn agents(n: usize) -> Value {
            let agents: serde_json::Map<String, Value> = (0..n)
                .map(|i| (format!("a{i}"), json!({"system": "s"})))
                .collect();
            json!({"agents": agents, "phases": []})
        }
        fn steps(n: usize) -> Value {
            in_phase(vec![step(); n])
        }
        fn nested(depth: usize) -> Value {
            let mut steps = vec![step()];
            for _ in 1..depth {
                steps = vec![json!({"repeat": {"max_rounds": 1, "steps": steps}})];
            }
            in_phase(steps)
        }
        fn over(n: usize) -> Value {
            let half: Vec<String> = (0..n / 2).map(|i| i.to_string()).collect();
            let rest: Vec<String> = (0..n - n / 2).map(|i| i.to_string()).collect();
            in_phase(vec![
                json!({"map": {"over": half, "as": "i", "use": "a", "prompt": ""}}),
                json!({"map": {"over": rest, "as": "i", "use": "a", "prompt": ""}}),
            ])
        }
        fn bytes(n: usize) -> Value {
            let mut plan = json!({"agents": {}, "phases": [], "description": ""});
            let base = serde_json::to_vec(&plan).unwrap().len();
            plan["description"] = json!("d".repeat(n - base));
            assert_eq!(serde_json::to_vec(&plan).unwrap().len(), n);
            plan
        }
        type Make = fn(usize) -> Value;
        let cases: Vec<(Make, usize, &str, &str)> = vec![
            (
                phases,
                limits.max_phases,
                "phases",
                "has 21 phases; at most 20",
            ),
            (
                agents,
                limits.max_agent_definitions,
                "agents",
                "defines 51 agents; at most 50",
            ),
            (
                steps,
                limits.max_steps,
                "phases[0].steps[200]",
                "step number 201 of the plan; at most 200",
            ),
            (
                nested,
                limits.max_nesting,
                "phases[0].steps[0].repeat.steps[0].repeat.steps[0].repeat.steps[0].repeat.steps[0]",
                "nested 5 deep",
            ),
            (
                over,
                limits.max_over_items,
                "phases[0].steps[1].map.over",
                "brings the plan's literal `over` items to 1001; at most 1000",
            ),
            (
                bytes,
                limits.max_plan_bytes,
                "",
                "65537 bytes of JSON; at most 65536",
            ),
        ];
        for (make, limit, path, words) in cases {
            check(&make(limit), &workflows(), 1, &limits)
                .unwrap_or_else(|e| panic!("{path} at the limit: {e}"));
            let e = check(&make(limit + 1), &workflows(), 1, &limits).unwrap_err();
            assert_eq!(e.kind, ErrorKind::SizeLimit, "{e}");
            assert_eq!(e.error_type(), "unknown_error");
            assert_eq!(e.path, path, "{e}");
            assert!(e.message().contains(words), "{e}");
        }
    }

    #[test]
    fn nested_steps_count_towards_the_step_limit() {
        let limits = Limits {
            max_steps: 3,
            ..Limits::default()
        };
        let step = json!({"set": {"var": "v", "value": ""}});
        let plan = json!({"agents": {}, "phases": [
            {"name": "a", "steps": [{"if": {"when": {"all": []}, "then": [step], "else": [step]}}]},
            {"name": "b", "steps": [step]}
        ]});
        let e = check(&plan, &workflows(), 1, &limits).unwrap_err();
        assert_eq!(
            (e.kind, e.path.as_str()),
            (ErrorKind::SizeLimit, "phases[1].steps[0]")
        );
    }
}
