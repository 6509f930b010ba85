//! A map bounded by an estimate of the bytes its values hold, dropping the least recently
//! used entries when it grows past its budget. Shared by the caches that keep what a
//! session's body costs to fetch or to parse (the engine's body cache, the Postgres
//! store's known bodies); callers hold it behind their own lock.

use std::collections::HashMap;

/// Values by string key, at most about `budget` bytes of them by their callers' estimate.
pub struct Lru<V> {
    budget: usize,
    entries: HashMap<String, Entry<V>>,
    bytes: usize,
    tick: u64,
}

struct Entry<V> {
    value: V,
    bytes: usize,
    used: u64,
}

impl<V> Lru<V> {
    /// An empty map holding at most about `budget` bytes.
    pub fn new(budget: usize) -> Self {
        Lru {
            budget,
            entries: HashMap::new(),
            bytes: 0,
            tick: 0,
        }
    }

    /// The value under `key`, marked as used now.
    pub fn get_mut(&mut self, key: &str) -> Option<&mut V> {
        self.tick += 1;
        let tick = self.tick;
        self.entries.get_mut(key).map(|e| {
            e.used = tick;
            &mut e.value
        })
    }

    /// Whether a value of `bytes` may be kept at all: one past a quarter of the budget would
    /// push out most of the others, so it is not.
    pub fn fits(&self, bytes: usize) -> bool {
        bytes <= self.budget / 4
    }

    /// Keeps `value` (estimated at `bytes`) under `key`, replacing what was there; when that
    /// takes the map past its budget, the least recently used entries go until it holds
    /// three quarters of it (in one pass for many entries, so its cost is spread over the
    /// inserts that filled them). A value that does not [`fit`](Self::fits) is not kept.
    pub fn insert(&mut self, key: String, value: V, bytes: usize) {
        if !self.fits(bytes) {
            self.remove(&key);
            return;
        }
        self.tick += 1;
        let used = self.tick;
        if let Some(old) = self.entries.insert(key, Entry { value, bytes, used }) {
            self.bytes -= old.bytes;
        }
        self.bytes += bytes;
        if self.bytes > self.budget {
            self.evict(self.budget * 3 / 4);
        }
    }

    /// Drops the value under `key`, if any.
    pub fn remove(&mut self, key: &str) {
        if let Some(old) = self.entries.remove(key) {
            self.bytes -= old.bytes;
        }
    }

    /// How many values are kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no value is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn evict(&mut self, target: usize) {
        let mut order: Vec<(u64, String)> = self
            .entries
            .iter()
            .map(|(k, e)| (e.used, k.clone()))
            .collect();
        order.sort_unstable();
        for (_, key) in order {
            if self.bytes <= target {
                break;
            }
            self.remove(&key);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_least_recently_used_go_first_down_to_three_quarters() {
        let mut lru = Lru::new(400);
        for key in ["a", "b", "c", "d"] {
            lru.insert(key.into(), key.to_string(), 100);
        }
        // "a" is used again, so "b" and "c" are the oldest when "e" overflows the budget.
        assert!(lru.get_mut("a").is_some());
        lru.insert("e".into(), "e".into(), 100);
        assert_eq!(lru.len(), 3);
        for (key, kept) in [
            ("a", true),
            ("b", false),
            ("c", false),
            ("d", true),
            ("e", true),
        ] {
            assert_eq!(lru.get_mut(key).is_some(), kept, "{key}");
        }
    }

    #[test]
    fn a_replaced_value_is_counted_once_and_an_oversized_one_is_not_kept() {
        let mut lru = Lru::new(400);
        lru.insert("a".into(), 1, 100);
        lru.insert("a".into(), 2, 100);
        lru.insert("b".into(), 3, 100);
        lru.insert("c".into(), 4, 100);
        lru.insert("d".into(), 5, 100);
        // Four entries of 100 fill the budget exactly: nothing went.
        assert_eq!(lru.len(), 4);
        assert_eq!(lru.get_mut("a"), Some(&mut 2));
        // Past a quarter of the budget: not kept, and what the key held goes too.
        lru.insert("a".into(), 6, 101);
        assert_eq!(lru.get_mut("a"), None);
        assert_eq!(lru.len(), 3);
    }
}
