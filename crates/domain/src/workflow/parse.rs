//! Reading a plan from JSON: its shape and the rules one member alone decides (names, ranges,
//! template syntax). Unknown keys are refused, with a suggestion when one looks like a typo,
//! and every error names the path of the member at fault. Rules that need the whole plan or
//! the session (references, variable order, sizes) are in [`super::check`].

use std::collections::BTreeMap;

use serde_json::{Map, Value};

use super::error::{PlanError, PlanResult, show};
use super::ident::{RESERVED_VARS, is_identifier};
use super::limits::{IDENTIFIER_CHARS, MAX_ROUNDS};
use super::plan::{
    Agent, AgentStep, Compare, Cond, IfStep, InlineAgent, Input, MapStep, OnError, Over, Phase,
    Plan, RepeatStep, SetStep, SplitBy, SplitStep, Step,
};
use super::template::Tmpl;
use crate::fields::{Obj, describe, must_be, one_of, quoted};
use crate::invalid::{Invalid, join};

const PLAN_KEYS: [&str; 7] = [
    "name",
    "description",
    "lifetime_seconds",
    "agents",
    "inputs",
    "phases",
    "result",
];
const STEP_KINDS: [&str; 6] = ["agent", "map", "set", "split", "repeat", "if"];
const COND_KINDS: [&str; 7] = ["contains", "equals", "failed", "empty", "not", "all", "any"];

/// Reads a plan: its shape and the rules each member alone decides, nothing that needs the
/// session or the rest of the plan. A plan stored after [`super::check::check`] reads back
/// the same way.
pub fn parse(v: &Value) -> PlanResult<Plan> {
    if !v.is_object() {
        return Err(PlanError::program(
            "",
            format!("the plan must be a JSON object (got {})", describe(v)),
        ));
    }
    let o = object("", v, "a workflow plan", &PLAN_KEYS)?;
    let agents = match o.get("agents") {
        None => return Err(required(&o, "agents")),
        Some(v) => agents(&o.path("agents"), v)?,
    };
    let inputs = match o.get("inputs") {
        None => BTreeMap::new(),
        Some(v) => inputs(&o.path("inputs"), v)?,
    };
    let phases = list(&o, "phases")?
        .ok_or_else(|| required(&o, "phases"))?
        .iter()
        .enumerate()
        .map(|(i, p)| phase(&format!("phases[{i}]"), p))
        .collect::<PlanResult<Vec<_>>>()?;
    Ok(Plan {
        name: string(&o, "name")?.map(str::to_string),
        description: string(&o, "description")?.map(str::to_string),
        lifetime_seconds: bounded(&o, "lifetime_seconds", 1, None)?,
        agents,
        inputs,
        phases,
        result: string(&o, "result")?
            .map(|t| Tmpl::parse(&o.path("result"), t))
            .transpose()?,
    })
}

fn agents(at: &str, v: &Value) -> PlanResult<BTreeMap<String, Agent>> {
    let map = as_map(at, v, "an object of agents by key")?;
    let mut out = BTreeMap::new();
    for (key, def) in map {
        let path = join(at, key);
        if !is_identifier(key) {
            return Err(PlanError::program(
                &path,
                format!("`{path}`: `{key}` is not a valid agent key: {NAME_RULE}"),
            ));
        }
        out.insert(key.clone(), agent(&path, def)?);
    }
    Ok(out)
}

fn agent(at: &str, v: &Value) -> PlanResult<Agent> {
    let map = as_map(at, v, "an agent: {\"predefined\": …} or {\"system\": …}")?;
    if map.contains_key("predefined") {
        let o = object(at, v, "a predefined agent", &["predefined"])?;
        let predefined = o
            .req_str("predefined")
            .map_err(|e| PlanError::from_invalid(&o.path("predefined"), e))?;
        return Ok(Agent::Predefined {
            predefined: predefined.to_string(),
        });
    }
    let o = object(at, v, "an inline agent", &["name", "description", "system"])?;
    let system = string(&o, "system")?.ok_or_else(|| {
        PlanError::program(
            o.path("system"),
            format!(
                "`{}` is required (or give `predefined` to use a listed agent)",
                o.path("system")
            ),
        )
    })?;
    Ok(Agent::Inline(InlineAgent {
        name: string(&o, "name")?.map(str::to_string),
        description: string(&o, "description")?.map(str::to_string),
        system: system.to_string(),
    }))
}

