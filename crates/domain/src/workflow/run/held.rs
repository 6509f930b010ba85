//! A run's variables as its state keeps them, and turning them into the values templates
//! and conditions see. An agent's result is held as its thread's id; only rendering reads
//! the text, and only where a template shows it.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

use super::super::plan::{Cond, Input, Over};
use super::super::template::{Member, Piece, Tmpl};
use super::super::vars::{Item, Var, truncate};
use super::Results;

/// The value of a variable in the state.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Held {
    /// Text the plan produced: an input or a `set`, already cut to the text limit.
    Text(String),
    /// An agent step's result: the thread that returned it.
    Thread(String),
    /// An agent step whose agent failed under `on_error: "continue"`.
    Failed,
    /// An input list, a `split` or a map's results in item order.
    List(Vec<HeldItem>),
}

/// One item of a held list.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum HeldItem {
    /// Text the plan produced.
    Text(String),
    /// A map item's result: the thread that returned it.
    Thread(String),
    /// A map item whose agent failed under `on_error: "continue"`.
    Failed,
}

impl From<&Input> for Held {
    fn from(input: &Input) -> Self {
        match input {
            Input::Text(t) => Held::Text(t.clone()),
            Input::List(items) => Held::List(items.iter().cloned().map(HeldItem::Text).collect()),
        }
    }
}

/// How many items a map over `over` runs: a single value is one, an unassigned one none.
pub(super) fn over_count(vars: &BTreeMap<String, Held>, over: &Over) -> usize {
    match over {
        Over::Items(items) => items.len(),
        Over::Var(name) => match vars.get(name) {
            None => 0,
            Some(Held::List(items)) => items.len(),
            Some(_) => 1,
        },
    }
}

/// Item number `k` (from 0) of a map over `over`, its result read if it is one; `None` past
/// the end.
pub(super) fn over_item(
    vars: &BTreeMap<String, Held>,
    over: &Over,
    k: usize,
    text: &Text,
) -> Option<Item> {
    let held = match over {
        Over::Items(items) => return items.get(k).cloned().map(Item::Text),
        Over::Var(name) => vars.get(name)?,
    };
    let item = match held {
        Held::List(items) => items.get(k)?.clone(),
        _ if k > 0 => return None,
        Held::Text(t) => HeldItem::Text(t.clone()),
        Held::Thread(id) => HeldItem::Thread(id.clone()),
        Held::Failed => HeldItem::Failed,
    };
    Some(match item {
        HeldItem::Text(t) => Item::Text(t),
        HeldItem::Thread(id) => Item::Text(text.read(&id)),
        HeldItem::Failed => Item::Failed,
    })
}

/// Reads results through the engine, cut to the text limit.
pub(super) struct Text<'a> {
    pub results: &'a dyn Results,
    pub max_chars: usize,
}

impl Text<'_> {
    pub fn read(&self, thread_id: &str) -> String {
        truncate(self.results.text(thread_id), self.max_chars)
    }
}

/// What a template or condition reads of each variable it names, so resolving fetches only
/// the results it shows.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub(super) struct Reads(BTreeMap<String, Need>);

/// How much of one variable is read; a larger need includes a smaller.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Need {
    /// Only how many items and which failed (`.count`, `.failed`, `failed`).
    Shape,
    /// These items too, from 1 (`.N`); a single value is its own item 1.
    Items(BTreeSet<usize>),
    /// Everything.
    Whole,
}

impl Need {
    fn wants(&self, n: usize) -> bool {
        match self {
            Need::Shape => false,
            Need::Items(set) => set.contains(&n),
            Need::Whole => true,
        }
    }

    fn merge(&mut self, other: Need) {
        *self = match (std::mem::replace(self, Need::Shape), other) {
            (Need::Whole, _) | (_, Need::Whole) => Need::Whole,
            (Need::Items(mut a), Need::Items(b)) => {
                a.extend(b);
                Need::Items(a)
            }
            (Need::Items(a), Need::Shape) | (Need::Shape, Need::Items(a)) => Need::Items(a),
            (Need::Shape, Need::Shape) => Need::Shape,
        }
    }
}

impl Reads {
    /// What `tmpl` reads.
    pub fn of_tmpl(tmpl: &Tmpl) -> Self {
        let mut reads = Self::default();
        reads.tmpl(tmpl);
        reads
    }

    /// What `cond` reads.
    pub fn of_cond(cond: &Cond) -> Self {
        let mut reads = Self::default();
        reads.cond(cond);
        reads
    }

    /// All of every variable, as the default result shows them.
    pub fn everything(vars: &BTreeMap<String, Held>) -> Self {
        Self(vars.keys().map(|k| (k.clone(), Need::Whole)).collect())
    }

    /// Drops `name`: a map's binding hides the run variable of that name from its prompt.
    pub fn without(mut self, name: &str) -> Self {
        self.0.remove(name);
        self
    }

