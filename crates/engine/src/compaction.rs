//! Context compaction: before a model request whose context would pass a threshold of the
//! model's context window, the older part of the thread's conversation is summarised by a
//! model request, and an `agent.thread_context_compacted` event records the boundary (the
//! summary and how many of the newest messages stay verbatim) in its private part. The log
//! stays whole; only what the model sees changes: the transcript fold applies the boundary
//! (see `engine::context`), so a restarted runner or another replica resumes from it.
//!
//! The size is measured with the provider's token counts for the last response plus a
//! quarter token per byte added since (`context::Transcript::estimated_tokens`).

use std::collections::{BTreeMap, HashSet};

use serde_json::{Value, json};

use super::context::{json_bytes, message_bytes};
use mast_models::Message;

/// The session error of a context that cannot be made to fit.
pub const LIMIT_ERROR: &str = "compaction_limit_reached_error";

/// Context windows of the built-in Claude models, by id prefix (tokens).
const BUILT_IN_WINDOWS: &[(&str, u64)] = &[("claude-", 200_000)];

/// The part of the window the verbatim tail may take at most after a compaction; the rest
/// leaves room for the summary and the next responses.
pub(crate) const KEEP_FRACTION: f64 = 0.25;

/// `max_tokens` of a summarisation request.
pub(crate) const SUMMARY_MAX_TOKENS: u32 = 4_096;

/// Boundaries in a row with no model response between them before compaction gives up.
pub(crate) const MAX_IN_ROW: u32 = 2;

/// When threads compact their context (`MAST_CONTEXT_WINDOW`, `MAST_CONTEXT_WINDOWS`,
/// `MAST_COMPACTION_THRESHOLD`).
#[derive(Debug, Clone)]
pub struct CompactionConfig {
    /// The window of models neither configured nor built in (tokens).
    pub default_window: u64,
    /// Windows configured per model id (tokens); they override the built-in ones.
    pub windows: BTreeMap<String, u64>,
    /// The fraction of the window a request's context may reach before it is compacted.
    pub threshold: f64,
}

impl Default for CompactionConfig {
    fn default() -> Self {
        CompactionConfig {
            default_window: 200_000,
            windows: BTreeMap::new(),
            threshold: 0.8,
        }
    }
}

impl CompactionConfig {
    /// The context window of `model` in tokens.
    pub fn window(&self, model: &str) -> u64 {
        if let Some(w) = self.windows.get(model) {
            return *w;
        }
        BUILT_IN_WINDOWS
            .iter()
            .find(|(prefix, _)| model.starts_with(prefix))
            .map_or(self.default_window, |(_, w)| *w)
    }

    /// The context size (tokens) above which a request of `model` is compacted first.
    pub fn limit(&self, model: &str) -> u64 {
        (self.window(model) as f64 * self.threshold) as u64
    }

    /// Applies `MAST_CONTEXT_WINDOW` (tokens), `MAST_CONTEXT_WINDOWS` (JSON: model id →
    /// tokens) and `MAST_COMPACTION_THRESHOLD` (a fraction in (0, 1]).
    pub fn with_env(
        mut self,
        window: Option<&str>,
        windows: Option<&str>,
        threshold: Option<&str>,
    ) -> anyhow::Result<Self> {
        if let Some(w) = window.filter(|w| !w.trim().is_empty()) {
            self.default_window = w.trim().parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                anyhow::anyhow!("MAST_CONTEXT_WINDOW must be a positive number of tokens")
            })?;
        }
        if let Some(json) = windows.filter(|j| !j.trim().is_empty()) {
            let parsed: BTreeMap<String, u64> = serde_json::from_str(json).map_err(|e| {
                anyhow::anyhow!("MAST_CONTEXT_WINDOWS must map model ids to token counts: {e}")
            })?;
            anyhow::ensure!(
                parsed.values().all(|w| *w > 0),
                "MAST_CONTEXT_WINDOWS: every window must be a positive number of tokens"
            );
            self.windows.extend(parsed);
        }
        if let Some(t) = threshold.filter(|t| !t.trim().is_empty()) {
            self.threshold = t
                .trim()
                .parse()
                .ok()
                .filter(|f: &f64| *f > 0.0 && *f <= 1.0)
                .ok_or_else(|| {
                    anyhow::anyhow!("MAST_COMPACTION_THRESHOLD must be a fraction in (0, 1]")
                })?;
        }
        Ok(self)
    }
}

fn ids_of<'a>(blocks: impl Iterator<Item = &'a Value>, ty: &str, key: &str) -> Vec<String> {
    blocks
        .filter(|b| b.get("type").and_then(Value::as_str) == Some(ty))
        .filter_map(|b| b.get(key).and_then(Value::as_str).map(str::to_string))
        .collect()
}

