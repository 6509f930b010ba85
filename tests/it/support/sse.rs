//! An SSE client for tests, parsing frames the way the SDK does.

use std::time::Duration;

use futures_util::StreamExt;
use mast::models::sse::{SseDecoder, SseEvent};
use serde_json::Value;
use tokio::sync::mpsc;

/// An open event stream.
pub struct Stream {
    rx: mpsc::UnboundedReceiver<SseEvent>,
    pub seen: Vec<Value>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Stream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Stream {
    /// Opens `path` (a stream endpoint) with optional extra headers; panics on non-2xx.
    pub async fn open(base: &str, path: &str, key: Option<&str>, headers: &[(&str, &str)]) -> Self {
        let mut req = reqwest::Client::new()
            .get(format!("{base}{path}"))
            .header("accept", "application/json");
        if let Some(k) = key {
            req = req.header("x-api-key", k);
        }
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.expect("stream request");
        assert!(
            resp.status().is_success(),
            "stream status {}",
            resp.status()
        );
        assert!(
            resp.headers()["content-type"]
                .to_str()
                .unwrap()
                .starts_with("text/event-stream")
        );
        let (tx, rx) = mpsc::unbounded_channel();
        let task = tokio::spawn(async move {
            let mut dec = SseDecoder::default();
            let mut body = resp.bytes_stream();
            while let Some(Ok(chunk)) = body.next().await {
                for ev in dec.feed(&chunk) {
                    if tx.send(ev).is_err() {
                        return;
                    }
                }
            }
        });
        Stream {
            rx,
            seen: Vec::new(),
            task,
        }
    }

    /// The next frame with an `event:` other than ping, as (event, parsed data).
    pub async fn next_frame(&mut self, secs: u64) -> Option<(String, Value)> {
        loop {
            let ev = tokio::time::timeout(Duration::from_secs(secs), self.rx.recv())
                .await
                .ok()??;
            let Some(name) = ev.event else { continue };
            if name == "ping" {
                continue;
            }
            let data: Value = serde_json::from_str(&ev.data).expect("frame data is JSON");
            assert_eq!(
                data["type"].as_str(),
                Some(name.as_str()),
                "event name equals the JSON type"
            );
            return Some((name, data));
        }
    }

    /// The next persisted event (skipping previews).
    pub async fn next_event(&mut self, secs: u64) -> Value {
        loop {
            let (name, data) = self
                .next_frame(secs)
                .await
                .expect("stream produced an event in time");
            if name == "event_start" || name == "event_delta" {
                continue;
            }
            self.seen.push(data.clone());
            return data;
        }
    }

    /// Reads events until one matches `pred`; returns it.
    pub async fn until(&mut self, secs: u64, pred: impl Fn(&Value) -> bool) -> Value {
        loop {
            let e = self.next_event(secs).await;
            if pred(&e) {
                return e;
            }
        }
    }

    /// Reads until a `session.status_idle`; returns it.
    pub async fn until_idle(&mut self, secs: u64) -> Value {
        self.until(secs, |e| e["type"] == "session.status_idle")
            .await
    }

    /// Whether the server ends the stream within `secs` (frames before the end are skipped).
    pub async fn ends_within(&mut self, secs: u64) -> bool {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(secs);
        loop {
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(None) => return true,
                Ok(Some(_)) => continue,
                Err(_) => return false,
            }
        }
    }
}
