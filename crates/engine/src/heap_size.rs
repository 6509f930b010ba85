//! What a cached value takes on the heap, so the caches' budgets count real bytes.
//!
//! The caches used to bound themselves by rough figures (a JSON object at 32 bytes plus its
//! keys) that counted about half of what the allocator handed out: a `serde_json` object's
//! map allocates a whole B-tree node, 632 bytes, however few keys it has. These functions
//! follow the values' actual layout — vectors by capacity, strings by capacity, a map by its
//! nodes — and the tests hold them to a counting allocator. They count the bytes requested,
//! not the allocator's rounding up to its size classes.

use std::collections::HashMap;
use std::mem::size_of;

use serde_json::Value;

use mast_models::Message;
use mast_store::{EventRecord, SessionRecord};

/// Bytes a value owns on the heap, beyond its own inline size.
pub trait HeapSize {
    /// The heap bytes this value owns (what dropping it frees, less its inline size).
    fn heap_size(&self) -> usize;
}

impl HeapSize for String {
    fn heap_size(&self) -> usize {
        self.capacity()
    }
}

impl<T: HeapSize> HeapSize for Option<T> {
    fn heap_size(&self) -> usize {
        self.as_ref().map_or(0, HeapSize::heap_size)
    }
}

impl<T: HeapSize> HeapSize for Vec<T> {
    fn heap_size(&self) -> usize {
        self.capacity() * size_of::<T>() + self.iter().map(HeapSize::heap_size).sum::<usize>()
    }
}

/// Keys and values a node of the standard library's B-tree holds at most (`2 * B - 1`).
const BTREE_CAPACITY: usize = 11;

/// A B-tree leaf of `serde_json`'s map: parent pointer, index and length, then the keys and
/// values. 632 bytes for `String` keys and `Value`s.
const BTREE_LEAF: usize =
    (8 + 2 + 2 + BTREE_CAPACITY * (size_of::<String>() + size_of::<Value>())).next_multiple_of(8);

/// An internal node: a leaf plus its edges.
const BTREE_INTERNAL: usize = BTREE_LEAF + (BTREE_CAPACITY + 1) * 8;

/// The nodes of a B-tree map of `n` entries. Up to [`BTREE_CAPACITY`] entries take one leaf;
/// beyond that nodes split in halves as they fill, so they hold about two thirds of their
/// capacity on average (the estimate for large objects, which events rarely carry).
fn btree_nodes(n: usize) -> usize {
    if n == 0 {
        return 0;
    }
    if n <= BTREE_CAPACITY {
        return BTREE_LEAF;
    }
    let per_node = BTREE_CAPACITY * 2 / 3 + 1;
    let leaves = n.div_ceil(per_node);
    let mut internal = 0;
    let mut level = leaves;
    while level > 1 {
        level = level.div_ceil(per_node + 1);
        internal += level;
    }
    leaves * BTREE_LEAF + internal * BTREE_INTERNAL
}

/// The heap a JSON object's map holds: its nodes, keys and values.
pub fn map_heap(o: &serde_json::Map<String, Value>) -> usize {
    btree_nodes(o.len())
        + o.iter()
            .map(|(k, v)| k.capacity() + v.heap_size())
            .sum::<usize>()
}

impl HeapSize for Value {
    fn heap_size(&self) -> usize {
        match self {
            Value::Null | Value::Bool(_) | Value::Number(_) => 0,
            Value::String(s) => s.capacity(),
            Value::Array(a) => a.heap_size(),
            Value::Object(o) => map_heap(o),
        }
    }
}

impl<V: HeapSize> HeapSize for HashMap<String, V> {
    fn heap_size(&self) -> usize {
        // hashbrown: a power of two of buckets, at most 7/8 full, one control byte each
        // plus a group's worth (16) more.
        let buckets = match self.capacity() {
            0 => 0,
            c if c < 8 => (c + 1).next_power_of_two(),
            c => (c * 8 / 7).next_power_of_two(),
        };
        let table = if buckets == 0 {
            0
        } else {
            buckets * (size_of::<(String, V)>() + 1) + 16
        };
        table
            + self
                .iter()
                .map(|(k, v)| k.capacity() + v.heap_size())
                .sum::<usize>()
    }
}

