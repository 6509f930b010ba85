//! Object ids: `<prefix>_01<22 base62 chars>`, unique and sortable by creation time.

use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

const ALPHABET: &[u8; 62] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
const BODY_LEN: usize = 22;

/// Last value handed out, so ids minted in the same millisecond still sort in creation order.
static LAST: Mutex<u128> = Mutex::new(0);

/// A new id with the given upstream prefix (`agent`, `env`, `sesn`, `sevt`, `sthr`, ...).
///
/// The body is 48 bits of milliseconds followed by 80 random bits, rendered in fixed-width
/// base62 whose alphabet is in ASCII order, so string order is creation order.
pub fn new_id(prefix: &str) -> String {
    let millis = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0)
        & ((1u128 << 48) - 1);
    let random: u128 = rand::random::<u128>() & ((1u128 << 80) - 1);
    let mut candidate = (millis << 80) | random;
    {
        let mut last = LAST.lock().unwrap_or_else(|e| e.into_inner());
        if candidate <= *last {
            candidate = *last + 1;
        }
        *last = candidate;
    }
    let mut body = [b'0'; BODY_LEN];
    let mut n = candidate;
    for slot in body.iter_mut().rev() {
        *slot = ALPHABET[(n % 62) as usize];
        n /= 62;
    }
    let mut id = String::with_capacity(prefix.len() + 3 + BODY_LEN);
    id.push_str(prefix);
    id.push_str("_01");
    id.push_str(std::str::from_utf8(&body).expect("base62 is ascii"));
    id
}

/// A random url-safe secret of `len` base62 characters (API keys, tokens).
pub fn new_secret(len: usize) -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    (0..len)
        .map(|_| ALPHABET[rng.random_range(0..62)] as char)
        .collect()
}

/// Whether `id` looks like one of ours with the given prefix (cheap pre-check before a lookup).
pub fn has_prefix(id: &str, prefix: &str) -> bool {
    id.len() > prefix.len() + 1 && id.starts_with(prefix) && id.as_bytes()[prefix.len()] == b'_'
}

/// What each id prefix names, for messages about an id given where another kind was wanted.
const KINDS: &[(&str, &str)] = &[
    ("agent", "an agent"),
    ("env", "an environment"),
    ("sesn", "a session"),
    ("sthr", "a session thread"),
    ("sevt", "an event"),
    ("sesrsc", "a session resource"),
    ("vlt", "a vault"),
    ("vcrd", "a vault credential"),
    ("file", "a file"),
    ("memstore", "a memory store"),
    ("mem", "a memory"),
    ("memver", "a memory version"),
    ("skill", "a skill"),
    ("skillver", "a skill version"),
    ("depl", "a deployment"),
    ("drun", "a deployment run"),
    ("hook", "a hook"),
    ("whep", "a webhook endpoint"),
    ("whdl", "a webhook delivery"),
    ("work", "a work item"),
    ("envkey", "an environment key"),
];

/// When `id` has the prefix of another kind than `wanted` (` (`agent_…` is an agent id)`),
/// those words, to append to a not-found message; empty otherwise. Pasting one resource's
/// id where another's belongs is a common slip, and "not found" alone does not show it.
pub fn other_kind_hint(id: &str, wanted: &str) -> String {
    let Some((prefix, _)) = id.split_once('_') else {
        return String::new();
    };
    match KINDS.iter().find(|(p, _)| *p == prefix) {
        Some((p, kind)) if *p != wanted => format!(" (`{id}` is {kind} id)"),
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_id_of_another_kind_is_named() {
        let agent = new_id("agent");
        assert_eq!(
            other_kind_hint(&agent, "env"),
            format!(" (`{agent}` is an agent id)")
        );
        assert_eq!(other_kind_hint(&agent, "agent"), "");
        assert_eq!(other_kind_hint("env_nope", "env"), "");
        assert_eq!(other_kind_hint("nonsense", "env"), "");
        assert_eq!(other_kind_hint("zzz_1", "env"), "");
        // The whole prefix counts: a memory store is not a memory.
        assert!(other_kind_hint("memstore_1", "mem").contains("a memory store id"));
    }

    #[test]
    fn ids_sort_in_creation_order_and_are_unique() {
        let ids: Vec<String> = (0..2000).map(|_| new_id("sevt")).collect();
        let mut sorted = ids.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(ids, sorted);
        assert!(ids[0].starts_with("sevt_01"));
        assert_eq!(ids[0].len(), "sevt_01".len() + BODY_LEN);
    }

    #[test]
    fn prefix_check() {
        assert!(has_prefix("agent_01abc", "agent"));
        assert!(!has_prefix("agentx_01", "agent"));
        assert!(!has_prefix("agent_", "agent"));
    }
}
