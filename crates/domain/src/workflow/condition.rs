//! Evaluating conditions (`until` of a repeat, `when` of an if) against the run's variables.

use super::plan::Cond;
use super::vars::{Scope, Seen};

impl Cond {
    /// Whether the condition holds. `contains` and `equals` compare the rendered text
    /// exactly, case-sensitive; `empty` holds for "", an empty list, a failed or an
    /// unassigned variable; `failed` for a failed value or a list with a failed item.
    pub fn holds(&self, scope: &Scope) -> bool {
        match self {
            Cond::Contains(c) => c.text.render(scope).contains(&c.value),
            Cond::Equals(c) => c.text.render(scope) == c.value,
            Cond::Failed(name) => match scope.get(name) {
                Seen::Failed => true,
                seen => seen.failed_count() > 0,
            },
            Cond::Empty(name) => scope.get(name).is_empty(),
            Cond::Not(c) => !c.holds(scope),
            Cond::All(cs) => cs.iter().all(|c| c.holds(scope)),
            Cond::Any(cs) => cs.iter().any(|c| c.holds(scope)),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::{Value, json};

    use super::super::parse::parse;
    use super::super::plan::Step;
    use super::super::vars::{Item, Var};
    use super::*;

    /// Reads `cond` the way a plan's `if` holds it.
    fn cond(cond: Value) -> Cond {
        let plan = parse(&json!({
            "agents": {},
            "phases": [{"name": "p", "steps": [{"if": {"when": cond, "then": []}}]}]
        }))
        .unwrap();
        match &plan.phases[0].steps[0] {
            Step::If(s) => s.when.clone(),
            other => panic!("{other:?}"),
        }
    }

    fn vars() -> BTreeMap<String, Var> {
        BTreeMap::from([
            ("review".into(), Var::Text("Verdict: APPROVED".into())),
            ("blank".into(), Var::Text(String::new())),
            ("oops".into(), Var::Failed),
            ("none".into(), Var::List(vec![])),
            (
                "mixed".into(),
                Var::List(vec![Item::Text("a".into()), Item::Failed]),
            ),
            ("clean".into(), Var::List(vec![Item::Text("a".into())])),
        ])
    }

    #[test]
    fn each_condition_on_each_kind_of_value() {
        let vars = vars();
        let item = Item::Text("bound".into());
        let scope = Scope::new(&vars).in_map("it", &item, 1).in_round(3);
        let cases = [
            (
                json!({"contains": {"text": "{{review}}", "value": "APPROVED"}}),
                true,
            ),
            (
                json!({"contains": {"text": "{{review}}", "value": "approved"}}),
                false,
            ),
            (
                json!({"contains": {"text": "{{review}}", "value": ""}}),
                true,
            ),
            (
                json!({"contains": {"text": "{{mixed}}", "value": "[2] (failed)"}}),
                true,
            ),
            (
                json!({"equals": {"text": "{{review}}", "value": "Verdict: APPROVED"}}),
                true,
            ),
            (
                json!({"equals": {"text": "{{review}}", "value": "APPROVED"}}),
                false,
            ),
            (
                json!({"equals": {"text": " {{review}}", "value": "Verdict: APPROVED"}}),
                false,
            ),
            (
                json!({"equals": {"text": "{{missing}}", "value": ""}}),
                true,
            ),
            (
                json!({"equals": {"text": "{{it}}/{{round}}", "value": "bound/3"}}),
                true,
            ),
            (
                json!({"equals": {"text": "{{mixed.count}}", "value": "2"}}),
                true,
            ),
            (json!({"failed": "oops"}), true),
            (json!({"failed": "mixed"}), true),
            (json!({"failed": "clean"}), false),
            (json!({"failed": "review"}), false),
            (json!({"failed": "missing"}), false),
            (json!({"empty": "blank"}), true),
            (json!({"empty": "none"}), true),
            (json!({"empty": "missing"}), true),
            (json!({"empty": "oops"}), true),
            (json!({"empty": "review"}), false),
            (json!({"empty": "mixed"}), false),
            (json!({"not": {"empty": "review"}}), true),
            (json!({"not": {"not": {"empty": "review"}}}), false),
            (
                json!({"all": [{"failed": "oops"}, {"empty": "none"}]}),
                true,
            ),
            (
                json!({"all": [{"failed": "oops"}, {"empty": "review"}]}),
                false,
            ),
            (json!({"all": []}), true),
            (
                json!({"any": [{"failed": "clean"}, {"empty": "none"}]}),
                true,
            ),
            (
                json!({"any": [{"failed": "clean"}, {"empty": "review"}]}),
                false,
            ),
            (json!({"any": []}), false),
        ];
        for (c, want) in cases {
            assert_eq!(cond(c.clone()).holds(&scope), want, "{c}");
        }
    }
}
