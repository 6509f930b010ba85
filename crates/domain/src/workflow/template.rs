//! Templates (`Tmpl`): text with `{{…}}` placeholders, parsed once when the plan is read so a
//! malformed placeholder refuses the plan rather than a run, and rendered against a [`Scope`].
//!
//! A `{{…}}` counts as a placeholder only when what it holds (spaces around it ignored) is a
//! name, optionally followed by one `.member`: `{{VAR}}`, `{{VAR.3}}`, `{{VAR.count}}`,
//! `{{VAR.failed}}`, `{{index}}`, `{{round}}`. Anything else between braces (`{{#each x}}`,
//! `{{ a + b }}`, a lone `{{`) stays literal text, so a prompt can quote other template
//! languages; but a placeholder-shaped one with a bad member (`{{draft.first}}`,
//! `{{notes.0}}`) is an error, since it is almost surely a typo.

use std::fmt;

use serde::{Serialize, Serializer};

use super::error::{PlanError, PlanResult, show};
use super::ident::{RESERVED_VARS, is_identifier};
use super::vars::Scope;

/// A parsed template. It keeps the text as written, which is what it serialises to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tmpl {
    source: String,
    pieces: Vec<Piece>,
}

/// One part of a template: literal text or a placeholder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Piece {
    /// Copied as is.
    Text(String),
    /// `{{name}}` or `{{name.member}}`.
    Var { name: String, member: Member },
    /// `{{index}}`: the 1-based number of a map's item.
    Index,
    /// `{{round}}`: the 1-based number of the innermost repeat's round.
    Round,
}

/// What a placeholder takes of its variable.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Member {
    /// The whole value, rendered.
    Whole,
    /// The N-th item, counted from 1.
    Item(usize),
    /// How many items.
    Count,
    /// How many items failed.
    Failed,
}

impl Tmpl {
    /// Parses `text`, found at `path` of the plan.
    pub fn parse(path: &str, text: &str) -> PlanResult<Self> {
        let mut pieces = Vec::new();
        let mut literal = String::new();
        let mut rest = text;
        while let Some(open) = rest.find("{{") {
            literal.push_str(&rest[..open]);
            let after = &rest[open + 2..];
            // Only name characters and spaces can sit between the braces of a placeholder, so
            // the scan stops at the first other character: text full of braces stays linear.
            let close = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || "_. \t".contains(c)))
                .unwrap_or(after.len());
            let placeholder = after[close..]
                .starts_with("}}")
                .then(|| Some((close, placeholder(path, &after[..close]).transpose()?)))
                .flatten();
            match placeholder {
                Some((close, piece)) => {
                    if !literal.is_empty() {
                        pieces.push(Piece::Text(std::mem::take(&mut literal)));
                    }
                    pieces.push(piece?);
                    rest = &after[close + 2..];
                }
                None => {
                    // Not a placeholder: keep one brace and look again from the next, so
                    // `{{{x}}}` is a brace, a placeholder and a brace.
                    literal.push('{');
                    rest = &rest[open + 1..];
                }
            }
        }
        literal.push_str(rest);
        if !literal.is_empty() {
            pieces.push(Piece::Text(literal));
        }
        Ok(Self {
            source: text.to_string(),
            pieces,
        })
    }

    /// The text as written in the plan.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// The template's parts, in order; the checks read the placeholders from them.
    pub fn pieces(&self) -> &[Piece] {
        &self.pieces
    }

    /// The text with every placeholder replaced, not yet cut to the text limit (conditions
    /// compare the whole text; prompts and results are cut by the caller).
    pub fn render(&self, scope: &Scope) -> String {
        let mut out = String::with_capacity(self.source.len());
        for piece in &self.pieces {
            match piece {
                Piece::Text(t) => out.push_str(t),
                Piece::Index => {
                    if let Some(i) = scope.index() {
                        out.push_str(&i.to_string());
                    }
                }
                Piece::Round => {
                    if let Some(r) = scope.round() {
                        out.push_str(&r.to_string());
                    }
                }
                Piece::Var { name, member } => {
                    let v = scope.get(name);
                    match member {
                        Member::Whole => v.render_into(&mut out),
                        Member::Item(n) => out.push_str(v.item(*n)),
                        Member::Count => out.push_str(&v.count().to_string()),
                        Member::Failed => out.push_str(&v.failed_count().to_string()),
                    }
                }
            }
        }
        out
    }
}

