//! The plan's JSON Schema: the `input_schema` of the `ant__start_workflow_run` tool, so the
//! model sees the format it must write. It describes the shape; the rules that need the
//! session or the whole plan (references, variable order, most size limits) are stated in
//! descriptions and enforced by [`super::check::check`].

use serde_json::{Value, json};

use super::limits::{IDENTIFIER_CHARS, Limits, MAX_ROUNDS};

/// The JSON Schema of a plan under `limits`.
pub fn plan_schema(limits: &Limits) -> Value {
    let ident = format!("^[A-Za-z_][A-Za-z0-9_]{{0,{}}}$", IDENTIFIER_CHARS - 1);
    let steps = |what: &str| json!({"type": "array", "items": {"$ref": "#/$defs/step"}, "description": what});
    let kind = |name: &str, body: Value| {
        json!({
            "type": "object",
            "properties": {name: body},
            "required": [name],
            "additionalProperties": false,
        })
    };
    let on_error = json!({
        "enum": ["fail", "continue"],
        "description": "`fail` (default) ends the run when the agent fails; `continue` records the failure (the value is \"\", `failed` holds, `{{VAR.failed}}` counts it) and goes on",
    });
    let compare = json!({
        "type": "object",
        "properties": {
            "text": {"$ref": "#/$defs/template"},
            "value": {"type": "string", "description": "compared exactly, case-sensitive"},
        },
        "required": ["text", "value"],
        "additionalProperties": false,
    });
    json!({
        "type": "object",
        "description": "A workflow plan: agents run in phases of steps; the server runs it in the background and tells you when it ends. Every variable a template or condition reads must be an input or assigned by an earlier step.",
        "properties": {
            "name": {"type": "string", "description": "the run's name (at most 64 characters are kept)"},
            "description": {"type": ["string", "null"], "description": "at most 256 characters are kept"},
            "lifetime_seconds": {
                "type": "integer",
                "minimum": 1,
                "description": format!("how long the run may take; at most {} (the default)", limits.lifetime_seconds),
            },
            "agents": {
                "type": "object",
                "description": "the agents steps may `use`, by key",
                "propertyNames": {"$ref": "#/$defs/key"},
                "additionalProperties": {"$ref": "#/$defs/agent"},
                "maxProperties": limits.max_agent_definitions,
            },
            "inputs": {
                "type": "object",
                "description": "variables set before the first step",
                "propertyNames": {"$ref": "#/$defs/var"},
                "additionalProperties": {
                    "anyOf": [
                        {"type": "string"},
                        {"type": "array", "items": {"type": "string"}},
                    ]
                },
            },
            "phases": {
                "type": "array",
                "items": {"$ref": "#/$defs/phase"},
                "maxItems": limits.max_phases,
                "description": format!("run once each, in order; at most {} steps in all, nested at most {} deep", limits.max_steps, limits.max_nesting),
            },
            "result": {
                "$ref": "#/$defs/template",
                "description": "what the run returns to you; by default every variable as one JSON object",
            },
        },
        "required": ["agents", "phases"],
        "additionalProperties": false,
        "$defs": {
            "key": {"type": "string", "pattern": ident},
            "var": {
                "type": "string",
                "pattern": ident,
                "not": {"enum": ["index", "round"]},
                "description": "a variable name; `index` and `round` are reserved",
            },
            "template": {
                "type": "string",
                "description": "text in which {{VAR}} (a list renders as `[1] …` items), {{VAR.N}} (N-th item, from 1), {{VAR.count}}, {{VAR.failed}}, {{index}} (item number, in a map's prompt) and {{round}} (round number, in a repeat) are replaced; an unassigned variable is \"\"",
            },
            "agent": {
                "oneOf": [
                    {
                        "type": "object",
                        "description": "one of the predefined workflow agents",
                        "properties": {"predefined": {"type": "string", "minLength": 1, "description": "the agent's id, or its name if no other listed agent has it"}},
                        "required": ["predefined"],
                        "additionalProperties": false,
                    },
                    {
                        "type": "object",
                        "description": "an inline agent: your model and tools with this system prompt",
                        "properties": {
                            "name": {"type": "string"},
                            "description": {"type": "string"},
                            "system": {"type": "string"},
                        },
                        "required": ["system"],
                        "additionalProperties": false,
                    },
                ]
            },
            "phase": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "minLength": 1},
                    "description": {"type": ["string", "null"]},
                    "steps": steps("run in order"),
                },
                "required": ["name", "steps"],
                "additionalProperties": false,
            },
            "step": {
                "oneOf": [
                    kind("agent", json!({
                        "type": "object",
                        "description": "runs one agent on the prompt; `save` keeps its answer",
                        "properties": {
                            "use": {"$ref": "#/$defs/key"},
                            "prompt": {"$ref": "#/$defs/template"},
                            "save": {"$ref": "#/$defs/var"},
                            "on_error": on_error.clone(),
                        },
                        "required": ["use", "prompt"],
                        "additionalProperties": false,
                    })),
                    kind("map", json!({
                        "type": "object",
                        "description": "runs one agent per item, the item bound to `as` in the prompt; `save` keeps the answers as a list in item order",
                        "properties": {
                            "over": {
                                "anyOf": [
                                    {"$ref": "#/$defs/var"},
                                    {"type": "array", "items": {"type": "string"}, "maxItems": limits.max_over_items},
                                ],
                                "description": format!("a variable (a text is one item) or a list of items; at most {} listed items in the whole plan", limits.max_over_items),
                            },
                            "as": {"$ref": "#/$defs/var"},
                            "use": {"$ref": "#/$defs/key"},
                            "prompt": {"$ref": "#/$defs/template"},
                            "save": {"$ref": "#/$defs/var"},
                            "on_error": on_error,
                            "max_parallel": {
                                "type": "integer",
                                "minimum": 1,
                                "description": format!("agents working at once; at most {} (the default)", limits.max_running_threads),
                            },
                        },
                        "required": ["over", "as", "use", "prompt"],
                        "additionalProperties": false,
                    })),
                    kind("set", json!({
                        "type": "object",
                        "properties": {
                            "var": {"$ref": "#/$defs/var"},
                            "value": {"$ref": "#/$defs/template"},
                        },
                        "required": ["var", "value"],
                        "additionalProperties": false,
                    })),
                    kind("split", json!({
                        "type": "object",
                        "description": "makes a list: `lines` = trimmed non-empty lines; `json` = a JSON array of strings or scalars (anything else ends the run)",
                        "properties": {
                            "var": {"$ref": "#/$defs/var"},
                            "text": {"$ref": "#/$defs/template"},
                            "by": {"enum": ["lines", "json"]},
                        },
                        "required": ["var", "text", "by"],
                        "additionalProperties": false,
                    })),
                    kind("repeat", json!({
                        "type": "object",
                        "description": "runs the steps up to `max_rounds` times, stopping after a round whose `until` holds",
                        "properties": {
                            "max_rounds": {"type": "integer", "minimum": 1, "maximum": MAX_ROUNDS},
                            "steps": steps("run in order, each round"),
                            "until": {"$ref": "#/$defs/cond"},
                        },
                        "required": ["max_rounds", "steps"],
                        "additionalProperties": false,
                    })),
                    kind("if", json!({
                        "type": "object",
                        "properties": {
                            "when": {"$ref": "#/$defs/cond"},
                            "then": steps("run when `when` holds"),
                            "else": steps("run when it does not"),
                        },
                        "required": ["when", "then"],
                        "additionalProperties": false,
                    })),
                ]
            },
            "cond": {
                "oneOf": [
                    kind("contains", compare.clone()),
                    kind("equals", compare),
                    kind("failed", json!({"$ref": "#/$defs/var", "description": "holds if the variable is a failed result or a list with a failed item"})),
                    kind("empty", json!({"$ref": "#/$defs/var", "description": "holds if the variable is \"\", an empty list or unassigned"})),
                    kind("not", json!({"$ref": "#/$defs/cond"})),
                    kind("all", json!({"type": "array", "items": {"$ref": "#/$defs/cond"}})),
                    kind("any", json!({"type": "array", "items": {"$ref": "#/$defs/cond"}})),
                ]
            },
        },
    })
}