fn inputs(at: &str, v: &Value) -> PlanResult<BTreeMap<String, Input>> {
    let map = as_map(at, v, "an object of variables by name")?;
    let mut out = BTreeMap::new();
    for (name, value) in map {
        let path = join(at, name);
        var_name(&path, name)?;
        let input = match value {
            Value::String(s) => Input::Text(s.clone()),
            Value::Array(items) => Input::List(
                items
                    .iter()
                    .enumerate()
                    .map(|(i, item)| match item {
                        Value::String(s) => Ok(s.clone()),
                        other => Err(PlanError::program(
                            format!("{path}[{i}]"),
                            must_be(&format!("{path}[{i}]"), "a string", other).message,
                        )),
                    })
                    .collect::<PlanResult<_>>()?,
            ),
            other => {
                return Err(PlanError::program(
                    &path,
                    must_be(&path, "a string or a list of strings", other).message,
                ));
            }
        };
        out.insert(name.clone(), input);
    }
    Ok(out)
}

fn phase(at: &str, v: &Value) -> PlanResult<Phase> {
    let o = object(at, v, "a phase", &["name", "description", "steps"])?;
    let name = string(&o, "name")?.ok_or_else(|| required(&o, "name"))?;
    if name.trim().is_empty() {
        return Err(PlanError::program(
            o.path("name"),
            format!("`{}` must not be empty", o.path("name")),
        ));
    }
    Ok(Phase {
        name: name.to_string(),
        description: string(&o, "description")?.map(str::to_string),
        steps: steps(&o, "steps")?.ok_or_else(|| required(&o, "steps"))?,
    })
}

/// The optional list of steps at `key`.
fn steps(o: &Obj, key: &str) -> PlanResult<Option<Vec<Step>>> {
    let Some(items) = list(o, key)? else {
        return Ok(None);
    };
    let at = o.path(key);
    items
        .iter()
        .enumerate()
        .map(|(i, s)| step(&format!("{at}[{i}]"), s))
        .collect::<PlanResult<Vec<_>>>()
        .map(Some)
}

fn step(at: &str, v: &Value) -> PlanResult<Step> {
    let (kind, body) = single_key(at, v, "a step", &STEP_KINDS)?;
    let at = &join(at, kind);
    Ok(match kind {
        "agent" => {
            let o = object(
                at,
                body,
                "an agent step",
                &["use", "prompt", "save", "on_error"],
            )?;
            Step::Agent(AgentStep {
                agent: req_string(&o, "use")?.to_string(),
                prompt: req_tmpl(&o, "prompt")?,
                save: opt_var(&o, "save")?,
                on_error: on_error(&o)?,
            })
        }
        "map" => {
            let known = [
                "over",
                "as",
                "use",
                "prompt",
                "save",
                "on_error",
                "max_parallel",
            ];
            let o = object(at, body, "a map step", &known)?;
            Step::Map(MapStep {
                over: over(&o)?,
                bind: req_var(&o, "as")?,
                agent: req_string(&o, "use")?.to_string(),
                prompt: req_tmpl(&o, "prompt")?,
                save: opt_var(&o, "save")?,
                on_error: on_error(&o)?,
                max_parallel: bounded(&o, "max_parallel", 1, None)?,
            })
        }
        "set" => {
            let o = object(at, body, "a set step", &["var", "value"])?;
            Step::Set(SetStep {
                var: req_var(&o, "var")?,
                value: req_tmpl(&o, "value")?,
            })
        }
        "split" => {
            let o = object(at, body, "a split step", &["var", "text", "by"])?;
            let by = match req_string(&o, "by")? {
                "lines" => SplitBy::Lines,
                "json" => SplitBy::Json,
                other => {
                    let path = o.path("by");
                    return Err(PlanError::program(
                        &path,
                        one_of(&path, &["lines", "json"], other).message,
                    ));
                }
            };
            Step::Split(SplitStep {
                var: req_var(&o, "var")?,
                text: req_tmpl(&o, "text")?,
                by,
            })
        }
        "repeat" => {
            let o = object(at, body, "a repeat step", &["max_rounds", "steps", "until"])?;
            let max_rounds = bounded(&o, "max_rounds", 1, Some(MAX_ROUNDS))?
                .ok_or_else(|| required(&o, "max_rounds"))?;
            Step::Repeat(RepeatStep {
                max_rounds,
                steps: steps(&o, "steps")?.ok_or_else(|| required(&o, "steps"))?,
                until: o
                    .get("until")
                    .map(|c| cond(&o.path("until"), c))
                    .transpose()?,
            })
        }
        _ => {
            let o = object(at, body, "an if step", &["when", "then", "else"])?;
            let when = o.get("when").ok_or_else(|| required(&o, "when"))?;
            Step::If(IfStep {
                when: cond(&o.path("when"), when)?,
                then: steps(&o, "then")?.ok_or_else(|| required(&o, "then"))?,
                otherwise: steps(&o, "else")?.unwrap_or_default(),
            })
        }
    })
}