impl fmt::Display for Tmpl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

impl Serialize for Tmpl {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.source)
    }
}

/// Reads what is between `{{` and `}}`: `None` when it is not shaped like a placeholder,
/// an error when it is shaped like one but names nothing a template provides.
fn placeholder(path: &str, inner: &str) -> PlanResult<Option<Piece>> {
    let body = inner.trim();
    let shaped = body
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && body
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
    if !shaped {
        return Ok(None);
    }
    let bad = |why: String| {
        PlanError::program(
            path,
            format!(
                "{} has the placeholder `{{{{{body}}}}}`, which {why}",
                show(path)
            ),
        )
    };
    let (name, member) = match body.split_once('.') {
        None => (body, None),
        Some((name, member)) => (name, Some(member)),
    };
    if !is_identifier(name) {
        return Err(bad(
            "is not a variable name: letters, digits and `_`, at most 64, not starting with a digit"
                .to_string(),
        ));
    }
    if RESERVED_VARS.contains(&name) {
        if member.is_some() {
            return Err(bad(format!("takes no member: write `{{{{{name}}}}}`")));
        }
        return Ok(Some(if name == "index" {
            Piece::Index
        } else {
            Piece::Round
        }));
    }
    let member = match member {
        None => Member::Whole,
        Some("count") => Member::Count,
        Some("failed") => Member::Failed,
        Some(m) if !m.is_empty() && m.chars().all(|c| c.is_ascii_digit()) => {
            match m.parse::<usize>() {
                Ok(n) if n >= 1 => Member::Item(n),
                _ => {
                    return Err(bad(format!("asks for item {m}; items are counted from 1")));
                }
            }
        }
        Some(m) => {
            return Err(bad(format!(
                "asks for `{m}`; after a `.` only an item number (from 1), `count` or `failed` may follow"
            )));
        }
    };
    Ok(Some(Piece::Var {
        name: name.to_string(),
        member,
    }))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::super::vars::{Item, Var};
    use super::*;

    fn vars() -> BTreeMap<String, Var> {
        BTreeMap::from([
            ("topic".to_string(), Var::Text("tides".to_string())),
            ("oops".to_string(), Var::Failed),
            (
                "notes".to_string(),
                Var::List(vec![
                    Item::Text("moon".to_string()),
                    Item::Failed,
                    Item::Text("sun\nand wind".to_string()),
                ]),
            ),
            ("none".to_string(), Var::List(vec![])),
        ])
    }

    fn render(text: &str, scope: &Scope) -> String {
        Tmpl::parse("p", text).unwrap().render(scope)
    }

    #[test]
    fn renders_every_placeholder_form() {
        let vars = vars();
        let item = Item::Text("moon".to_string());
        let scope = Scope::new(&vars).in_round(2).in_map("t", &item, 3);
        let cases = [
            ("plain text", "plain text"),
            ("{{topic}}", "tides"),
            ("about {{ topic }}!", "about tides!"),
            ("{{notes}}", "[1] moon\n\n[2] (failed)\n\n[3] sun\nand wind"),
            (
                "{{notes.1}}|{{notes.2}}|{{notes.3}}|{{notes.4}}",
                "moon||sun\nand wind|",
            ),
            ("{{notes.count}} {{notes.failed}}", "3 1"),
            (
                "{{topic.1}}|{{topic.2}}|{{topic.count}}|{{topic.failed}}",
                "tides||1|0",
            ),
            (
                "[{{oops}}] {{oops.count}} {{oops.failed}} [{{oops.1}}]",
                "[] 1 1 []",
            ),
            (
                "[{{never}}] {{never.count}} {{never.failed}} [{{never.1}}]",
                "[] 0 0 []",
            ),
            ("[{{none}}] {{none.count}}", "[] 0"),
            ("{{t}} #{{index}} round {{round}}", "moon #3 round 2"),
            ("{{{topic}}}", "{tides}"),
            (
                "{{#each x}} {{ a + b }} {{ {{topic",
                "{{#each x}} {{ a + b }} {{ {{topic",
            ),
            ("{{}} {{topic}", "{{}} {{topic}"),
        ];
        for (text, want) in cases {
            assert_eq!(render(text, &scope), want, "{text}");
        }
    }

    #[test]
    fn text_full_of_braces_is_literal() {
        let vars = vars();
        let scope = Scope::new(&vars);
        let braces = "{".repeat(64 * 1024);
        assert_eq!(render(&braces, &scope), braces);
        let text = format!("{}{{{{topic}}}}{}", "{{".repeat(1000), "}}".repeat(1000));
        let want = format!("{}tides{}", "{".repeat(2000), "}".repeat(2000));
        assert!(
            render(&text, &scope) == want,
            "the innermost braces are the placeholder"
        );
        assert_eq!(render("{{a}b}} {{ a b }}", &scope), "{{a}b}} {{ a b }}");
    }

    #[test]
    fn index_and_round_render_empty_where_absent() {
        let vars = vars();
        let scope = Scope::new(&vars);
        assert_eq!(render("<{{index}}|{{round}}>", &scope), "<|>");
    }

    #[test]
    fn a_binding_shadows_a_variable_of_the_same_name() {
        let vars = vars();
        let failed = Item::Failed;
        let scope = Scope::new(&vars).in_map("topic", &failed, 1);
        assert_eq!(render("[{{topic}}] {{topic.failed}}", &scope), "[] 1");
    }

    #[test]
    fn pieces_name_what_is_read() {
        let t = Tmpl::parse("p", "a {{x}} b {{y.2}}{{index}}{{round}}").unwrap();
        assert_eq!(
            t.pieces(),
            &[
                Piece::Text("a ".into()),
                Piece::Var {
                    name: "x".into(),
                    member: Member::Whole
                },
                Piece::Text(" b ".into()),
                Piece::Var {
                    name: "y".into(),
                    member: Member::Item(2)
                },
                Piece::Index,
                Piece::Round,
            ]
        );
        assert_eq!(t.source(), "a {{x}} b {{y.2}}{{index}}{{round}}");
        assert_eq!(serde_json::to_value(&t).unwrap(), t.source());
    }

    #[test]
    fn placeholder_shaped_mistakes_are_refused_with_the_path() {
        let long = format!("{{{{{}}}}}", "v".repeat(65));
        let cases = [
            ("{{draft.first}}", "asks for `first`"),
            ("{{notes.0}}", "items are counted from 1"),
            (
                "{{notes.99999999999999999999999}}",
                "items are counted from 1",
            ),
            ("{{a.b.c}}", "asks for `b.c`"),
            ("{{notes.}}", "asks for ``"),
            ("{{index.count}}", "takes no member"),
            ("{{round.1}}", "takes no member"),
            (long.as_str(), "is not a variable name"),
        ];
        for (text, why) in cases {
            let e = Tmpl::parse("phases[0].steps[1].agent.prompt", text).unwrap_err();
            assert_eq!(e.path, "phases[0].steps[1].agent.prompt", "{text}");
            assert!(
                e.message()
                    .starts_with("`phases[0].steps[1].agent.prompt` has the placeholder"),
                "{}",
                e.message()
            );
            assert!(e.message().contains(why), "{text}: {}", e.message());
        }
    }
}
