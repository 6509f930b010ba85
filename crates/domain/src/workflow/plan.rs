//! The plan's types: what `ant__start_workflow_run` takes, as the engine interprets it.
//!
//! They serialise to the plan's own JSON shape, so a checked plan can be stored as JSON and
//! read back (deserialising goes through [`super::parse::parse`], which names the path of any
//! problem). The grammar:
//!
//! ```text
//! Plan  = {"name"?, "description"?, "lifetime_seconds"?, "agents": {KEY: Agent},
//!          "inputs"?: {VAR: string|[string]}, "phases": [Phase], "result"?: Tmpl}
//! Agent = {"predefined": id-or-name} | {"name"?, "description"?, "system"}
//! Phase = {"name", "description"?, "steps": [Step]}
//! Step  = {"agent": …} | {"map": …} | {"set": …} | {"split": …} | {"repeat": …} | {"if": …}
//! Cond  = {"contains"|"equals": {"text": Tmpl, "value"}} | {"failed"|"empty": VAR}
//!       | {"not": Cond} | {"all"|"any": [Cond]}
//! ```

use std::collections::BTreeMap;

use serde::{Deserialize, Deserializer, Serialize};
use serde_json::Value;

use super::template::Tmpl;
use super::vars::{Item, Scope, Var, default_result, truncate};

/// A workflow program: agents to run, in phases of steps, and what the run returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Plan {
    /// The run's name; after checking, never blank and at most 64 characters.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The run's description, at most 256 characters after checking.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Seconds the run may live; after checking, always set and within the server's maximum.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub lifetime_seconds: Option<u64>,
    /// The agents steps may `use`, by KEY.
    pub agents: BTreeMap<String, Agent>,
    /// Variables set before the first step.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub inputs: BTreeMap<String, Input>,
    /// Run once each, in order.
    pub phases: Vec<Phase>,
    /// What the run returns; without it, every variable as one JSON object.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<Tmpl>,
}

/// Who runs an agent step: one of the session's predefined workflow agents, or an agent the
/// plan defines with its own system prompt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Agent {
    /// A listed agent; after checking, `predefined` holds its id.
    Predefined {
        /// The agent's id, or its name when unique in the list.
        predefined: String,
    },
    /// An agent defined here, running with the session agent's model and tools.
    Inline(InlineAgent),
}

/// An agent the plan defines.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InlineAgent {
    /// The thread's agent name; after checking, the KEY when none was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The thread's agent description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The system prompt, in place of the session agent's.
    pub system: String,
}

/// The value of an input variable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Input {
    /// A text.
    Text(String),
    /// A list of texts.
    List(Vec<String>),
}

impl Input {
    /// The variable this input starts as.
    pub fn to_var(&self) -> Var {
        match self {
            Input::Text(t) => Var::Text(t.clone()),
            Input::List(items) => Var::List(items.iter().cloned().map(Item::Text).collect()),
        }
    }
}

/// A named stage of the run; the client sees it start and end.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Phase {
    /// Never empty; at most 64 characters after checking.
    pub name: String,
    /// At most 256 characters after checking.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Run in order.
    pub steps: Vec<Step>,
}

/// One step; serialised as an object with a single key, the step's kind.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Step {
    /// One agent thread on a rendered prompt.
    Agent(AgentStep),
    /// One agent thread per item, results kept as a list in item order.
    Map(MapStep),
    /// Assigns rendered text.
    Set(SetStep),
    /// Makes a list from rendered text.
    Split(SplitStep),
    /// Runs steps again, up to `max_rounds` times or until a condition holds.
    Repeat(RepeatStep),
    /// Runs one branch or the other.
    If(IfStep),
}

/// What happens to the run when an agent of a step fails.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OnError {
    /// The run ends with `program_error`.
    #[default]
    Fail,
    /// The failure is recorded in the saved value and the run goes on.
    Continue,
}

/// `{"agent": {"use", "prompt", "save"?, "on_error"?}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct AgentStep {
    /// The KEY of the agent in `agents`.
    #[serde(rename = "use")]
    pub agent: String,
    /// The thread's first message.
    pub prompt: Tmpl,
    /// The variable the result goes to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub save: Option<String>,
    /// Defaults to `fail`.
    pub on_error: OnError,
}

/// `{"map": {"over", "as", "use", "prompt", "save"?, "on_error"?, "max_parallel"?}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MapStep {
    /// The items, one agent each.
    pub over: Over,
    /// The name the prompt reads the item by; visible to this step's prompt only.
    #[serde(rename = "as")]
    pub bind: String,
    /// The KEY of the agent in `agents`.
    #[serde(rename = "use")]
    pub agent: String,
    /// Rendered once per item.
    pub prompt: Tmpl,
    /// The variable the list of results goes to.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub save: Option<String>,
    /// Defaults to `fail`.
    pub on_error: OnError,
    /// Agents working at once; after checking, always set and within the run's concurrency
    /// limit.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_parallel: Option<u64>,
}

/// What a map runs over.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum Over {
    /// The items of a variable (a text is one item).
    Var(String),
    /// Items written in the plan.
    Items(Vec<String>),
}

impl Over {
    /// The items a map runs over now; an unassigned variable has none.
    pub fn items(&self, vars: &BTreeMap<String, Var>) -> Vec<Item> {
        match self {
            Over::Var(name) => vars.get(name).map(Var::items).unwrap_or_default(),
            Over::Items(items) => items.iter().cloned().map(Item::Text).collect(),
        }
    }
}

