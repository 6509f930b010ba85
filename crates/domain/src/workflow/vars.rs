//! A run's variables as the pure functions see them, and how a value renders. The engine
//! keeps an agent's result as its thread's id and reads the text from the log when it needs
//! it; it builds these values from that, so rendering here never touches storage.

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// The value of a variable.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Var {
    /// Text: an input, a `set`, or an `agent` step's result.
    Text(String),
    /// An `agent` step whose agent failed under `on_error: "continue"`: renders as "" and
    /// makes `failed` true.
    Failed,
    /// A list: an input list, a `split`, or a `map`'s results in item order.
    List(Vec<Item>),
}

/// One item of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Item {
    /// Text.
    Text(String),
    /// A map item whose agent failed under `on_error: "continue"`.
    Failed,
}

impl Var {
    /// The items a `map` runs over when its `over` names this variable: a text or a failed
    /// value is one item, a list its items.
    pub fn items(&self) -> Vec<Item> {
        match self {
            Var::Text(t) => vec![Item::Text(t.clone())],
            Var::Failed => vec![Item::Failed],
            Var::List(items) => items.clone(),
        }
    }
}

/// The variables a template or condition is evaluated against, with what its position adds:
/// a map's `as` binding and `{{index}}`, a repeat's `{{round}}`.
#[derive(Debug, Clone, Copy)]
pub struct Scope<'a> {
    vars: &'a BTreeMap<String, Var>,
    binding: Option<(&'a str, &'a Item)>,
    index: Option<usize>,
    round: Option<usize>,
}

/// A variable as a placeholder sees it, unassigned ones included.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Seen<'a> {
    Unassigned,
    Text(&'a str),
    Failed,
    List(&'a [Item]),
}

impl<'a> Scope<'a> {
    /// The run's variables, outside any map or repeat.
    pub fn new(vars: &'a BTreeMap<String, Var>) -> Self {
        Self {
            vars,
            binding: None,
            index: None,
            round: None,
        }
    }

    /// Inside a map, rendering the prompt of item number `index` (from 1), bound to `name`.
    /// The binding hides a run variable of the same name for this prompt only.
    pub fn in_map(self, name: &'a str, item: &'a Item, index: usize) -> Self {
        Self {
            binding: Some((name, item)),
            index: Some(index),
            ..self
        }
    }

    /// Inside round `round` (from 1) of the innermost repeat.
    pub fn in_round(self, round: usize) -> Self {
        Self {
            round: Some(round),
            ..self
        }
    }

    pub(crate) fn index(&self) -> Option<usize> {
        self.index
    }

    pub(crate) fn round(&self) -> Option<usize> {
        self.round
    }

    pub(crate) fn get(&self, name: &str) -> Seen<'a> {
        if let Some((bound, item)) = self.binding
            && bound == name
        {
            return match item {
                Item::Text(t) => Seen::Text(t),
                Item::Failed => Seen::Failed,
            };
        }
        match self.vars.get(name) {
            None => Seen::Unassigned,
            Some(Var::Text(t)) => Seen::Text(t),
            Some(Var::Failed) => Seen::Failed,
            Some(Var::List(items)) => Seen::List(items),
        }
    }
}

impl<'a> Seen<'a> {
    /// `[1] …\n\n[2] …` for a list (a failed item `[i] (failed)`); a failed or unassigned
    /// value is "".
    pub(crate) fn render_into(&self, out: &mut String) {
        match self {
            Seen::Unassigned | Seen::Failed => {}
            Seen::Text(t) => out.push_str(t),
            Seen::List(items) => {
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str("\n\n");
                    }
                    out.push_str(&format!("[{}] ", i + 1));
                    match item {
                        Item::Text(t) => out.push_str(t),
                        Item::Failed => out.push_str("(failed)"),
                    }
                }
            }
        }
    }

    /// The `n`-th item (from 1), as its value: a failed one, or one past the end, is "".
    /// A text is its own first item, as a map treats it.
    pub(crate) fn item(&self, n: usize) -> &'a str {
        match self {
            Seen::Text(t) if n == 1 => t,
            Seen::List(items) => match n.checked_sub(1).and_then(|i| items.get(i)) {
                Some(Item::Text(t)) => t,
                _ => "",
            },
            _ => "",
        }
    }

    pub(crate) fn count(&self) -> usize {
        match self {
            Seen::Unassigned => 0,
            Seen::Text(_) | Seen::Failed => 1,
            Seen::List(items) => items.len(),
        }
    }

    pub(crate) fn failed_count(&self) -> usize {
        match self {
            Seen::Unassigned | Seen::Text(_) => 0,
            Seen::Failed => 1,
            Seen::List(items) => items.iter().filter(|i| **i == Item::Failed).count(),
        }
    }

    /// "" or an empty list; a failed value counts, its value being "".
    pub(crate) fn is_empty(&self) -> bool {
        match self {
            Seen::Unassigned | Seen::Failed => true,
            Seen::Text(t) => t.is_empty(),
            Seen::List(items) => items.is_empty(),
        }
    }
}