fn cond(at: &str, v: &Value) -> PlanResult<Cond> {
    let (kind, body) = single_key(at, v, "a condition", &COND_KINDS)?;
    let at = &join(at, kind);
    Ok(match kind {
        "contains" | "equals" => {
            let o = object(at, body, "a comparison", &["text", "value"])?;
            let compare = Compare {
                text: req_tmpl(&o, "text")?,
                value: string(&o, "value")?
                    .ok_or_else(|| required(&o, "value"))?
                    .to_string(),
            };
            if kind == "contains" {
                Cond::Contains(compare)
            } else {
                Cond::Equals(compare)
            }
        }
        "failed" | "empty" => {
            let name = match body {
                Value::String(s) => s,
                other => return Err(program(at, must_be(at, "a variable name", other))),
            };
            var_name(at, name)?;
            if kind == "failed" {
                Cond::Failed(name.clone())
            } else {
                Cond::Empty(name.clone())
            }
        }
        "not" => Cond::Not(Box::new(cond(at, body)?)),
        _ => {
            let Value::Array(items) = body else {
                return Err(program(at, must_be(at, "a list of conditions", body)));
            };
            let conds = items
                .iter()
                .enumerate()
                .map(|(i, c)| cond(&format!("{at}[{i}]"), c))
                .collect::<PlanResult<Vec<_>>>()?;
            if kind == "all" {
                Cond::All(conds)
            } else {
                Cond::Any(conds)
            }
        }
    })
}

fn over(o: &Obj) -> PlanResult<Over> {
    let path = o.path("over");
    match o.get("over") {
        None => Err(required(o, "over")),
        Some(Value::String(name)) => {
            var_name(&path, name)?;
            Ok(Over::Var(name.clone()))
        }
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, item)| match item {
                Value::String(s) => Ok(s.clone()),
                other => Err(program(
                    &format!("{path}[{i}]"),
                    must_be(&format!("{path}[{i}]"), "a string", other),
                )),
            })
            .collect::<PlanResult<Vec<_>>>()
            .map(Over::Items),
        Some(other) => Err(program(
            &path,
            must_be(&path, "a variable name or a list of strings", other),
        )),
    }
}

fn on_error(o: &Obj) -> PlanResult<OnError> {
    match string(o, "on_error")? {
        None | Some("fail") => Ok(OnError::Fail),
        Some("continue") => Ok(OnError::Continue),
        Some(other) => {
            let path = o.path("on_error");
            Err(program(&path, one_of(&path, &["fail", "continue"], other)))
        }
    }
}

/// The rule a KEY or VAR breaks, for messages.
const NAME_RULE: &str =
    "letters, digits and `_`, starting with a letter or `_`, at most 64 characters";

