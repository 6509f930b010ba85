//! A tiny builder for SQL with `$N` placeholders and dynamic filters, valid on both backends.

use sqlx::any::{Any, AnyArguments};
use sqlx::query::Query;

/// A bound value.
#[derive(Debug, Clone)]
pub(crate) enum Arg {
    Int(Option<i64>),
    Text(Option<String>),
}

impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::Int(Some(v))
    }
}
impl From<Option<i64>> for Arg {
    fn from(v: Option<i64>) -> Self {
        Arg::Int(v)
    }
}
impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Text(Some(v.to_string()))
    }
}
impl From<String> for Arg {
    fn from(v: String) -> Self {
        Arg::Text(Some(v))
    }
}
impl From<&String> for Arg {
    fn from(v: &String) -> Self {
        Arg::Text(Some(v.clone()))
    }
}
impl From<Option<String>> for Arg {
    fn from(v: Option<String>) -> Self {
        Arg::Text(v)
    }
}
impl From<Option<&str>> for Arg {
    fn from(v: Option<&str>) -> Self {
        Arg::Text(v.map(str::to_string))
    }
}

/// SQL text plus its arguments, numbered in the order they are pushed.
#[derive(Debug, Default)]
pub(crate) struct Sql {
    text: String,
    args: Vec<Arg>,
}

impl Sql {
    /// Starts a statement.
    pub fn new(text: &str) -> Self {
        Sql {
            text: text.to_string(),
            args: Vec::new(),
        }
    }

    /// Appends literal SQL.
    pub fn push(&mut self, text: &str) -> &mut Self {
        self.text.push_str(text);
        self
    }

    /// Appends a placeholder bound to `arg`.
    pub fn bind(&mut self, arg: impl Into<Arg>) -> &mut Self {
        self.args.push(arg.into());
        self.text.push('$');
        self.text.push_str(&self.args.len().to_string());
        self
    }

    /// Appends `(p1, p2, ...)` bound to the items.
    pub fn bind_list<T: Into<Arg> + Clone>(&mut self, items: &[T]) -> &mut Self {
        self.push("(");
        for (i, item) in items.iter().enumerate() {
            if i > 0 {
                self.push(", ");
            }
            self.bind(item.clone());
        }
        self.push(")")
    }

    /// The sqlx query, ready to execute.
    pub fn query(&self) -> Query<'_, Any, AnyArguments<'_>> {
        let mut q = sqlx::query(&self.text);
        for a in &self.args {
            q = match a {
                Arg::Int(v) => q.bind(*v),
                Arg::Text(v) => q.bind(v.clone()),
            };
        }
        q
    }
}

/// Binds a query whose text has `$1..$n` placeholders already written out.
pub(crate) fn bound<'q>(text: &'q str, args: Vec<Arg>) -> Query<'q, Any, AnyArguments<'q>> {
    let mut q = sqlx::query(text);
    for a in args {
        q = match a {
            Arg::Int(v) => q.bind(v),
            Arg::Text(v) => q.bind(v),
        };
    }
    q
}
