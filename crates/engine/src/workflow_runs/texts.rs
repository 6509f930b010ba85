//! What the run threads of a session returned, held by the session's runner for rendering.
//!
//! A run's state names the thread that returned each result, not its text; the runner keeps
//! the texts its run threads returned (each thread adds its own before the transaction that
//! records its return) and reads those of earlier runners back from the threads' logs
//! before a transition may need them.

use std::collections::HashMap;
use std::sync::Mutex;

/// Result texts by run thread id.
#[derive(Debug, Default)]
pub struct ResultTexts {
    texts: Mutex<HashMap<String, String>>,
}

impl ResultTexts {
    /// Records what `thread` returned.
    pub fn put(&self, thread: &str, text: &str) {
        self.texts
            .lock()
            .expect("result texts lock")
            .insert(thread.to_string(), text.to_string());
    }

    /// What `thread` returned; "" when unknown (the interpreter then renders nothing).
    pub fn get(&self, thread: &str) -> String {
        let found = self
            .texts
            .lock()
            .expect("result texts lock")
            .get(thread)
            .cloned();
        if found.is_none() {
            tracing::warn!(thread_id = %thread, "a workflow run read a result its runner does not hold");
        }
        found.unwrap_or_default()
    }

    /// Which of `threads` this runner does not hold yet.
    pub fn missing<'a>(&self, threads: impl Iterator<Item = &'a String>) -> Vec<String> {
        let held = self.texts.lock().expect("result texts lock");
        threads
            .filter(|t| !held.contains_key(*t))
            .cloned()
            .collect()
    }
}
