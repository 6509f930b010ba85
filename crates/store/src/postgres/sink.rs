//! Statements built once and sent either way: with binds through sqlx (`QueryBuilder`), or
//! as a [`Stmt`] whose arguments are kept as values, so the session transaction can send its
//! write, prepared once per connection, and `COMMIT` in one simple query (see
//! `transact.rs`): sqlx runs one statement per round trip and has no pipelining.

use std::fmt::Write as _;

use sqlx::postgres::Postgres;
use sqlx::{Encode, QueryBuilder, Type};

/// Where a statement's text and arguments go.
pub(super) trait Sink {
    /// Appends SQL text.
    fn sql(&mut self, text: &str) -> &mut Self;
    /// Appends an argument (its placeholder in the text).
    fn arg<T>(&mut self, v: T) -> &mut Self
    where
        T: Literal + for<'q> Encode<'q, Postgres> + Type<Postgres> + Send + 'static;
}

impl Sink for QueryBuilder<'_, Postgres> {
    fn sql(&mut self, text: &str) -> &mut Self {
        self.push(text)
    }

    fn arg<T>(&mut self, v: T) -> &mut Self
    where
        T: Literal + for<'q> Encode<'q, Postgres> + Type<Postgres> + Send + 'static,
    {
        self.push_bind(v)
    }
}

/// A value written as an SQL literal of a known type.
pub(super) trait Literal {
    /// The Postgres type of the parameter (for `PREPARE`).
    const TYPE: &'static str;
    /// Appends the value as a literal; false when it cannot be one (a NUL character, which
    /// no Postgres text holds: the bind it stands for would fail as well).
    fn literal(&self, out: &mut String) -> bool;
    /// About how many bytes the literal takes, so the text grows once rather than by
    /// doubling through every argument.
    fn literal_size(&self) -> usize {
        8
    }
}

/// `s` as an escape-string literal (`E'…'`), which reads the same under any
/// `standard_conforming_strings`.
fn text_literal(s: &str, out: &mut String) -> bool {
    // Event bodies are most of a write's bytes and rarely need a quote doubled, so the
    // text goes over in runs between the characters that need one, not char by char.
    out.reserve(s.len() + 3);
    out.push_str("E'");
    let mut rest = s;
    // The three are ASCII, so a byte search finds them at character boundaries.
    while let Some(i) = memchr::memchr3(b'\'', b'\\', 0, rest.as_bytes()) {
        out.push_str(&rest[..i]);
        match rest.as_bytes()[i] {
            b'\'' => out.push_str("''"),
            b'\\' => out.push_str("\\\\"),
            _ => return false,
        }
        rest = &rest[i + 1..];
    }
    out.push_str(rest);
    out.push('\'');
    true
}

impl Literal for String {
    const TYPE: &'static str = "text";
    fn literal(&self, out: &mut String) -> bool {
        text_literal(self, out)
    }
    fn literal_size(&self) -> usize {
        self.len() + 3
    }
}

impl Literal for Option<String> {
    const TYPE: &'static str = "text";
    fn literal(&self, out: &mut String) -> bool {
        match self {
            Some(s) => text_literal(s, out),
            None => {
                out.push_str("NULL");
                true
            }
        }
    }
    fn literal_size(&self) -> usize {
        self.as_ref().map_or(4, |s| s.len() + 3)
    }
}

impl Literal for i64 {
    const TYPE: &'static str = "int8";
    fn literal(&self, out: &mut String) -> bool {
        let _ = write!(out, "{self}");
        true
    }
}

impl Literal for Option<i64> {
    const TYPE: &'static str = "int8";
    fn literal(&self, out: &mut String) -> bool {
        match self {
            Some(v) => v.literal(out),
            None => {
                out.push_str("NULL");
                true
            }
        }
    }
}

/// A value that can be one element of an array literal.
pub(super) trait Element {
    /// The Postgres type of an array of them.
    const ARRAY: &'static str;
    /// Appends the value as one element of an array literal inside an `E'…'` string; false
    /// when it cannot be one (a NUL character).
    fn element(&self, out: &mut String) -> bool;
    /// About how many bytes the element takes.
    fn element_size(&self) -> usize;
}

