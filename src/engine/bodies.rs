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

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::domain::session::SessionBody;
use crate::domain::tools::ToolDef;
use crate::store::StoreError;

/// Default bound on the bytes (estimated) the cache holds.
pub const DEFAULT_BUDGET: usize = 16 << 20;

/// Parsed bodies by session id, bounded by an estimate of their size.
pub struct Bodies {
    budget: usize,
    inner: Mutex<Entries>,
}

#[derive(Default)]
struct Entries {
    by_session: HashMap<String, Entry>,
    bytes: usize,
    tick: u64,
}

struct Entry {
    text: String,
    parsed: Arc<SessionBody>,
    /// The tool definitions `parsed`'s agent offers, once a request built them.
    tools: Option<Arc<Vec<ToolDef>>>,
    used: u64,
}

/// A rough size in memory of a body kept as text and parsed.
fn size(text: &str) -> usize {
    256 + 3 * text.len()
}

impl Bodies {
    /// An empty cache holding at most about `budget` bytes.
    pub fn new(budget: usize) -> Self {
        Bodies {
            budget,
            inner: Mutex::new(Entries::default()),
        }
    }

    /// The session's body parsed from `text`, only if it is kept already.
    pub fn peek(&self, session_id: &str, text: &str) -> Option<Arc<SessionBody>> {
        let e = self.inner.lock().expect("bodies");
        e.by_session
            .get(session_id)
            .filter(|entry| entry.text == text)
            .map(|entry| entry.parsed.clone())
    }

    /// The session's body parsed from `text`, its stored form.
    pub fn get(&self, session_id: &str, text: &str) -> Result<Arc<SessionBody>, StoreError> {
        {
            let mut e = self.inner.lock().expect("bodies");
            e.tick += 1;
            let tick = e.tick;
            if let Some(entry) = e.by_session.get_mut(session_id)
                && entry.text == text
            {
                entry.used = tick;
                return Ok(entry.parsed.clone());
            }
        }
        let parsed = Arc::new(serde_json::from_str::<SessionBody>(text)?);
        let bytes = size(text);
        if bytes > self.budget / 4 {
            return Ok(parsed);
        }
        let mut e = self.inner.lock().expect("bodies");
        let used = e.tick;
        let entry = Entry {
            text: text.to_string(),
            parsed: parsed.clone(),
            tools: None,
            used,
        };
        if let Some(old) = e.by_session.insert(session_id.to_string(), entry) {
            e.bytes -= size(&old.text);
        }
        e.bytes += bytes;
        if e.bytes > self.budget {
            evict(&mut e, self.budget * 3 / 4);
        }
        Ok(parsed)
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
        if let Some(entry) = same_entry(&mut self.inner.lock().expect("bodies"), session_id, body) {
            entry.tools = Some(tools.clone());
        }
        tools
    }
}

/// The session's entry, if it holds `body` itself.
fn same_entry<'e>(
    e: &'e mut Entries,
    session_id: &str,
    body: &Arc<SessionBody>,
) -> Option<&'e mut Entry> {
    e.by_session
        .get_mut(session_id)
        .filter(|entry| Arc::ptr_eq(&entry.parsed, body))
}

/// Drops the least recently used entries until the cache holds at most `target` bytes; done
/// in one pass for many entries, so its cost is spread over the inserts that filled them.
fn evict(e: &mut Entries, target: usize) {
    let mut order: Vec<(u64, String, usize)> = e
        .by_session
        .iter()
        .map(|(k, v)| (v.used, k.clone(), size(&v.text)))
        .collect();
    order.sort_unstable();
    for (_, key, bytes) in order {
        if e.bytes <= target {
            break;
        }
        e.by_session.remove(&key);
        e.bytes -= bytes;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fixture session's stored body with `prompt` as its system prompt.
    fn body(prompt: &str) -> String {
        use crate::engine::fixtures;
        let rec = fixtures::session(
            crate::domain::session::SessionStatus::Idle,
            &Default::default(),
            false,
        );
        let mut body: SessionBody = serde_json::from_str(&rec.body).unwrap();
        body.agent.system = Some(prompt.into());
        serde_json::to_string(&body).unwrap()
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
    fn the_cache_stays_within_its_budget_and_keeps_the_recent_entries() {
        let text = body("x");
        let cache = Bodies::new(size(&text) * 8);
        for i in 0..40 {
            cache.get(&format!("sesn_{i}"), &text).unwrap();
            cache.get("sesn_hot", &text).unwrap();
        }
        let e = cache.inner.lock().unwrap();
        assert!(e.bytes <= size(&text) * 8, "{}", e.bytes);
        assert!(e.by_session.contains_key("sesn_hot"));
        assert!(e.by_session.contains_key("sesn_39"));
    }
}