/// Refuses a VAR that is not an identifier or takes a reserved name.
fn var_name(path: &str, name: &str) -> PlanResult<()> {
    if !is_identifier(name) {
        let shown = if name.chars().count() > IDENTIFIER_CHARS {
            format!("{} characters", name.chars().count())
        } else {
            format!("`{name}`")
        };
        return Err(PlanError::program(
            path,
            format!(
                "{} must be a variable name: {NAME_RULE} (got {shown})",
                show(path)
            ),
        ));
    }
    if RESERVED_VARS.contains(&name) {
        let means = if name == "index" {
            "the number of a map's item"
        } else {
            "the number of a repeat's round"
        };
        return Err(PlanError::program(
            path,
            format!(
                "{} may not be named `{name}`: `{{{{{name}}}}}` is {means}; reserved are {}",
                show(path),
                quoted(&RESERVED_VARS)
            ),
        ));
    }
    Ok(())
}

/// The object at `at` with a single key naming its kind, and that key's value.
fn single_key<'a>(
    at: &str,
    v: &'a Value,
    what: &str,
    kinds: &[&str],
) -> PlanResult<(&'a str, &'a Value)> {
    let map = as_map(
        at,
        v,
        &format!("{what}: an object with one key, one of {}", quoted(kinds)),
    )?;
    let mut keys = map.iter();
    match (keys.next(), keys.next()) {
        (Some((k, body)), None) if kinds.contains(&k.as_str()) => Ok((k.as_str(), body)),
        (Some((k, _)), None) => Err(PlanError::from_invalid(
            at,
            Invalid::unknown_field(at, k, what, kinds),
        )),
        _ => {
            let got: Vec<&str> = map.keys().map(String::as_str).collect();
            Err(PlanError::program(
                at,
                format!(
                    "{} must be {what}: an object with exactly one key, one of {} (got {})",
                    show(at),
                    quoted(kinds),
                    if got.is_empty() {
                        "no keys".to_string()
                    } else {
                        format!("the keys {}", quoted(&got))
                    }
                ),
            ))
        }
    }
}

fn as_map<'a>(at: &str, v: &'a Value, expected: &str) -> PlanResult<&'a Map<String, Value>> {
    v.as_object()
        .ok_or_else(|| program(at, must_be(at, expected, v)))
}

fn object<'a>(at: &str, v: &'a Value, what: &str, known: &[&str]) -> PlanResult<Obj<'a>> {
    Obj::new(at, v, what, known).map_err(|e| PlanError::from_invalid(at, e))
}

fn program(at: &str, invalid: Invalid) -> PlanError {
    PlanError::from_invalid(at, invalid)
}

fn required(o: &Obj, key: &str) -> PlanError {
    let path = o.path(key);
    PlanError::program(&path, format!("`{path}` is required"))
}

fn string<'a>(o: &Obj<'a>, key: &str) -> PlanResult<Option<&'a str>> {
    o.str(key).map_err(|e| program(&o.path(key), e))
}

fn req_string<'a>(o: &Obj<'a>, key: &str) -> PlanResult<&'a str> {
    string(o, key)?.ok_or_else(|| required(o, key))
}

fn req_tmpl(o: &Obj, key: &str) -> PlanResult<Tmpl> {
    Tmpl::parse(&o.path(key), req_string(o, key)?)
}

fn req_var(o: &Obj, key: &str) -> PlanResult<String> {
    let name = req_string(o, key)?;
    var_name(&o.path(key), name)?;
    Ok(name.to_string())
}

fn opt_var(o: &Obj, key: &str) -> PlanResult<Option<String>> {
    let Some(name) = string(o, key)? else {
        return Ok(None);
    };
    var_name(&o.path(key), name)?;
    Ok(Some(name.to_string()))
}

fn list<'a>(o: &Obj<'a>, key: &str) -> PlanResult<Option<&'a Vec<Value>>> {
    o.list(key).map_err(|e| program(&o.path(key), e))
}