/// `s` as one double-quoted element of an array literal that is itself inside an `E'…'`
/// string: the array's escapes (`\"`, `\\`) under the string's (`''`, `\\`). Every element
/// is quoted, so none reads as `NULL`, loses its spaces or splits at a comma.
fn text_element(s: &str, out: &mut String) -> bool {
    if memchr::memchr(0, s.as_bytes()).is_some() {
        return false;
    }
    out.push('"');
    let mut rest = s;
    // The three are ASCII, so a byte search finds them at character boundaries.
    while let Some(i) = memchr::memchr3(b'\'', b'\\', b'"', rest.as_bytes()) {
        out.push_str(&rest[..i]);
        out.push_str(match rest.as_bytes()[i] {
            b'\'' => "''",
            b'\\' => r"\\\\",
            _ => r#"\\""#,
        });
        rest = &rest[i + 1..];
    }
    out.push_str(rest);
    out.push('"');
    true
}

impl Element for String {
    const ARRAY: &'static str = "text[]";
    fn element(&self, out: &mut String) -> bool {
        text_element(self, out)
    }
    fn element_size(&self) -> usize {
        self.len() + 3
    }
}

impl Element for i64 {
    const ARRAY: &'static str = "int8[]";
    fn element(&self, out: &mut String) -> bool {
        let _ = write!(out, "{self}");
        true
    }
    fn element_size(&self) -> usize {
        20
    }
}

impl<T: Element> Element for Option<T> {
    const ARRAY: &'static str = T::ARRAY;
    fn element(&self, out: &mut String) -> bool {
        match self {
            Some(v) => v.element(out),
            None => {
                out.push_str("NULL");
                true
            }
        }
    }
    fn element_size(&self) -> usize {
        self.as_ref().map_or(4, Element::element_size)
    }
}

/// `items` as one array literal, `E'{…}'::type[]`: a string the server's array input
/// reads, rather than an `ARRAY[…]` expression of element literals, which the server had to
/// parse, analyse and fold element by element (three times the cost of the whole `EXECUTE`;
/// BENCHMARKS.md).
fn array<T: Element>(items: &[T], out: &mut String) -> bool {
    out.reserve(array_size(items));
    out.push_str("E'{");
    for (i, v) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        if !v.element(out) {
            return false;
        }
    }
    let _ = write!(out, "}}'::{}", T::ARRAY);
    true
}

fn array_size<T: Element>(items: &[T]) -> usize {
    items.iter().map(|v| v.element_size() + 1).sum::<usize>() + 16
}

impl<T: Element> Literal for Vec<T> {
    const TYPE: &'static str = T::ARRAY;
    fn literal(&self, out: &mut String) -> bool {
        array(self, out)
    }
    fn literal_size(&self) -> usize {
        array_size(self)
    }
}

/// A statement with `$n` placeholders and its arguments as literals.
#[derive(Debug, Default)]
pub(super) struct Stmt {
    pub text: String,
    /// Each argument's type.
    types: Vec<&'static str>,
    /// The arguments' literals, comma-separated as `EXECUTE` lists them: one buffer, so
    /// an argument costs no allocation of its own and the list is copied out whole.
    literals: String,
    /// Some argument cannot be written as a literal.
    pub unwritable: bool,
}

impl Sink for Stmt {
    fn sql(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    fn arg<T>(&mut self, v: T) -> &mut Self
    where
        T: Literal + for<'q> Encode<'q, Postgres> + Type<Postgres> + Send + 'static,
    {
        self.literals.reserve(v.literal_size() + 2);
        if !self.types.is_empty() {
            self.literals.push_str(", ");
        }
        self.unwritable |= !v.literal(&mut self.literals);
        self.types.push(T::TYPE);
        let _ = write!(self.text, "${}", self.types.len());
        self
    }
}

impl Stmt {
    /// The bytes of its arguments' literals.
    pub fn literal_bytes(&self) -> usize {
        self.literals.len()
    }