impl HeapSize for Message {
    fn heap_size(&self) -> usize {
        self.content.heap_size()
    }
}

impl HeapSize for EventRecord {
    fn heap_size(&self) -> usize {
        self.session_id.heap_size()
            + self.id.heap_size()
            + self.thread_id.heap_size()
            + self.kind.heap_size()
            + self.body.heap_size()
            + self.internal.heap_size()
    }
}

/// The heap an event takes where it is kept in a vector: its own slot as well.
pub fn event_bytes(e: &EventRecord) -> usize {
    size_of::<EventRecord>() + e.heap_size()
}

/// The heap a session row takes, kept on its own: the record and its strings. The body is
/// shared (`Arc<str>`) and counted here whole, with its reference counts: the row usually
/// keeps it alive on its own once the session's other copies are gone.
pub fn session_record_bytes(r: &SessionRecord) -> usize {
    size_of::<SessionRecord>()
        + 16
        + r.body.len()
        + r.id.heap_size()
        + r.workspace_id.heap_size()
        + r.agent_id.heap_size()
        + r.environment_id.heap_size()
        + r.status.heap_size()
        + r.usage.heap_size()
        + r.engine.heap_size()
        + r.lease_owner.heap_size()
}

#[cfg(test)]
pub(crate) mod tests {
    use serde_json::json;

    use super::*;

    /// The heap `make`'s value holds once made, by the counting allocator.
    pub(crate) fn measured<T>(make: impl FnOnce() -> T) -> (T, usize) {
        let mut out = None;
        let info = allocation_counter::measure(|| out = Some(make()));
        (out.expect("made"), info.bytes_current.max(0) as usize)
    }

    /// Whether `estimate` is within `tolerance` (a fraction) of `real`.
    pub(crate) fn close(estimate: usize, real: usize, tolerance: f64) -> bool {
        (estimate as f64 - real as f64).abs() <= real as f64 * tolerance
    }

    #[test]
    fn a_small_object_takes_a_whole_node() {
        let (v, real) = measured(|| json!({"type": "text"}));
        assert_eq!(v.heap_size(), real, "{v}");
        assert!(real > 632, "a node and two strings: {real}");
    }

    #[test]
    fn values_of_every_shape_are_counted() {
        let (v, real) = measured(|| {
            serde_json::from_str::<Value>(
                r#"{"content": [{"type": "text", "text": "hello there"}, {"type": "tool_use",
                "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris", "days": 3,
                "units": null, "hourly": true}}], "model_usage": {"input_tokens": 120,
                "output_tokens": 30}, "tags": ["a", "b", "c"]}"#,
            )
            .unwrap()
        });
        assert!(
            close(v.heap_size(), real, 0.05),
            "{} vs {real}",
            v.heap_size()
        );
    }

    #[test]
    fn a_large_object_is_counted_within_a_fifth() {
        for n in [12, 30, 100, 1000] {
            let (v, real) = measured(|| {
                let mut m = serde_json::Map::new();
                for i in 0..n {
                    m.insert(format!("key_{i:05}"), json!(i));
                }
                Value::Object(m)
            });
            assert!(
                close(v.heap_size(), real, 0.2),
                "{n} keys: {} vs {real}",
                v.heap_size()
            );
        }
    }

    #[test]
    fn a_map_of_values_is_counted() {
        let (m, real) = measured(|| {
            let mut m = HashMap::new();
            for i in 0..20 {
                m.insert(format!("toolu_{i}"), json!({"type": "tool_result", "n": i}));
            }
            m
        });
        assert!(
            close(m.heap_size(), real, 0.05),
            "{} vs {real}",
            m.heap_size()
        );
    }

    #[test]
    fn an_event_is_counted() {
        let (e, real) = measured(|| {
            Box::new(EventRecord {
                session_id: "sesn_0123456789".into(),
                seq: 7,
                id: "sevt_0123456789".into(),
                thread_id: Some("sthr_0123456789".into()),
                kind: "agent.tool_use".into(),
                body: json!({"name": "get_weather", "input": {}, "evaluated_permission": "allow"}),
                internal: Some(json!({"after_seq": 6})),
                processed_at: Some(1),
                created_at: 1,
            })
        });
        assert!(
            close(event_bytes(&e), real, 0.05),
            "{} vs {real}",
            event_bytes(&e)
        );
    }
}
