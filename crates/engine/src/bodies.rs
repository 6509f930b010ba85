//! Parsed session bodies, kept between a session's wakes.
//!
//! Every runner start needs the session's body parsed (the agent snapshot: system prompt, tool
//! schemas); for an agent with a long prompt and many tools the parse cost more than the rest
//! of a turn's engine work. The body only changes through a session update, so a parse stays
//! good exactly while the stored text is byte for byte the same — which is checked on every
//! use (a comparison costs far less than a parse), so nothing here can go stale.
//!
//! What a request derives from the body alone — the tool definitions its agent offers — is
//! kept with it ([`Bodies::tools`]), as building them copies every tool schema.

use std::sync::{Arc, Mutex};

use mast_domain::session::SessionBody;
use mast_domain::tools::{Tool, ToolDef};
use mast_store::StoreError;
use mast_store::lru::{Lru, Slot};

/// Default bound on the heap the cache's entries hold, in bytes.
pub const DEFAULT_BUDGET: usize = 16 << 20;

/// Parsed bodies by session id, bounded by the heap they hold.
pub struct Bodies {
    inner: Mutex<Lru<Entry>>,
}

struct Entry {
    /// The stored text `parsed` came from (shared with the records that carry it).
    text: Arc<str>,
    parsed: Arc<SessionBody>,
    /// The tool definitions `parsed`'s agent offers, once a request built them.
    tools: Option<Arc<Vec<ToolDef>>>,
}

impl Entry {
    /// Whether this entry was parsed from `text`: the same allocation (a store that keeps
    /// the bodies it read hands the same one back) or, failing that, the same bytes.
    fn is_of(&self, text: &Arc<str>) -> bool {
        Arc::ptr_eq(&self.text, text) || *self.text == **text
    }
}

/// The heap a body kept as text and parsed holds: the text, and the parse, whose strings
/// and structs take about what the text does, and whose custom tools' schemas are
/// `serde_json` maps (a whole B-tree node per object, however small). The tests hold this to
/// a counting allocator for a small agent and a large one.
fn size(text: &str, parsed: &SessionBody) -> usize {
    let schemas: usize = parsed
        .agent
        .tools
        .iter()
        .map(|t| match t {
            Tool::Custom(c) => super::heap_size::map_heap(&c.input_schema.0),
            _ => 0,
        })
        .sum();
    16 + text.len() + PARSE_FIXED + text.len() + schemas
}

/// What a parse takes however small the body (its structs' vectors and options).
const PARSE_FIXED: usize = 256;

impl Bodies {
    /// An empty cache holding at most about `budget` bytes.
    pub fn new(budget: usize) -> Self {
        Bodies {
            inner: Mutex::new(Lru::new(budget)),
        }
    }

    /// The session's body parsed from `text`, only if it is kept already.
    pub fn peek(&self, session_id: &str, text: &Arc<str>) -> Option<Arc<SessionBody>> {
        let mut e = self.inner.lock().expect("bodies");
        e.get_mut(session_id)
            .filter(|entry| entry.is_of(text))
            .map(|entry| entry.parsed.clone())
    }

    /// The session's body parsed from `text`, its stored form.
    pub fn get(&self, session_id: &str, text: &Arc<str>) -> Result<Arc<SessionBody>, StoreError> {
        if let Some(parsed) = self.peek(session_id, text) {
            return Ok(parsed);
        }
        let parsed = Arc::new(serde_json::from_str::<SessionBody>(text)?);
        self.insert(session_id, text, parsed.clone());
        Ok(parsed)
    }

    /// Keeps `parsed` as the session's body parsed from `text`, which the caller made by
    /// serialising it (a session just created), so the first use need not parse it.
    pub fn keep(&self, session_id: &str, text: &Arc<str>, parsed: SessionBody) {
        self.insert(session_id, text, Arc::new(parsed));
    }

    fn insert(&self, session_id: &str, text: &Arc<str>, parsed: Arc<SessionBody>) {
        let bytes = size(text, &parsed);
        let entry = Entry {
            text: text.clone(),
            parsed,
            tools: None,
        };
        self.inner
            .lock()
            .expect("bodies")
            .insert(session_id.to_string(), entry, bytes);
    }

    /// The tool definitions `body`'s agent offers, built by `build` the first time and kept
    /// while `body` is the session's kept parse (the entry holds it, so it is the same body
    /// exactly while it is the same allocation); built every time otherwise.
    pub fn tools(
        &self,
        session_id: &str,
        body: &Arc<SessionBody>,
        build: impl FnOnce() -> Vec<ToolDef>,
    ) -> Arc<Vec<ToolDef>> {
        let cached = same_entry(&mut self.inner.lock().expect("bodies"), session_id, body)
            .and_then(|entry| entry.tools.clone());
        if let Some(tools) = cached {
            return tools;
        }
        let tools = Arc::new(build());
        if let Some(mut entry) =
            same_entry(&mut self.inner.lock().expect("bodies"), session_id, body)
        {
            entry.tools = Some(tools.clone());
        }
        tools
    }
}