/// An optional whole number of at least `min` and, when given, at most `max`.
fn bounded(o: &Obj, key: &str, min: u64, max: Option<u64>) -> PlanResult<Option<u64>> {
    let path = o.path(key);
    let Some(v) = o.get(key) else {
        return Ok(None);
    };
    let range = match max {
        Some(max) => format!("between {min} and {max}"),
        None => format!("at least {min}"),
    };
    match (v.as_u64(), v.as_i64()) {
        (Some(n), _) if n >= min && max.is_none_or(|max| n <= max) => Ok(Some(n)),
        (Some(_), _) | (None, Some(_)) => Err(PlanError::program(
            &path,
            format!("`{path}` must be {range} (got {v})"),
        )),
        (None, None) => Err(program(
            &path,
            must_be(&path, &format!("an integer {range}"), v),
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::examples::{accepted_plans, full_plan};
    use super::*;

    #[test]
    fn a_parsed_plan_serialises_to_json_that_parses_back_the_same() {
        for v in accepted_plans() {
            let plan = parse(&v).unwrap();
            let again = serde_json::to_value(&plan).unwrap();
            assert_eq!(parse(&again).unwrap(), plan, "{v}");
        }
    }

    #[test]
    fn parsing_keeps_what_was_written_and_fills_step_defaults() {
        let plan = parse(&full_plan()).unwrap();
        assert_eq!(plan.name.as_deref(), Some("Tides report"));
        assert_eq!(plan.lifetime_seconds, Some(100_000));
        assert_eq!(
            plan.agents["planner"],
            Agent::Predefined {
                predefined: "Planner".into()
            }
        );
        assert_eq!(
            plan.agents["writer"],
            Agent::Inline(InlineAgent {
                name: None,
                description: None,
                system: "You write concise reports.".into()
            })
        );
        assert_eq!(
            plan.inputs["angles"],
            Input::List(vec!["physics".into(), "history".into()])
        );
        let Step::Agent(first) = &plan.phases[0].steps[0] else {
            panic!()
        };
        assert_eq!(first.on_error, OnError::Fail);
        let Step::Map(map) = &plan.phases[1].steps[0] else {
            panic!()
        };
        assert_eq!(
            (map.on_error, map.max_parallel, &map.over),
            (OnError::Continue, Some(100), &Over::Var("topics".into()))
        );
    }

    #[test]
    fn serde_reads_plans_through_the_same_rules() {
        let plan: Plan = serde_json::from_value(full_plan()).unwrap();
        assert_eq!(plan, parse(&full_plan()).unwrap());
        let bad =
            json!({"agents": {}, "phases": [{"name": "p", "steps": [{"set": {"var": "v"}}]}]});
        let e = serde_json::from_value::<Plan>(bad).unwrap_err();
        assert_eq!(e.to_string(), "`phases[0].steps[0].set.value` is required");
    }

    /// Shape errors the rule table of `check` does not already cover: wrong types and
    /// missing members, each named by its path.
    #[test]
    fn shape_errors_name_the_path() {
        let step = |s: Value| json!({"agents": {"a": {"system": "s"}}, "phases": [{"name": "p", "steps": [s]}]});
        let cases = [
            (
                json!({"agents": [], "phases": []}),
                "agents",
                "must be an object of agents by key (got a list)",
            ),
            (
                json!({"agents": {}, "phases": {}}),
                "phases",
                "must be a list",
            ),
            (json!({"phases": []}), "agents", "`agents` is required"),
            (
                json!({"agents": {"a": "s"}, "phases": []}),
                "agents.a",
                "must be an agent",
            ),
            (
                json!({"agents": {"a": {}}, "phases": []}),
                "agents.a.system",
                "is required (or give `predefined`",
            ),
            (
                json!({"agents": {"a": {"system": 3}}, "phases": []}),
                "agents.a.system",
                "must be a string",
            ),
            (
                json!({"agents": {"a": {"predefined": ""}}, "phases": []}),
                "agents.a.predefined",
                "must not be empty",
            ),
            (
                json!({"agents": {}, "inputs": {"v": {}}, "phases": []}),
                "inputs.v",
                "a string or a list of strings",
            ),
            (
                json!({"agents": {}, "phases": [3]}),
                "phases[0]",
                "must be an object",
            ),
            (
                json!({"agents": {}, "phases": [{"name": "p"}]}),
                "phases[0].steps",
                "is required",
            ),
            (
                json!({"agents": {}, "phases": [], "name": 1}),
                "name",
                "must be a string",
            ),
            (
                json!({"agents": {}, "phases": [], "result": []}),
                "result",
                "must be a string",
            ),
            (step(json!("agent")), "phases[0].steps[0]", "must be a step"),
            (step(json!({})), "phases[0].steps[0]", "(got no keys)"),
            (
                step(json!({"agent": {"prompt": "x"}})),
                "phases[0].steps[0].agent.use",
                "is required",
            ),
            (
                step(json!({"agent": {"use": "a", "prompt": 1}})),
                "phases[0].steps[0].agent.prompt",
                "must be a string",
            ),
            (
                step(json!({"map": {"over": ["x", 2], "as": "i", "use": "a", "prompt": ""}})),
                "phases[0].steps[0].map.over[1]",
                "must be a string",
            ),
            (
                step(json!({"map": {"over": "1x", "as": "i", "use": "a", "prompt": ""}})),
                "phases[0].steps[0].map.over",
                "must be a variable name",
            ),
            (
                step(json!({"map": {"over": ["x"], "use": "a", "prompt": ""}})),
                "phases[0].steps[0].map.as",
                "is required",
            ),
            (
                step(json!({"map": {"over": ["x"], "as": "index", "use": "a", "prompt": ""}})),
                "phases[0].steps[0].map.as",
                "may not be named `index`",
            ),
            (
                step(json!({"set": {"var": "v", "value": "{{v.x}}"}})),
                "phases[0].steps[0].set.value",
                "asks for `x`",
            ),
            (
                step(json!({"split": {"var": "v", "text": ""}})),
                "phases[0].steps[0].split.by",
                "is required",
            ),
            (
                step(json!({"repeat": {"max_rounds": 1}})),
                "phases[0].steps[0].repeat.steps",
                "is required",
            ),
            (
                step(json!({"repeat": {"steps": []}})),
                "phases[0].steps[0].repeat.max_rounds",
                "is required",
            ),
            (
                step(json!({"repeat": {"max_rounds": "2", "steps": []}})),
                "phases[0].steps[0].repeat.max_rounds",
                "must be an integer",
            ),
            (
                step(json!({"repeat": {"max_rounds": 1, "steps": [], "until": {"all": {}}}})),
                "phases[0].steps[0].repeat.until.all",
                "must be a list of conditions",
            ),
            (
                step(json!({"if": {"then": []}})),
                "phases[0].steps[0].if.when",
                "is required",
            ),
            (
                step(json!({"if": {"when": {"all": []}}})),
                "phases[0].steps[0].if.then",
                "is required",
            ),
            (
                step(json!({"if": {"when": {"all": []}, "then": [], "else": [{}]}})),
                "phases[0].steps[0].if.else[0]",
                "exactly one key",
            ),
            (
                step(json!({"if": {"when": {"failed": 3}, "then": []}})),
                "phases[0].steps[0].if.when.failed",
                "must be a variable name (got an integer)",
            ),
            (
                step(json!({"if": {"when": {"empty": "round"}, "then": []}})),
                "phases[0].steps[0].if.when.empty",
                "may not be named `round`",
            ),
            (
                step(
                    json!({"if": {"when": {"not": {"all": [{"equals": {"text": "x"}}]}}, "then": []}}),
                ),
                "phases[0].steps[0].if.when.not.all[0].equals.value",
                "is required",
            ),
            (
                step(
                    json!({"if": {"when": {"contains": {"text": "x", "value": "y", "case": "any"}}, "then": []}}),
                ),
                "phases[0].steps[0].if.when.contains.case",
                "not a known field of a comparison",
            ),
        ];
        for (v, path, words) in cases {
            let e = parse(&v).unwrap_err();
            assert_eq!(e.path, path, "{v}: {e}");
            assert!(e.message().contains(words), "{v}: {e}");
            assert!(e.message().contains(&format!("`{path}")), "{e}");
        }
    }
}