/// What a plan without `result` returns: every variable, as one JSON object (a failed value
/// or item is `null`), pretty-printed for the agent that reads it.
pub fn default_result(vars: &BTreeMap<String, Var>) -> String {
    let text = |t: &String| Value::String(t.clone());
    let object: Map<String, Value> = vars
        .iter()
        .map(|(name, v)| {
            let v = match v {
                Var::Text(t) => text(t),
                Var::Failed => Value::Null,
                Var::List(items) => Value::Array(
                    items
                        .iter()
                        .map(|i| match i {
                            Item::Text(t) => text(t),
                            Item::Failed => Value::Null,
                        })
                        .collect(),
                ),
            };
            (name.clone(), v)
        })
        .collect();
    serde_json::to_string_pretty(&Value::Object(object)).expect("a JSON value serialises")
}

/// Marks text cut at the text limit, so a reader knows it saw only the start.
pub const TRUNCATED: &str = "\n[truncated]";

/// `text` if it has at most `max_chars` characters; else its first `max_chars` characters
/// followed by a line `[truncated]`. Applied to rendered prompts, agent results and the
/// rendered `result`.
pub fn truncate(text: String, max_chars: usize) -> String {
    match text.char_indices().nth(max_chars) {
        None => text,
        Some((at, _)) => {
            let mut out = text;
            out.truncate(at);
            out.push_str(TRUNCATED);
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn truncation_cuts_whole_characters_past_the_limit() {
        let cases = [
            ("", 3, ""),
            ("abc", 3, "abc"),
            ("abcd", 3, "abc\n[truncated]"),
            ("ééé€", 3, "ééé\n[truncated]"),
            ("ab", 0, "\n[truncated]"),
        ];
        for (text, max, want) in cases {
            assert_eq!(truncate(text.to_string(), max), want, "{text} {max}");
        }
    }

    #[test]
    fn truncation_at_the_default_limit() {
        let max = super::super::limits::Limits::default().max_text_chars;
        let at = "x".repeat(max);
        assert_eq!(truncate(at.clone(), max), at);
        let over = truncate("x".repeat(max + 1), max);
        assert_eq!(over, format!("{at}{TRUNCATED}"));
    }

    #[test]
    fn default_result_holds_every_variable() {
        let vars = BTreeMap::from([
            ("b".to_string(), Var::Text("two".to_string())),
            ("a".to_string(), Var::Failed),
            (
                "c".to_string(),
                Var::List(vec![Item::Text("x".to_string()), Item::Failed]),
            ),
        ]);
        let text = default_result(&vars);
        let back: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(
            back,
            serde_json::json!({"a": null, "b": "two", "c": ["x", null]})
        );
        assert!(text.contains('\n'), "pretty-printed: {text}");
        assert_eq!(default_result(&BTreeMap::new()), "{}");
    }

    #[test]
    fn map_items_of_each_kind_of_value() {
        let cases = [
            (Var::Text("t".into()), vec![Item::Text("t".into())]),
            (Var::Failed, vec![Item::Failed]),
            (Var::List(vec![]), vec![]),
            (
                Var::List(vec![Item::Failed, Item::Text("y".into())]),
                vec![Item::Failed, Item::Text("y".into())],
            ),
        ];
        for (v, want) in cases {
            assert_eq!(v.items(), want, "{v:?}");
        }
    }

    #[test]
    fn emptiness_and_counts() {
        let items = [Item::Failed];
        let cases = [
            (Seen::Unassigned, true, 0, 0),
            (Seen::Text(""), true, 1, 0),
            (Seen::Text("x"), false, 1, 0),
            (Seen::Failed, true, 1, 1),
            (Seen::List(&[]), true, 0, 0),
            (Seen::List(&items), false, 1, 1),
        ];
        for (seen, empty, count, failed) in cases {
            assert_eq!(seen.is_empty(), empty, "{seen:?}");
            assert_eq!(seen.count(), count, "{seen:?}");
            assert_eq!(seen.failed_count(), failed, "{seen:?}");
        }
        let mut out = String::new();
        Seen::List(&items).render_into(&mut out);
        assert_eq!(out, "[1] (failed)");
    }
}
