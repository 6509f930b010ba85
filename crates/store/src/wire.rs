//! An event's wire JSON written straight from its stored body, for the streams that send
//! every committed event: building the [`EventRecord::wire`] value first copied the whole
//! body for each event and subscriber page.

use super::EventRecord;

impl EventRecord {
    /// [`EventRecord::wire`] as JSON text, written straight from the body rather than
    /// through a copy of it: the same bytes (keys in the map's sorted order).
    pub fn wire_json(&self) -> String {
        let Some(body) = self.body.as_object() else {
            return self.body.to_string();
        };
        let processed = mast_domain::time::format_opt(self.processed_at);
        // In sorted order, as a map of sorted keys holds them.
        let added = [
            ("id", Some(self.id.as_str())),
            ("processed_at", processed.as_deref()),
            ("type", Some(self.kind.as_str())),
        ];
        let mut out = Vec::with_capacity(256);
        let mut first = true;
        let mut entry = |out: &mut Vec<u8>, k: &str, v: &dyn erased::Json| {
            out.push(if first { b'{' } else { b',' });
            first = false;
            erased::write(out, &k);
            out.push(b':');
            v.write(out);
        };
        let mut pending = added.iter().peekable();
        for (k, v) in body {
            while let Some((ak, av)) = pending.next_if(|(ak, _)| *ak < k.as_str()) {
                entry(&mut out, ak, av);
            }
            if !added.iter().any(|(ak, _)| ak == k) {
                entry(&mut out, k, v);
            }
        }
        for (ak, av) in pending {
            entry(&mut out, ak, av);
        }
        if first {
            out.push(b'{');
        }
        out.push(b'}');
        String::from_utf8(out).expect("serde_json writes UTF-8")
    }
}

/// Values [`EventRecord::wire_json`] writes, behind one object-safe trait.
mod erased {
    /// A value that writes itself as JSON.
    pub trait Json {
        /// Appends the value as compact JSON.
        fn write(&self, out: &mut Vec<u8>);
    }

    impl<T: serde::Serialize + ?Sized> Json for T {
        fn write(&self, out: &mut Vec<u8>) {
            write(out, self);
        }
    }

    /// Appends `v` as compact JSON.
    pub fn write<T: serde::Serialize + ?Sized>(out: &mut Vec<u8>, v: &T) {
        serde_json::to_writer(out, v).expect("a JSON value always serialises");
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn record(body: serde_json::Value, processed_at: Option<i64>) -> EventRecord {
        EventRecord {
            session_id: "sesn_1".into(),
            seq: 3,
            id: "sevt_1".into(),
            thread_id: None,
            kind: "agent.message".into(),
            body,
            internal: None,
            processed_at,
            created_at: 0,
        }
    }

    #[test]
    fn wire_json_is_the_wire_value_as_text() {
        let bodies = [
            json!({}),
            json!({"content": [{"type": "text", "text": "it's \"quoted\"\n"}]}),
            json!({"a": 1, "id": "body's own", "j": null, "processed_at": 5, "q": [1, 2], "type": "x", "z": {"k": true}}),
            json!({"aa": 1}),
            json!({"zz": "last"}),
            json!({"ida": 1, "processed": 2, "types": 3, "\u{e9}": "accent"}),
            json!("not an object"),
            json!([1, 2]),
        ];
        for body in bodies {
            for at in [None, Some(1_700_000_000_123_456)] {
                let r = record(body.clone(), at);
                assert_eq!(r.wire_json(), r.wire().to_string(), "{body}");
            }
        }
    }
}
