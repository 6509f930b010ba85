//! What one replica tells the others: the few facts that must reach whichever replica runs a
//! session or holds its stream subscribers. Each is a hint — the store stays the truth — so a
//! lost signal only delays what a periodic check would find anyway.

/// A fact for the other replicas.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Signal {
    /// Events up to `seq` were committed to the session's log.
    Appended { session_id: String, seq: i64 },
    /// An interrupt of the session (or one of its threads) was recorded.
    Interrupt {
        session_id: String,
        thread_id: Option<String>,
    },
    /// A work item was queued in a self-hosted environment.
    WorkQueued { environment_id: String },
    /// The session was deleted.
    Deleted { session_id: String },
    /// API keys were created or revoked (by any process writing the store, the CLI
    /// included): cached key lookups must not be trusted any more.
    KeysChanged,
    /// Hooks were created or deleted (by any replica): cached hook lists must not be
    /// trusted any more.
    HooksChanged,
    /// The sender is alive: sent every few seconds, and at once to a replica newly heard.
    /// A `greeting` (sent by a replica whose listener just connected) is always answered, so
    /// a newcomer learns of every other replica before it has anything to tell them.
    Hello { greeting: bool },
}

impl Signal {
    /// The wire form: the sender's replica id, a letter, then space-separated ids (ids never
    /// contain spaces).
    pub fn encode(&self, origin: &str) -> String {
        match self {
            Signal::Appended { session_id, seq } => format!("{origin} a {session_id} {seq}"),
            Signal::Interrupt {
                session_id,
                thread_id: Some(t),
            } => format!("{origin} i {session_id} {t}"),
            Signal::Interrupt {
                session_id,
                thread_id: None,
            } => format!("{origin} i {session_id}"),
            Signal::WorkQueued { environment_id } => format!("{origin} q {environment_id}"),
            Signal::Deleted { session_id } => format!("{origin} d {session_id}"),
            Signal::KeysChanged => format!("{origin} k -"),
            Signal::HooksChanged => format!("{origin} x -"),
            Signal::Hello { greeting: false } => format!("{origin} h -"),
            Signal::Hello { greeting: true } => format!("{origin} h new"),
        }
    }

    /// Parses [`Signal::encode`]'s form into the origin and the signal.
    pub fn decode(payload: &str) -> Option<(&str, Signal)> {
        let mut parts = payload.split(' ');
        let origin = parts.next().filter(|o| !o.is_empty())?;
        let letter = parts.next()?;
        let id = parts.next().filter(|i| !i.is_empty())?.to_string();
        let extra = parts.next();
        if parts.next().is_some() {
            return None;
        }
        let signal = match (letter, extra) {
            ("a", Some(seq)) => Signal::Appended {
                session_id: id,
                seq: seq.parse().ok()?,
            },
            ("i", thread) => Signal::Interrupt {
                session_id: id,
                thread_id: thread.map(str::to_string),
            },
            ("q", None) => Signal::WorkQueued { environment_id: id },
            ("d", None) => Signal::Deleted { session_id: id },
            ("k", None) if id == "-" => Signal::KeysChanged,
            ("x", None) if id == "-" => Signal::HooksChanged,
            ("h", None) if id == "-" => Signal::Hello { greeting: false },
            ("h", None) if id == "new" => Signal::Hello { greeting: true },
            _ => return None,
        };
        Some((origin, signal))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        for s in [
            Signal::Appended {
                session_id: "sesn_1".into(),
                seq: 42,
            },
            Signal::Interrupt {
                session_id: "sesn_1".into(),
                thread_id: None,
            },
            Signal::Interrupt {
                session_id: "sesn_1".into(),
                thread_id: Some("sthr_2".into()),
            },
            Signal::WorkQueued {
                environment_id: "env_3".into(),
            },
            Signal::Deleted {
                session_id: "sesn_4".into(),
            },
            Signal::Hello { greeting: false },
            Signal::Hello { greeting: true },
            Signal::KeysChanged,
            Signal::HooksChanged,
        ] {
            assert_eq!(Signal::decode(&s.encode("runner_x")), Some(("runner_x", s)));
        }
        for bad in [
            "",
            "r",
            "r a",
            "r a s",
            "r a s x",
            "r z s",
            "r d s extra",
            "r a s 1 2",
            "r k x",
        ] {
            assert_eq!(Signal::decode(bad), None, "{bad}");
        }
    }
}
