//! A map bounded by an estimate of the bytes its values hold, dropping the entries least
//! likely to be used again when it grows past its budget (CLOCK-Pro: an entry kept and never
//! read again goes before the ones in use, so sessions woken once do not push out the busy ones). Shared by the caches that keep what
//! a session's body costs to fetch or to parse (the engine's body cache, the Postgres store's
//! known bodies); callers hold it behind their own lock.
//!
//! A thin wrapper over `quick_cache`'s single-threaded cache, which measured faster than the
//! hand-written map it replaced and kept more of a hot set within the same budget (BENCHMARKS.md,
//! "Crates against hand-written code"); the wrapper keeps the callers' estimate beside each value
//! and refuses a value too large to share the budget.

use std::ops::{Deref, DerefMut};

use quick_cache::{DefaultHashBuilder, Weighter, unsync};

/// Values by string key, at most about `budget` bytes of them by their callers' estimate.
pub struct Lru<V> {
    budget: usize,
    entries: unsync::Cache<String, (V, usize), ByEstimate>,
}

/// Weighs an entry by the estimate stored beside its value.
#[derive(Clone, Copy)]
struct ByEstimate;

impl<V> Weighter<String, (V, usize)> for ByEstimate {
    fn weight(&self, _key: &String, value: &(V, usize)) -> u64 {
        // Never zero: the cache does not evict weightless entries.
        value.1.max(1) as u64
    }
}

/// The cache's own borrow of one entry, named once so [`Slot`] stays readable.
type EntryRef<'a, V> = unsync::RefMut<
    'a,
    String,
    (V, usize),
    ByEstimate,
    DefaultHashBuilder,
    unsync::DefaultLifecycle<String, (V, usize)>,
>;

/// A value kept in an [`Lru`], borrowed for change.
pub struct Slot<'a, V>(EntryRef<'a, V>);

impl<V> Deref for Slot<'_, V> {
    type Target = V;

    fn deref(&self) -> &V {
        &self.0.0
    }
}

impl<V> DerefMut for Slot<'_, V> {
    fn deref_mut(&mut self) -> &mut V {
        &mut self.0.0
    }
}

/// The entries a budget is sized for before it is full: the cache sizes its table from this,
/// and entries of about 4 KB are the common case of its users.
const TYPICAL_ENTRY_BYTES: usize = 4096;

impl<V> Lru<V> {
    /// An empty map holding at most about `budget` bytes.
    pub fn new(budget: usize) -> Self {
        Lru {
            budget,
            entries: unsync::Cache::with_weighter(
                (budget / TYPICAL_ENTRY_BYTES).max(1),
                budget as u64,
                ByEstimate,
            ),
        }
    }

    /// The value under `key`, marked as used now.
    pub fn get_mut(&mut self, key: &str) -> Option<Slot<'_, V>> {
        self.entries.get_mut(key).map(Slot)
    }

    /// Whether a value of `bytes` may be kept at all: one past a quarter of the budget would
    /// push out most of the others, so it is not.
    pub fn fits(&self, bytes: usize) -> bool {
        bytes <= self.budget / 4
    }

    /// Keeps `value` (estimated at `bytes`) under `key`, replacing what was there; when that
    /// takes the map past its budget, the entries least likely to be used again go. A value
    /// that does not [`fit`](Self::fits) is not kept, and what the key held goes too.
    pub fn insert(&mut self, key: String, value: V, bytes: usize) {
        if !self.fits(bytes) {
            self.remove(&key);
            return;
        }
        self.entries.insert(key, (value, bytes));
    }

    /// Drops the value under `key`, if any.
    pub fn remove(&mut self, key: &str) {
        self.entries.remove(key);
    }

    /// How many values are kept.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no value is kept.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The callers' estimate of what the kept values hold, in bytes.
    pub fn bytes(&self) -> usize {
        self.entries.weight() as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn new_entries_in_use_push_out_the_unused_old_ones_and_the_used_one_stays() {
        let mut lru = Lru::new(100 * 64);
        for i in 0..64 {
            lru.insert(format!("old-{i}"), i, 100);
        }
        assert_eq!(lru.len(), 64);
        // As sessions come and go: each new entry is read again after it is kept (a session's
        // next wake), and one old entry stays in use throughout.
        for i in 0..128 {
            assert!(lru.get_mut("old-7").is_some(), "the used entry went at {i}");
            lru.insert(format!("new-{i}"), 1000 + i, 100);
            assert!(lru.get_mut(&format!("new-{i}")).is_some());
            assert!(lru.bytes() <= 100 * 64, "over budget: {}", lru.bytes());
        }
        let old_kept = (0..64)
            .filter(|i| *i != 7 && lru.get_mut(&format!("old-{i}")).is_some())
            .count();
        assert!(old_kept < 8, "{old_kept} unused old entries kept");
        assert_eq!(lru.get_mut("old-7").as_deref(), Some(&7));
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
        assert_eq!(lru.bytes(), 400);
        assert_eq!(lru.get_mut("a").as_deref(), Some(&2));
        // Past a quarter of the budget: not kept, and what the key held goes too.
        lru.insert("a".into(), 6, 101);
        assert!(lru.get_mut("a").is_none());
        assert_eq!(lru.len(), 3);
        assert_eq!(lru.bytes(), 300);
    }

    #[test]
    fn a_change_through_a_slot_is_kept() {
        let mut lru = Lru::new(400);
        lru.insert("a".into(), vec![1], 50);
        lru.get_mut("a").unwrap().push(2);
        assert_eq!(lru.get_mut("a").as_deref(), Some(&vec![1, 2]));
    }
}