#[cfg(test)]
mod tests {
    use regex_automata::meta::Regex;
    use serde_json::{Map, json};

    use super::super::check::check;
    use super::super::examples::{accepted_plans, workflows};
    use super::*;

    /// A validator for the part of JSON Schema the plan's schema uses. Any other keyword
    /// fails the test, so the schema cannot grow a rule this test silently skips.
    struct Validator<'a> {
        root: &'a Value,
    }

    const KNOWN: [&str; 20] = [
        "type",
        "description",
        "properties",
        "required",
        "additionalProperties",
        "propertyNames",
        "maxProperties",
        "items",
        "maxItems",
        "oneOf",
        "anyOf",
        "not",
        "enum",
        "pattern",
        "minimum",
        "maximum",
        "minLength",
        "$ref",
        "$defs",
        "const",
    ];

    impl Validator<'_> {
        fn errors(&self, schema: &Value, v: &Value, at: &str, out: &mut Vec<String>) {
            let s = schema.as_object().expect("a schema is an object");
            for k in s.keys() {
                assert!(
                    KNOWN.contains(&k.as_str()),
                    "the test validator lacks `{k}`"
                );
            }
            let fail = |out: &mut Vec<String>, why: String| out.push(format!("{at}: {why}"));
            if let Some(r) = s.get("$ref").and_then(Value::as_str) {
                let name = r.strip_prefix("#/$defs/").expect("local refs only");
                let target = &self.root["$defs"][name];
                assert!(target.is_object(), "dangling ref {r}");
                self.errors(target, v, at, out);
            }
            if let Some(t) = s.get("type") {
                let types: Vec<&str> = match t {
                    Value::String(t) => vec![t],
                    Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
                    _ => panic!("bad type"),
                };
                let fits = types.iter().any(|t| match *t {
                    "object" => v.is_object(),
                    "array" => v.is_array(),
                    "string" => v.is_string(),
                    "integer" => v.is_i64() || v.is_u64(),
                    "null" => v.is_null(),
                    other => panic!("type {other}"),
                });
                if !fits {
                    fail(out, format!("not of type {t}"));
                    return;
                }
            }
            if let Some(e) = s.get("enum").and_then(Value::as_array)
                && !e.contains(v)
            {
                fail(out, format!("not one of {e:?}"));
            }
            if let Some(c) = s.get("const")
                && c != v
            {
                fail(out, format!("not {c}"));
            }
            if let (Some(p), Some(text)) = (s.get("pattern").and_then(Value::as_str), v.as_str())
                && !Regex::new(p).unwrap().is_match(text)
            {
                fail(out, format!("`{text}` does not match {p}"));
            }
            if let (Some(n), Some(text)) = (s.get("minLength").and_then(Value::as_u64), v.as_str())
                && (text.chars().count() as u64) < n
            {
                fail(out, "too short".into());
            }
            if let Some(n) = v.as_i64() {
                if s.get("minimum")
                    .and_then(Value::as_i64)
                    .is_some_and(|m| n < m)
                {
                    fail(out, "below the minimum".into());
                }
                if s.get("maximum")
                    .and_then(Value::as_i64)
                    .is_some_and(|m| n > m)
                {
                    fail(out, "above the maximum".into());
                }
            }
            if let Some(obj) = v.as_object() {
                self.object(s, obj, at, out);
            }
            if let Some(items) = v.as_array() {
                if let Some(max) = s.get("maxItems").and_then(Value::as_u64)
                    && items.len() as u64 > max
                {
                    out.push(format!("{at}: too many items"));
                }
                if let Some(item) = s.get("items") {
                    for (i, x) in items.iter().enumerate() {
                        self.errors(item, x, &format!("{at}[{i}]"), out);
                    }
                }
            }
            let passing = |list: &Value| {
                list.as_array()
                    .unwrap()
                    .iter()
                    .filter(|sub| {
                        let mut e = Vec::new();
                        self.errors(sub, v, at, &mut e);
                        e.is_empty()
                    })
                    .count()
            };
            if let Some(list) = s.get("oneOf")
                && passing(list) != 1
            {
                out.push(format!("{at}: matches {} of oneOf", passing(list)));
            }
            if let Some(list) = s.get("anyOf")
                && passing(list) == 0
            {
                out.push(format!("{at}: matches none of anyOf"));
            }
            if let Some(not) = s.get("not") {
                let mut e = Vec::new();
                self.errors(not, v, at, &mut e);
                if e.is_empty() {
                    out.push(format!("{at}: matches `not`"));
                }
            }
        }

        fn object(
            &self,
            s: &Map<String, Value>,
            obj: &Map<String, Value>,
            at: &str,
            out: &mut Vec<String>,
        ) {
            let props = s.get("properties").and_then(Value::as_object);
            for key in s
                .get("required")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if !obj.contains_key(key.as_str().unwrap()) {
                    out.push(format!("{at}: missing {key}"));
                }
            }
            if let Some(max) = s.get("maxProperties").and_then(Value::as_u64)
                && obj.len() as u64 > max
            {
                out.push(format!("{at}: too many keys"));
            }
            for (k, x) in obj {
                let path = format!("{at}.{k}");
                if let Some(names) = s.get("propertyNames") {
                    self.errors(names, &Value::String(k.clone()), &path, out);
                }
                match (props.and_then(|p| p.get(k)), s.get("additionalProperties")) {
                    (Some(sub), _) => self.errors(sub, x, &path, out),
                    (None, Some(Value::Bool(false))) => out.push(format!("{path}: not allowed")),
                    (None, Some(sub)) if sub.is_object() => self.errors(sub, x, &path, out),
                    _ => {}
                }
            }
        }
    }

    fn validate(v: &Value) -> Vec<String> {
        let schema = plan_schema(&Limits::default());
        let mut out = Vec::new();
        Validator { root: &schema }.errors(&schema, v, "plan", &mut out);
        out
    }

    #[test]
    fn every_accepted_example_fits_the_schema() {
        for plan in accepted_plans() {
            check(&plan, &workflows(), 1, &Limits::default()).unwrap();
            assert_eq!(validate(&plan), Vec::<String>::new(), "{plan}");
        }
    }

    #[test]
    fn the_schema_names_the_format() {
        let schema = plan_schema(&Limits::default());
        assert_eq!(schema["type"], "object");
        assert_eq!(schema["required"], json!(["agents", "phases"]));
        assert_eq!(schema["additionalProperties"], false);
        let kinds = |def: &str| -> Vec<String> {
            schema["$defs"][def]["oneOf"]
                .as_array()
                .unwrap()
                .iter()
                .map(|k| k["required"][0].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(
            kinds("step"),
            ["agent", "map", "set", "split", "repeat", "if"]
        );
        assert_eq!(
            kinds("cond"),
            ["contains", "equals", "failed", "empty", "not", "all", "any"]
        );
        let limits = Limits {
            max_phases: 3,
            ..Limits::default()
        };
        assert_eq!(plan_schema(&limits)["properties"]["phases"]["maxItems"], 3);
    }

    /// The schema is a guide, not the check, but where it speaks it must agree: each plan
    /// here is refused by both.
    #[test]
    fn the_schema_refuses_what_check_refuses_by_shape() {
        let step = |s: Value| json!({"agents": {"a": {"system": "s"}}, "phases": [{"name": "p", "steps": [s]}]});
        let cases = [
            json!({"agents": {}}),
            json!({"agents": {}, "phases": [], "extra": 1}),
            json!({"agents": {"a-b": {"system": "s"}}, "phases": []}),
            json!({"agents": {"a": {"predefined": "x", "system": "s"}}, "phases": []}),
            json!({"agents": {}, "inputs": {"index": "x"}, "phases": []}),
            json!({"agents": {}, "phases": [{"name": "", "steps": []}]}),
            step(json!({"agent": {"use": "a"}})),
            step(json!({"agent": {"use": "a", "prompt": "", "extra": 1}})),
            step(json!({"agent": {"use": "a", "prompt": ""}, "set": {"var": "v", "value": ""}})),
            step(json!({"repeat": {"max_rounds": 0, "steps": []}})),
            step(json!({"repeat": {"max_rounds": 21, "steps": []}})),
            step(json!({"split": {"var": "v", "text": "", "by": "words"}})),
            step(json!({"map": {"over": ["x"], "as": "round", "use": "a", "prompt": ""}})),
            step(
                json!({"map": {"over": ["x"], "as": "i", "use": "a", "prompt": "", "max_parallel": 0}}),
            ),
            step(json!({"if": {"when": {"failed": "x", "empty": "x"}, "then": []}})),
        ];
        for plan in cases {
            assert!(
                check(&plan, &workflows(), 1, &Limits::default()).is_err(),
                "check accepts {plan}"
            );
            assert!(!validate(&plan).is_empty(), "the schema accepts {plan}");
        }
    }
}
