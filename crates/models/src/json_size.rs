//! The size of a conversation as compact JSON text, counted without writing it, and what the
//! engine already knows of it ([`SizedPrefix`]): a provider that estimates usage from the
//! conversation's size (the scripted model) sizes only the messages it has not seen, so a
//! request deep into a long session costs what an early one does.

use serde_json::Value;

use super::Message;

/// How long the leading messages of a request are as JSON: `bytes` is the sum of
/// [`content_len`] over the first `messages` messages. The engine extends it as a thread's
/// conversation settles (`engine::context::Transcript`); zero is always true.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SizedPrefix {
    pub messages: usize,
    pub bytes: usize,
}

impl SizedPrefix {
    /// The summed [`content_len`] of every message, taking the first `self.messages` from
    /// what is known. A prefix longer than the messages (which the engine never makes) is
    /// ignored rather than trusted.
    pub fn total(self, messages: &[Message]) -> usize {
        match messages.get(self.messages..) {
            Some(rest) => self.bytes + rest.iter().map(content_len).sum::<usize>(),
            None => messages.iter().map(content_len).sum(),
        }
    }

    /// This prefix extended over `messages[self.messages..upto]` (which must be unchanged
    /// since the prefix was taken of them).
    pub fn extended(self, messages: &[Message], upto: usize) -> SizedPrefix {
        let upto = upto.min(messages.len());
        if upto <= self.messages {
            return self;
        }
        SizedPrefix {
            messages: upto,
            bytes: self.bytes
                + messages[self.messages..upto]
                    .iter()
                    .map(content_len)
                    .sum::<usize>(),
        }
    }
}

/// The length of a message's content (its array of blocks) as compact JSON text.
pub fn content_len(m: &Message) -> usize {
    2 + m.content.len().saturating_sub(1) + m.content.iter().map(json_len).sum::<usize>()
}

/// The length of `v` as compact JSON text, counted without writing it: serialising a
/// conversation only to measure it was most of a scripted turn's cost.
pub fn json_len(v: &Value) -> usize {
    match v {
        Value::Null => 4,
        Value::Bool(b) => {
            if *b {
                4
            } else {
                5
            }
        }
        Value::Number(n) => n.to_string().len(),
        Value::String(s) => json_str_len(s),
        Value::Array(items) => {
            2 + items.len().saturating_sub(1) + items.iter().map(json_len).sum::<usize>()
        }
        Value::Object(map) => {
            2 + map.len().saturating_sub(1)
                + map
                    .iter()
                    .map(|(k, v)| json_str_len(k) + 1 + json_len(v))
                    .sum::<usize>()
        }
    }
}

/// A string's length as a JSON string literal, quotes and escapes included (serde_json's
/// escapes: two bytes for `"`, `\\` and the five short control escapes, six for other control
/// characters; everything else as UTF-8).
fn json_str_len(s: &str) -> usize {
    2 + s
        .bytes()
        .map(|b| match b {
            b'"' | b'\\' | b'\x08' | b'\x0c' | b'\n' | b'\r' | b'\t' => 2,
            0..=0x1f => 6,
            _ => 1,
        })
        .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::Role;

    #[test]
    fn json_len_matches_serde_json() {
        let values = [
            json!(null),
            json!([true, false, 0, -12, 3.5, 1e300, u64::MAX, "x"]),
            json!({"a": "q\"uote\\back\nnl\r\t\u{8}\u{c}\u{1}\u{1f} é ü 日本 🎉", "b": [], "c": {}, "": [{}]}),
            json!([{"type": "text", "text": "hi"}, {"type": "tool_use", "id": "toolu_1", "input": {"n": 1}}]),
        ];
        for v in values {
            assert_eq!(
                json_len(&v),
                serde_json::to_string(&v).unwrap().len(),
                "{v}"
            );
        }
        for content in [vec![json!({"type": "text"}), json!(1)], vec![]] {
            let text = serde_json::to_string(&content).unwrap();
            let m = Message {
                role: Role::User,
                content,
            };
            assert_eq!(content_len(&m), text.len());
        }
    }

    #[test]
    fn a_prefix_counts_what_it_covers_once() {
        let m = |t: &str| Message {
            role: Role::User,
            content: vec![json!({"type": "text", "text": t})],
        };
        let messages = vec![m("a"), m("bb"), m("ccc")];
        let whole: usize = messages.iter().map(content_len).sum();
        let none = SizedPrefix::default();
        assert_eq!(none.total(&messages), whole);
        let two = none.extended(&messages, 2);
        assert_eq!(two.messages, 2);
        assert_eq!(
            two.bytes,
            content_len(&messages[0]) + content_len(&messages[1])
        );
        assert_eq!(two.total(&messages), whole);
        assert_eq!(two.extended(&messages, 1), two, "a prefix never shrinks");
        assert_eq!(
            two.extended(&messages, 9).messages,
            3,
            "nor outgrows the messages"
        );
        // Bytes that are not the messages' show: the prefix is trusted for what it covers.
        let claimed = SizedPrefix {
            messages: 2,
            bytes: 1,
        };
        assert_eq!(claimed.total(&messages), 1 + content_len(&messages[2]));
        let too_long = SizedPrefix {
            messages: 4,
            bytes: 1,
        };
        assert_eq!(
            too_long.total(&messages),
            whole,
            "a prefix past the end is ignored"
        );
    }
}
