//! The summarisation request of context compaction, as the model sees it: a system prompt and
//! the older part of the conversation rendered as plain text. Rendering as text rather than
//! replaying the messages keeps the request valid on every provider (a replayed `tool_use`
//! needs its tool defined) and lets it be cut to size.

use serde_json::Value;

use super::{Message, Role};

/// The system prompt of a summarisation request. The scripted model recognises a
/// summarisation request by it.
pub const SYSTEM: &str = "You compact an agent's conversation history. Summarise the \
conversation below so the agent can continue its work from the summary alone: the user's goals \
and instructions, decisions made, facts and results learned from tools (names, paths, numbers), \
what is done and what remains. Be concise and specific; write only the summary.";

/// The longest text kept of one block: a huge tool output is cut rather than crowding out
/// the rest of the history.
const BLOCK_CHARS: usize = 4_000;

/// How the summary is put in front of the recent messages the model still sees verbatim.
pub fn boundary_text(summary: &str) -> String {
    format!(
        "<context-summary>\nThe earlier part of this conversation was compacted. Summary:\n{summary}\n</context-summary>"
    )
}

/// The user text of a summarisation request over `head`, at most `max_bytes` long: the newest
/// part is kept when the history is longer (the oldest part is usually an earlier summary
/// and what it already covered).
pub fn request_text(head: &[Message], max_bytes: usize) -> String {
    let mut parts: Vec<String> = head.iter().map(render_message).collect();
    let mut total: usize = parts.iter().map(|p| p.len() + 1).sum();
    let mut dropped = false;
    while total > max_bytes && parts.len() > 1 {
        total -= parts.remove(0).len() + 1;
        dropped = true;
    }
    let mut body = parts.join("\n");
    if body.len() > max_bytes {
        body = cut(&body, max_bytes).to_string();
    }
    let omitted = if dropped {
        "[the oldest messages were omitted to fit]\n"
    } else {
        ""
    };
    format!("<conversation>\n{omitted}{body}\n</conversation>\n\nSummarise the conversation above.")
}

fn render_message(m: &Message) -> String {
    let who = match m.role {
        Role::User => "[user]",
        Role::Assistant => "[assistant]",
    };
    let blocks: Vec<String> = m.content.iter().filter_map(render_block).collect();
    format!("{who}\n{}", blocks.join("\n"))
}

fn render_block(b: &Value) -> Option<String> {
    let s = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or_default();
    let text = match s("type") {
        "text" => s("text").to_string(),
        "tool_use" => format!(
            "[tool call {} ({})] {}",
            s("name"),
            s("id"),
            b.get("input").map(Value::to_string).unwrap_or_default()
        ),
        "tool_result" => {
            let inner = match b.get("content") {
                Some(Value::String(t)) => t.clone(),
                Some(Value::Array(a)) => a
                    .iter()
                    .filter_map(render_block)
                    .collect::<Vec<_>>()
                    .join("\n"),
                _ => String::new(),
            };
            let error = if b.get("is_error") == Some(&Value::Bool(true)) {
                " (error)"
            } else {
                ""
            };
            format!("[tool result for {}{error}] {inner}", s("tool_use_id"))
        }
        // Thinking is the model's own scratch work: the summary covers its outcome.
        "thinking" | "redacted_thinking" => return None,
        other => format!("[{other}]"),
    };
    Some(cut(&text, BLOCK_CHARS).to_string())
}

/// `s` cut to at most `max` bytes on a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn renders_calls_results_and_keeps_the_newest_part() {
        let head = vec![
            Message {
                role: Role::User,
                content: vec![json!({"type":"text","text":"old question"})],
            },
            Message {
                role: Role::Assistant,
                content: vec![
                    json!({"type":"thinking","thinking":"hmm","signature":"s"}),
                    json!({"type":"tool_use","id":"t1","name":"bash","input":{"command":"ls"}}),
                ],
            },
            Message {
                role: Role::User,
                content: vec![
                    json!({"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"a.txt"}]}),
                ],
            },
        ];
        let text = request_text(&head, 10_000);
        assert!(text.contains("[user]\nold question"), "{text}");
        assert!(
            text.contains("[tool call bash (t1)] {\"command\":\"ls\"}"),
            "{text}"
        );
        assert!(text.contains("[tool result for t1] a.txt"), "{text}");
        assert!(!text.contains("hmm"), "thinking is not rendered: {text}");
        let short = request_text(&head, 60);
        assert!(!short.contains("old question"), "{short}");
        assert!(short.contains("omitted"), "{short}");
    }
}