/// The session's entry, if it holds `body` itself.
fn same_entry<'e>(
    e: &'e mut Lru<Entry>,
    session_id: &str,
    body: &Arc<SessionBody>,
) -> Option<Slot<'e, Entry>> {
    e.get_mut(session_id)
        .filter(|entry| Arc::ptr_eq(&entry.parsed, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixture session's stored body with `prompt` as its system prompt.
    fn body(prompt: &str) -> Arc<str> {
        use crate::fixtures;
        let rec = fixtures::session(
            mast_domain::session::SessionStatus::Idle,
            &Default::default(),
            false,
        );
        let mut body: SessionBody = serde_json::from_str(&rec.body).unwrap();
        body.agent.system = Some(prompt.into());
        serde_json::to_string(&body).unwrap().into()
    }

    #[test]
    fn a_changed_body_is_parsed_again_and_the_same_one_is_not() {
        let cache = Bodies::new(DEFAULT_BUDGET);
        let (a, b) = (body("one"), body("two"));
        let first = cache.get("sesn_1", &a).unwrap();
        assert!(Arc::ptr_eq(&first, &cache.get("sesn_1", &a).unwrap()));
        let changed = cache.get("sesn_1", &b).unwrap();
        assert_eq!(changed.agent.system.as_deref(), Some("two"));
        assert!(!Arc::ptr_eq(&first, &changed));
    }

    #[test]
    fn tool_definitions_are_built_once_per_kept_body() {
        let cache = Bodies::new(DEFAULT_BUDGET);
        let (a, b) = (body("one"), body("two"));
        let def = |name: &str| ToolDef {
            name: name.into(),
            description: String::new(),
            input_schema: serde_json::json!({"type": "object"}),
        };
        let first = cache.get("sesn_1", &a).unwrap();
        let built = cache.tools("sesn_1", &first, || vec![def("a")]);
        let again = cache.tools("sesn_1", &first, || panic!("built again"));
        assert!(Arc::ptr_eq(&built, &again));
        // A changed body is a new parse: its tools are built anew, and kept in turn.
        let changed = cache.get("sesn_1", &b).unwrap();
        let rebuilt = cache.tools("sesn_1", &changed, || vec![def("b")]);
        assert_eq!(rebuilt[0].name, "b");
        assert!(Arc::ptr_eq(
            &rebuilt,
            &cache.tools("sesn_1", &changed, || panic!("built again"))
        ));
        // A body that is not the kept one (an older parse) is never served the kept tools.
        assert_eq!(
            cache.tools("sesn_1", &first, || vec![def("old")])[0].name,
            "old"
        );
        assert_eq!(
            cache.tools("sesn_2", &first, || vec![def("c")])[0].name,
            "c"
        );
    }

    #[test]
    fn a_body_kept_at_creation_is_served_as_its_text_parses() {
        let cache = Bodies::new(DEFAULT_BUDGET);
        let text = body("one");
        let parsed: SessionBody = serde_json::from_str(&text).unwrap();
        // What creation keeps is the body its stored text was serialised from.
        assert_eq!(&*text, serde_json::to_string(&parsed).unwrap());
        cache.keep("sesn_1", &text, parsed.clone());
        let served = cache.get("sesn_1", &text).unwrap();
        assert_eq!(*served, parsed);
        assert!(Arc::ptr_eq(&served, &cache.get("sesn_1", &text).unwrap()));
        // Kept for that text only.
        let other = body("two");
        assert_eq!(
            cache.get("sesn_1", &other).unwrap().agent.system.as_deref(),
            Some("two")
        );
    }

    #[test]
    fn the_same_text_in_another_allocation_is_the_same_body() {
        let cache = Bodies::new(DEFAULT_BUDGET);
        let a = body("one");
        let copy: Arc<str> = a.to_string().into();
        let first = cache.get("sesn_1", &a).unwrap();
        assert!(Arc::ptr_eq(&first, &cache.get("sesn_1", &copy).unwrap()));
        assert!(cache.peek("sesn_2", &a).is_none());
    }

    /// The stored body of the benchmarks' realistic agent: a 20 KB prompt and ten custom
    /// tools with schemas.
    fn realistic() -> Arc<str> {
        let rec = crate::fixtures::session(
            mast_domain::session::SessionStatus::Idle,
            &Default::default(),
            false,
        );
        let mut body: SessionBody = serde_json::from_str(&rec.body).unwrap();
        let line = "You are a careful assistant working in a customer's repository. \
            Read before you write, explain what you change, and keep answers short.\n";
        body.agent.system = Some(line.repeat(20 * 1024 / line.len() + 1));
        body.agent.tools = (0..10)
            .map(|i| {
                serde_json::from_value(serde_json::json!({"type": "custom", "name": format!("tool_{i}"),
                    "description": format!("Tool number {i}: looks things up in the customer's systems and returns what it found, as JSON, with sources."),
                    "input_schema": {"type": "object", "properties": {
                        "query": {"type": "string", "description": "What to look for."},
                        "limit": {"type": "integer", "description": "At most this many results."},
                        "since": {"type": "string", "description": "Only results after this RFC 3339 time."},
                        "fields": {"type": "array", "items": {"type": "string"}, "description": "Fields to return."}
                    }, "required": ["query"]}}))
                .unwrap()
            })
            .collect();
        serde_json::to_string(&body).unwrap().into()
    }

    #[test]
    fn an_entry_counts_the_heap_it_holds() {
        for (what, text) in [("small", body("one")), ("realistic", realistic())] {
            let (_entry, real) = crate::heap_size::tests::measured(|| {
                let text: Arc<str> = text.to_string().into();
                let parsed = Arc::new(serde_json::from_str::<SessionBody>(&text).unwrap());
                (text, parsed)
            });
            let counted = size(&text, &serde_json::from_str(&text).unwrap());
            eprintln!(
                "SIZE {what}: text {} counted {counted} real {real}",
                text.len()
            );
            assert!(
                crate::heap_size::tests::close(counted, real, 0.15),
                "{what} body of {} bytes: counted {counted}, allocated {real}",
                text.len()
            );
        }
    }
}