/// `{"set": {"var", "value"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SetStep {
    /// The variable assigned.
    pub var: String,
    /// Its new text.
    pub value: Tmpl,
}

/// `{"split": {"var", "text", "by"}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct SplitStep {
    /// The variable the list goes to.
    pub var: String,
    /// The text split.
    pub text: Tmpl,
    /// How.
    pub by: SplitBy,
}

/// How `split` cuts text into items.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SplitBy {
    /// Each non-empty line, trimmed.
    Lines,
    /// The items of a JSON array of strings or scalars.
    Json,
}

/// `{"repeat": {"max_rounds", "steps", "until"?}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RepeatStep {
    /// 1 to 20.
    pub max_rounds: u64,
    /// Run in order, each round.
    pub steps: Vec<Step>,
    /// Checked after each round; the repeat stops once it holds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub until: Option<Cond>,
}

/// `{"if": {"when", "then", "else"?}}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct IfStep {
    /// The condition.
    pub when: Cond,
    /// Run when it holds.
    pub then: Vec<Step>,
    /// Run when it does not; empty when the plan has no `else`.
    #[serde(rename = "else", skip_serializing_if = "Vec::is_empty")]
    pub otherwise: Vec<Step>,
}

/// A condition over the run's variables; serialised as an object with a single key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Cond {
    /// The rendered text contains `value`.
    Contains(Compare),
    /// The rendered text is `value`.
    Equals(Compare),
    /// The variable is a failed value or holds a failed item.
    Failed(String),
    /// The variable is "", an empty list, failed or unassigned.
    Empty(String),
    /// The condition does not hold.
    Not(Box<Cond>),
    /// Every condition holds (true when there are none).
    All(Vec<Cond>),
    /// Some condition holds (false when there are none).
    Any(Vec<Cond>),
}

/// The operands of `contains` and `equals`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Compare {
    /// Rendered before comparing.
    pub text: Tmpl,
    /// Compared as is, case-sensitive.
    pub value: String,
}

impl Plan {
    /// The variables a run starts with: the inputs.
    pub fn initial_vars(&self) -> BTreeMap<String, Var> {
        self.inputs
            .iter()
            .map(|(name, input)| (name.clone(), input.to_var()))
            .collect()
    }

    /// What a finished run returns, cut to `max_text_chars`: `result` rendered against the
    /// final variables, or every variable as one JSON object when the plan has none.
    pub fn render_result(&self, vars: &BTreeMap<String, Var>, max_text_chars: usize) -> String {
        let text = match &self.result {
            Some(t) => t.render(&Scope::new(vars)),
            None => default_result(vars),
        };
        truncate(text, max_text_chars)
    }
}

impl<'de> Deserialize<'de> for Plan {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        super::parse::parse(&v).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::parse::parse;
    use super::*;

    #[test]
    fn inputs_start_the_variables() {
        let plan = parse(
            &json!({"agents": {}, "inputs": {"t": "x", "l": ["a", "b"], "e": []}, "phases": []}),
        )
        .unwrap();
        assert_eq!(
            plan.initial_vars(),
            BTreeMap::from([
                ("t".to_string(), Var::Text("x".into())),
                (
                    "l".to_string(),
                    Var::List(vec![Item::Text("a".into()), Item::Text("b".into())])
                ),
                ("e".to_string(), Var::List(vec![])),
            ])
        );
    }

    #[test]
    fn map_items_come_from_the_plan_or_a_variable() {
        let vars = BTreeMap::from([
            ("t".to_string(), Var::Text("one".into())),
            ("l".to_string(), Var::List(vec![Item::Failed])),
        ]);
        let cases = [
            (
                Over::Items(vec!["a".into(), "b".into()]),
                vec![Item::Text("a".into()), Item::Text("b".into())],
            ),
            (Over::Items(vec![]), vec![]),
            (Over::Var("t".into()), vec![Item::Text("one".into())]),
            (Over::Var("l".into()), vec![Item::Failed]),
            (Over::Var("unset".into()), vec![]),
        ];
        for (over, want) in cases {
            assert_eq!(over.items(&vars), want, "{over:?}");
        }
    }

    #[test]
    fn the_result_is_the_template_or_every_variable_and_is_cut() {
        let vars = BTreeMap::from([
            (
                "draft".to_string(),
                Var::Text("Tides follow the moon.".into()),
            ),
            (
                "notes".to_string(),
                Var::List(vec![Item::Text("n".into()), Item::Failed]),
            ),
        ]);
        let with = parse(
            &json!({"agents": {}, "phases": [], "result": "{{draft}} ({{notes.failed}} failed)"}),
        )
        .unwrap();
        assert_eq!(
            with.render_result(&vars, 1000),
            "Tides follow the moon. (1 failed)"
        );
        assert_eq!(with.render_result(&vars, 5), "Tides\n[truncated]");
        let without = parse(&json!({"agents": {}, "phases": []})).unwrap();
        let text = without.render_result(&vars, 1000);
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            back,
            json!({"draft": "Tides follow the moon.", "notes": ["n", null]})
        );
        assert_eq!(without.render_result(&vars, 3), "{\n \n[truncated]");
    }
}
