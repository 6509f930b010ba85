//! Error text for people: an error with its causes (`reqwest` and `hyper` errors say little at
//! the top — "error sending request" — and why only further down the chain).

use std::error::Error;

/// The error and each cause after it, joined by `: `; a cause whose text the message so far
/// already holds is left out, so layers that repeat their source are not printed twice.
pub fn chain(e: &dyn Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(cause) = source {
        let c = cause.to_string();
        if !text.contains(&c) {
            text.push_str(": ");
            text.push_str(&c);
        }
        source = cause.source();
    }
    text
}

/// The innermost cause's text (the error's own when it has none): what a one-line
/// "cannot reach X: …" needs.
pub fn root_cause(e: &dyn Error) -> String {
    let mut root = e;
    while let Some(cause) = root.source() {
        root = cause;
    }
    root.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<Layer>>);
    impl std::fmt::Display for Layer {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str(self.0)
        }
    }
    impl Error for Layer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|l| l as &(dyn Error + 'static))
        }
    }

    #[test]
    fn chain_joins_causes_and_skips_repeats() {
        let e = Layer(
            "error sending request",
            Some(Box::new(Layer(
                "connect failed: connection refused",
                Some(Box::new(Layer("connection refused", None))),
            ))),
        );
        assert_eq!(
            chain(&e),
            "error sending request: connect failed: connection refused"
        );
        assert_eq!(root_cause(&e), "connection refused");
        let alone = Layer("bad", None);
        assert_eq!(chain(&alone), "bad");
        assert_eq!(root_cause(&alone), "bad");
    }
}