    fn add(&mut self, name: &str, need: Need) {
        match self.0.get_mut(name) {
            Some(n) => n.merge(need),
            None => {
                self.0.insert(name.to_string(), need);
            }
        }
    }

    fn tmpl(&mut self, tmpl: &Tmpl) {
        for piece in tmpl.pieces() {
            if let Piece::Var { name, member } = piece {
                let need = match member {
                    Member::Whole => Need::Whole,
                    Member::Item(n) => Need::Items(BTreeSet::from([*n])),
                    Member::Count | Member::Failed => Need::Shape,
                };
                self.add(name, need);
            }
        }
    }

    fn cond(&mut self, cond: &Cond) {
        match cond {
            Cond::Contains(c) | Cond::Equals(c) => self.tmpl(&c.text),
            Cond::Failed(name) => self.add(name, Need::Shape),
            // A single value is empty by its text, a list by its length: item 1 covers both.
            Cond::Empty(name) => self.add(name, Need::Items(BTreeSet::from([1]))),
            Cond::Not(c) => self.cond(c),
            Cond::All(cs) | Cond::Any(cs) => cs.iter().for_each(|c| self.cond(c)),
        }
    }

    /// The variables read, as values to render against. A result that is not read stands as
    /// "", which keeps counts and failures right.
    pub fn resolve(&self, vars: &BTreeMap<String, Held>, text: &Text) -> BTreeMap<String, Var> {
        let read = |need: &Need, n: usize, id: &str| {
            if need.wants(n) {
                text.read(id)
            } else {
                String::new()
            }
        };
        self.0
            .iter()
            .filter_map(|(name, need)| {
                let var = match vars.get(name)? {
                    Held::Text(t) => Var::Text(t.clone()),
                    Held::Thread(id) => Var::Text(read(need, 1, id)),
                    Held::Failed => Var::Failed,
                    Held::List(items) => Var::List(
                        items
                            .iter()
                            .enumerate()
                            .map(|(i, item)| match item {
                                HeldItem::Text(t) => Item::Text(t.clone()),
                                HeldItem::Thread(id) => Item::Text(read(need, i + 1, id)),
                                HeldItem::Failed => Item::Failed,
                            })
                            .collect(),
                    ),
                };
                Some((name.clone(), var))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use serde_json::json;

    use super::super::super::vars::Scope;
    use super::*;

    /// Answers `result of <id>` and remembers what was asked.
    #[derive(Default)]
    struct Recorder(RefCell<Vec<String>>);

    impl Results for Recorder {
        fn text(&self, thread_id: &str) -> String {
            self.0.borrow_mut().push(thread_id.to_string());
            format!("result of {thread_id}")
        }
    }

    fn vars() -> BTreeMap<String, Held> {
        BTreeMap::from([
            ("given".into(), Held::Text("g".into())),
            ("one".into(), Held::Thread("t1".into())),
            ("oops".into(), Held::Failed),
            (
                "notes".into(),
                Held::List(vec![
                    HeldItem::Thread("n1".into()),
                    HeldItem::Failed,
                    HeldItem::Thread("n3".into()),
                    HeldItem::Text("plain".into()),
                ]),
            ),
        ])
    }

    fn tmpl(text: &str) -> Tmpl {
        Tmpl::parse("t", text).unwrap()
    }

    /// Each template: what it renders to, and the only results it may read.
    #[test]
    fn rendering_reads_only_the_results_it_shows() {
        let cases: [(&str, &str, &[&str]); 9] = [
            ("{{given}}", "g", &[]),
            ("{{notes.count}}/{{notes.failed}}", "4/1", &[]),
            ("{{one.count}} {{oops.failed}}", "1 1", &[]),
            ("{{notes.3}}", "result of n3", &["n3"]),
            ("{{notes.2}}{{notes.4}}", "plain", &[]),
            (
                "{{notes.1}} {{notes.count}} {{notes.3}}",
                "result of n1 4 result of n3",
                &["n1", "n3"],
            ),
            (
                "{{notes}}",
                "[1] result of n1\n\n[2] (failed)\n\n[3] result of n3\n\n[4] plain",
                &["n1", "n3"],
            ),
            (
                "{{one}} {{one.1}} {{one.2}}",
                "result of t1 result of t1 ",
                &["t1"],
            ),
            ("[{{unset}}] {{unset.count}}", "[] 0", &[]),
        ];
        let vars = vars();
        for (text, want, fetched) in cases {
            let results = Recorder::default();
            let t = tmpl(text);
            let resolved = Reads::of_tmpl(&t).resolve(
                &vars,
                &Text {
                    results: &results,
                    max_chars: 1000,
                },
            );
            assert_eq!(t.render(&Scope::new(&resolved)), want, "{text}");
            assert_eq!(results.0.into_inner(), fetched, "{text}");
        }
    }

    #[test]
    fn conditions_read_what_they_test() {
        let plan = |when: serde_json::Value| {
            super::super::super::parse::parse(&json!({
                "agents": {},
                "phases": [{"name": "p", "steps": [{"if": {"when": when, "then": []}}]}]
            }))
            .unwrap()
        };
        let cases: [(serde_json::Value, bool, &[&str]); 6] = [
            (json!({"failed": "notes"}), true, &[]),
            (json!({"empty": "one"}), false, &["t1"]),
            (json!({"empty": "notes"}), false, &["n1"]),
            (
                json!({"contains": {"text": "{{notes.3}}", "value": "n3"}}),
                true,
                &["n3"],
            ),
            (
                json!({"not": {"all": [{"failed": "oops"}, {"equals": {"text": "{{one}}", "value": "x"}}]}}),
                true,
                &["t1"],
            ),
            (json!({"any": []}), false, &[]),
        ];
        let vars = vars();
        for (when, holds, fetched) in cases {
            let p = plan(when.clone());
            let super::super::super::plan::Step::If(s) = &p.phases[0].steps[0] else {
                panic!()
            };
            let results = Recorder::default();
            let resolved = Reads::of_cond(&s.when).resolve(
                &vars,
                &Text {
                    results: &results,
                    max_chars: 1000,
                },
            );
            assert_eq!(s.when.holds(&Scope::new(&resolved)), holds, "{when}");
            assert_eq!(results.0.into_inner(), fetched, "{when}");
        }
    }

    #[test]
    fn everything_reads_every_result_and_a_binding_hides_its_name() {
        let vars = vars();
        let results = Recorder::default();
        let text = Text {
            results: &results,
            max_chars: 1000,
        };
        let all = Reads::everything(&vars).resolve(&vars, &text);
        assert_eq!(all.len(), 4);
        assert_eq!(results.0.borrow().as_slice(), ["n1", "n3", "t1"]);
        let reads = Reads::of_tmpl(&tmpl("{{one}} {{given}}")).without("one");
        assert_eq!(
            reads.resolve(&vars, &text).keys().collect::<Vec<_>>(),
            ["given"]
        );
        assert_eq!(results.0.borrow().len(), 3, "nothing more was read");
    }

    #[test]
    fn results_are_cut_to_the_text_limit() {
        let vars = vars();
        let results = |_: &str| "abcdef".to_string();
        let text = Text {
            results: &results,
            max_chars: 4,
        };
        assert_eq!(text.read("t1"), "abcd\n[truncated]");
        let resolved = Reads::of_tmpl(&tmpl("{{one}}")).resolve(&vars, &text);
        assert_eq!(resolved["one"], Var::Text("abcd\n[truncated]".into()));
        let item = over_item(&vars, &Over::Var("one".into()), 0, &text);
        assert_eq!(item, Some(Item::Text("abcd\n[truncated]".into())));
    }

    #[test]
    fn map_items_of_each_kind_of_value() {
        let vars = vars();
        let results = |id: &str| format!("<{id}>");
        let text = Text {
            results: &results,
            max_chars: 1000,
        };
        let var = |n: &str| Over::Var(n.into());
        let t = |s: &str| Some(Item::Text(s.into()));
        let cases = [
            (
                Over::Items(vec!["a".into(), "b".into()]),
                vec![t("a"), t("b"), None],
            ),
            (var("given"), vec![t("g"), None]),
            (var("one"), vec![t("<t1>"), None]),
            (var("oops"), vec![Some(Item::Failed), None]),
            (
                var("notes"),
                vec![t("<n1>"), Some(Item::Failed), t("<n3>"), t("plain"), None],
            ),
            (var("unset"), vec![None]),
        ];
        for (over, want) in cases {
            assert_eq!(over_count(&vars, &over), want.len() - 1, "{over:?}");
            let got: Vec<_> = (0..want.len())
                .map(|k| over_item(&vars, &over, k, &text))
                .collect();
            assert_eq!(got, want, "{over:?}");
        }
    }

    #[test]
    fn held_values_keep_their_json_form() {
        let held = Held::List(vec![
            HeldItem::Text("a".into()),
            HeldItem::Thread("sthr_1".into()),
            HeldItem::Failed,
        ]);
        let want = json!({"list": [{"text": "a"}, {"thread": "sthr_1"}, "failed"]});
        assert_eq!(serde_json::to_value(&held).unwrap(), want);
        assert_eq!(serde_json::from_value::<Held>(want).unwrap(), held);
        for (h, j) in [
            (Held::Text("x".into()), json!({"text": "x"})),
            (Held::Thread("t".into()), json!({"thread": "t"})),
            (Held::Failed, json!("failed")),
        ] {
            assert_eq!(serde_json::to_value(&h).unwrap(), j);
            assert_eq!(serde_json::from_value::<Held>(j).unwrap(), h);
        }
        let inputs = [
            (Input::Text("t".into()), Held::Text("t".into())),
            (
                Input::List(vec!["x".into()]),
                Held::List(vec![HeldItem::Text("x".into())]),
            ),
        ];
        for (input, want) in inputs {
            assert_eq!(Held::from(&input), want);
        }
    }
}