    /// `PREPARE name (types) AS text`.
    pub fn prepare(&self, name: &str, out: &mut String) {
        out.reserve(self.text.len() + 16 * self.types.len() + 32);
        let _ = write!(out, "PREPARE {name}");
        if !self.types.is_empty() {
            out.push_str(" (");
            for (i, ty) in self.types.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                out.push_str(ty);
            }
            out.push(')');
        }
        out.push_str(" AS ");
        out.push_str(&self.text);
        out.push_str("; ");
    }

    /// `EXECUTE name (literals)`.
    pub fn execute(&self, name: &str, out: &mut String) {
        out.reserve(self.literals.len() + name.len() + 16);
        out.push_str("EXECUTE ");
        out.push_str(name);
        if !self.types.is_empty() {
            out.push_str(" (");
            out.push_str(&self.literals);
            out.push(')');
        }
        out.push_str("; ");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Writes one literal; false when it cannot be one.
    type Write = Box<dyn Fn(&mut String) -> bool>;

    #[test]
    fn literals_quote_what_needs_it() {
        let cases: Vec<(Write, Option<&str>)> = vec![
            (
                Box::new(|o| "plain".to_string().literal(o)),
                Some("E'plain'"),
            ),
            (
                Box::new(|o| r#"it's {"a":"\\n"}"#.to_string().literal(o)),
                Some(r#"E'it''s {"a":"\\\\n"}'"#),
            ),
            (
                Box::new(|o| "naïve ✓".to_string().literal(o)),
                Some("E'naïve ✓'"),
            ),
            (Box::new(|o| None::<String>.literal(o)), Some("NULL")),
            (Box::new(|o| (-42i64).literal(o)), Some("-42")),
            (Box::new(|o| None::<i64>.literal(o)), Some("NULL")),
            (
                Box::new(|o| vec!["a".to_string(), "b'".to_string()].literal(o)),
                Some(r#"E'{"a","b''"}'::text[]"#),
            ),
            (
                Box::new(|o| Vec::<i64>::new().literal(o)),
                Some("E'{}'::int8[]"),
            ),
            (
                Box::new(|o| vec![Some(1i64), None].literal(o)),
                Some("E'{1,NULL}'::int8[]"),
            ),
            // The array's escapes under the string's: `x"y\z` is `"x\"y\\z"` in the array.
            (
                Box::new(|o| {
                    vec![Some(r#"x"y\z"#.to_string()), None, Some(String::new())].literal(o)
                }),
                Some(r#"E'{"x\\"y\\\\z",NULL,""}'::text[]"#),
            ),
            (
                Box::new(|o| vec!["NULL".to_string(), " a,{b} ".to_string()].literal(o)),
                Some(r#"E'{"NULL"," a,{b} "}'::text[]"#),
            ),
            // No Postgres text holds a NUL: the statement cannot be written.
            (Box::new(|o| "a\0b".to_string().literal(o)), None),
            (Box::new(|o| vec!["a\0b".to_string()].literal(o)), None),
        ];
        for (lit, want) in cases {
            let mut out = String::new();
            let ok = lit(&mut out);
            match want {
                Some(w) => assert_eq!((ok, out.as_str()), (true, w)),
                None => assert!(!ok, "{out}"),
            }
        }
    }

    #[test]
    fn a_statement_prepares_and_executes_by_name() {
        let mut s = Stmt::default();
        s.sql("UPDATE t SET a = ")
            .arg("x".to_string())
            .sql(", b = ")
            .arg(7i64)
            .sql(" WHERE id = ANY(")
            .arg(vec!["i".to_string()])
            .sql(")");
        assert_eq!(s.text, "UPDATE t SET a = $1, b = $2 WHERE id = ANY($3)");
        let mut out = String::new();
        s.prepare("mast_w_1", &mut out);
        s.execute("mast_w_1", &mut out);
        assert_eq!(
            out,
            r#"PREPARE mast_w_1 (text, int8, text[]) AS UPDATE t SET a = $1, b = $2 WHERE id = ANY($3); EXECUTE mast_w_1 (E'x', 7, E'{"i"}'::text[]); "#
        );
    }
}