/// Where to cut `messages` (followed by `closing`, what the context appends) into an older
/// part to summarise and a newest part the model keeps seeing verbatim: the index of the
/// first kept message. A cut never separates a `tool_use` from its `tool_result` (every
/// result in the kept part answers a call in the kept part), always summarises something and
/// always keeps the newest message. Of the allowed cuts it keeps the most messages whose
/// size stays within `keep_bytes`, or else the fewest. None when no cut is allowed.
pub fn choose_cut(messages: &[Message], closing: &[Value], keep_bytes: usize) -> Option<usize> {
    let mut uses: HashSet<String> = HashSet::new();
    let mut unanswered: HashSet<String> = ids_of(closing.iter(), "tool_result", "tool_use_id")
        .into_iter()
        .collect();
    let mut kept = closing.iter().map(json_bytes).sum::<usize>();
    let mut best = None;
    for i in (1..messages.len()).rev() {
        let m = &messages[i];
        for id in ids_of(m.content.iter(), "tool_result", "tool_use_id") {
            if !uses.contains(&id) {
                unanswered.insert(id);
            }
        }
        for id in ids_of(m.content.iter(), "tool_use", "id") {
            unanswered.remove(&id);
            uses.insert(id);
        }
        kept += message_bytes(m);
        if !unanswered.is_empty() {
            continue;
        }
        if best.is_some() && kept > keep_bytes {
            break;
        }
        best = Some(i);
        if kept > keep_bytes {
            break;
        }
    }
    best
}

/// The boundary `agent.thread_context_compacted` records, privately.
pub(crate) fn boundary(summary: &str, keep: usize, covers_to_seq: i64, pre_tokens: u64) -> Value {
    json!({ "summary": summary, "keep": keep, "covers_to_seq": covers_to_seq, "pre_compaction_tokens": pre_tokens })
}

#[cfg(test)]
mod tests {
    use super::*;
    use mast_models::Role;

    fn user(blocks: Vec<Value>) -> Message {
        Message {
            role: Role::User,
            content: blocks,
        }
    }
    fn assistant(blocks: Vec<Value>) -> Message {
        Message {
            role: Role::Assistant,
            content: blocks,
        }
    }
    fn text(t: &str) -> Value {
        json!({"type": "text", "text": t})
    }
    fn call(id: &str) -> Value {
        json!({"type": "tool_use", "id": id, "name": "bash", "input": {}})
    }
    fn result(id: &str) -> Value {
        json!({"type": "tool_result", "tool_use_id": id, "content": [text("out")]})
    }

    /// Every result in the kept part answers a call in the kept part.
    fn no_split(messages: &[Message], closing: &[Value], cut: usize) -> bool {
        let kept: Vec<&Value> = messages[cut..]
            .iter()
            .flat_map(|m| &m.content)
            .chain(closing)
            .collect();
        let uses: HashSet<String> = ids_of(kept.iter().copied(), "tool_use", "id")
            .into_iter()
            .collect();
        ids_of(kept.iter().copied(), "tool_result", "tool_use_id")
            .iter()
            .all(|r| uses.contains(r))
    }

    #[test]
    fn the_cut_never_splits_a_call_from_its_result() {
        let messages = vec![
            user(vec![text("start")]),
            assistant(vec![text("looking"), call("a")]),
            user(vec![result("a")]),
            assistant(vec![call("b"), call("c")]),
            user(vec![result("b"), result("c"), text("and also")]),
            assistant(vec![call("d")]),
        ];
        let closing = vec![result("d")];
        for keep_bytes in [0, 50, 200, 400, 1_000, 100_000] {
            let cut = choose_cut(&messages, &closing, keep_bytes).expect("a cut exists");
            assert!(
                no_split(&messages, &closing, cut),
                "keep {keep_bytes}: cut {cut}"
            );
            assert!((1..messages.len()).contains(&cut));
        }
        // The open call's result follows: the assistant message calling it is kept whatever
        // the budget, and the smallest cut keeps only it.
        assert_eq!(choose_cut(&messages, &closing, 0), Some(5));
        // A generous budget keeps everything but the first message; a cut inside a call's
        // round trip (at 2 or 4) is never chosen.
        assert_eq!(choose_cut(&messages, &closing, 100_000), Some(1));
        let mid = messages[3..].iter().map(message_bytes).sum::<usize>()
            + closing.iter().map(json_bytes).sum::<usize>();
        assert_eq!(choose_cut(&messages, &closing, mid), Some(3));
        assert_eq!(choose_cut(&messages, &closing, mid + 10), Some(3));
    }

    #[test]
    fn no_cut_when_nothing_older_can_go() {
        // One message: the newest is always kept, so there is nothing to summarise.
        assert_eq!(choose_cut(&[user(vec![text("huge")])], &[], 0), None);
        // The only allowed cut would separate a call from its result.
        let messages = vec![user(vec![text("go")]), assistant(vec![call("a")])];
        assert_eq!(choose_cut(&messages, &[result("a")], 0), Some(1));
        let messages = vec![
            assistant(vec![call("a")]),
            user(vec![result("a"), text("x")]),
        ];
        assert_eq!(choose_cut(&messages, &[], 0), None);
    }

    #[test]
    fn windows_come_from_configuration_then_the_built_in_table() {
        let cfg = CompactionConfig::default()
            .with_env(
                Some("32000"),
                Some(r#"{"claude-sonnet-4-5": 1000, "gpt-x": 8000}"#),
                Some("0.5"),
            )
            .unwrap();
        assert_eq!(cfg.window("claude-sonnet-4-5"), 1_000);
        assert_eq!(cfg.window("claude-opus-4-1"), 200_000);
        assert_eq!(cfg.window("gpt-x"), 8_000);
        assert_eq!(cfg.window("mast-scripted"), 32_000);
        assert_eq!(cfg.limit("gpt-x"), 4_000);
        for bad in [
            (Some("0"), None, None),
            (None, Some("{\"m\": -1}"), None),
            (None, None, Some("1.5")),
            (None, None, Some("x")),
        ] {
            assert!(
                CompactionConfig::default()
                    .with_env(bad.0, bad.1, bad.2)
                    .is_err()
            );
        }
    }
}
