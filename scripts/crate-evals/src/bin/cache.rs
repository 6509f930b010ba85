//! The store's hand-written LRU against `quick_cache` and `moka`, on the access pattern of the
//! caches that use it (the engine's parsed bodies, the Postgres store's known bodies): string
//! session ids, values of a few `Arc`s weighed by their text's size, a 16 MiB budget, a value
//! over a quarter of the budget never kept, and each wake of a session reading its entry a few
//! times in a row. Prints the cost of a read, of a wake, the share of wakes that found their
//! entry, and the heap each structure adds per entry.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

#[path = "../../../../crates/store/src/lru.rs"]
#[allow(dead_code)]
mod lru;

/// The system allocator, counting the bytes live.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

// SAFETY: every call is forwarded to the system allocator unchanged.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

/// The caches' budget (`bodies::DEFAULT_BUDGET`, `known_bodies::DEFAULT_BUDGET`).
const BUDGET: usize = 16 << 20;

/// What the known-bodies cache keeps: a revision and the shared text.
#[derive(Clone)]
struct Known {
    #[allow(dead_code)]
    rev: i64,
    #[allow(dead_code)]
    text: Arc<str>,
}

/// The operations the callers use, each cache behind what it needs to be shared.
trait Cache: Sync {
    fn name(&self) -> &'static str;
    fn get(&self, key: &str) -> Option<Known>;
    fn insert(&self, key: String, value: Known, bytes: usize);
    /// Lets a cache with deferred upkeep catch up before it is measured.
    fn settle(&self) {}
}

struct Hand(Mutex<lru::Lru<Known>>);

impl Cache for Hand {
    fn name(&self) -> &'static str {
        "hand-written Lru (Mutex)"
    }
    fn get(&self, key: &str) -> Option<Known> {
        self.0.lock().unwrap().get_mut(key).cloned()
    }
    fn insert(&self, key: String, value: Known, bytes: usize) {
        self.0.lock().unwrap().insert(key, value, bytes);
    }
}

/// Weighs an entry by the estimate stored beside its value, as the callers compute it.
#[derive(Clone)]
struct ByEstimate;

impl quick_cache::Weighter<String, (Known, usize)> for ByEstimate {
    fn weight(&self, _: &String, v: &(Known, usize)) -> u64 {
        v.1 as u64
    }
}

/// The number of entries quick_cache is told to expect for `mean` bytes an entry.
fn expected(mean: usize) -> usize {
    BUDGET / mean
}

struct QcUnsync(Mutex<quick_cache::unsync::Cache<String, (Known, usize), ByEstimate>>);

impl Cache for QcUnsync {
    fn name(&self) -> &'static str {
        "quick_cache::unsync (Mutex)"
    }
    fn get(&self, key: &str) -> Option<Known> {
        // get_mut, as the body cache needs to fill its tools in place.
        self.0.lock().unwrap().get_mut(key).map(|v| v.0.clone())
    }
    fn insert(&self, key: String, value: Known, bytes: usize) {
        let mut c = self.0.lock().unwrap();
        if bytes > BUDGET / 4 {
            c.remove(&key);
            return;
        }
        c.insert(key, (value, bytes));
    }
}

struct QcSync(quick_cache::sync::Cache<String, (Known, usize), ByEstimate>);

impl Cache for QcSync {
    fn name(&self) -> &'static str {
        "quick_cache::sync"
    }
    fn get(&self, key: &str) -> Option<Known> {
        self.0.get(key).map(|v| v.0)
    }
    fn insert(&self, key: String, value: Known, bytes: usize) {
        if bytes > BUDGET / 4 {
            self.0.remove(&key);
            return;
        }
        self.0.insert(key, (value, bytes));
    }
}

struct Moka(moka::sync::Cache<String, (Known, usize)>);

impl Cache for Moka {
    fn name(&self) -> &'static str {
        "moka::sync"
    }
    fn get(&self, key: &str) -> Option<Known> {
        self.0.get(key).map(|v| v.0)
    }
    fn insert(&self, key: String, value: Known, bytes: usize) {
        if bytes > BUDGET / 4 {
            self.0.invalidate(&key);
            return;
        }
        self.0.insert(key, (value, bytes));
    }
    fn settle(&self) {
        self.0.run_pending_tasks();
    }
}

/// The caches compared, or only those whose name contains the program's second argument.
fn caches(mean: usize) -> Vec<Box<dyn Cache>> {
    let only = std::env::args().nth(2).unwrap_or_default();
    let all: Vec<Box<dyn Cache>> = vec![
        Box::new(Hand(Mutex::new(lru::Lru::new(BUDGET)))),
        Box::new(QcUnsync(Mutex::new(
            quick_cache::unsync::Cache::with_weighter(expected(mean), BUDGET as u64, ByEstimate),
        ))),
        Box::new(QcSync(quick_cache::sync::Cache::with_weighter(
            expected(mean),
            BUDGET as u64,
            ByEstimate,
        ))),
        Box::new(Moka(
            moka::sync::Cache::builder()
                .max_capacity(BUDGET as u64)
                .weigher(|_: &String, v: &(Known, usize)| v.1 as u32)
                .build(),
        )),
    ];
    all.into_iter()
        .filter(|c| c.name().contains(&only))
        .collect()
}

/// Sessions: an id of 31 bytes (Mast's are 29) and a shared body text of `size` bytes.
fn sessions(n: usize, size: usize) -> Vec<(String, Arc<str>)> {
    (0..n)
        .map(|i| {
            let text: Arc<str> = format!("{i:0size$}").into();
            (format!("sesn_01jf{i:022}"), text)
        })
        .collect()
}

/// The known-bodies cache's estimate of an entry.
fn estimate(id: &str, text: &str) -> usize {
    64 + id.len() + text.len()
}

/// A small deterministic generator (xorshift64*), so every cache sees the same sequence.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) as usize % n
    }
}

fn fill(c: &dyn Cache, s: &[(String, Arc<str>)]) {
    for (i, (id, text)) in s.iter().enumerate() {
        let v = Known {
            rev: i as i64,
            text: text.clone(),
        };
        c.insert(id.clone(), v, estimate(id, text));
    }
    c.settle();
}

/// `reads` reads of random entries of `s`, all kept.
#[inline(never)]
fn read_loop(c: &dyn Cache, s: &[(String, Arc<str>)], reads: usize, seed: u64) {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 + seed);
    for _ in 0..reads {
        let (id, _) = &s[rng.below(s.len())];
        assert!(std::hint::black_box(c.get(id)).is_some());
    }
}

/// Reads of entries that are all kept (1,000 sessions of 2 KB), on `threads` threads.
fn hits(threads: usize) {
    let s = sessions(1_000, 2_048);
    let reads = 2_000_000 / threads;
    println!("\nreads, every entry kept (1,000 sessions, 2 KB bodies), {threads} thread(s):");
    for c in caches(2_200) {
        fill(&*c, &s);
        let t = Instant::now();
        std::thread::scope(|scope| {
            for th in 0..threads {
                let (c, s) = (&c, &s);
                scope.spawn(move || read_loop(&**c, s, reads, th as u64));
            }
        });
        let ns = t.elapsed().as_nanos() as f64 / (reads * threads) as f64;
        println!(
            "  {:<30} {ns:>7.1} ns per read (wall time / reads)",
            c.name()
        );
    }
}

/// Wakes over more sessions than the budget holds (10,000 sessions of 20 KB; about 800
/// fit): four in five go to a hot set of 500 sessions (10 MB, which fits), the rest to any
/// session. A wake reads the entry, keeps the body if it was not kept, and reads it three
/// more times (the body cache's peek and its tools' two lookups).
fn wakes() {
    let s = sessions(10_000, 20 * 1024);
    let n = 400_000;
    println!("\nwakes over 10,000 sessions of 20 KB (500 hot), budget 16 MiB:");
    for c in caches(21_000) {
        let t = Instant::now();
        let found = wake_loop(&*c, &s, n);
        let ns = t.elapsed().as_nanos() as f64 / n as f64;
        println!(
            "  {:<30} {ns:>7.1} ns per wake, entry found in {:>5.1} % of wakes",
            c.name(),
            100.0 * found as f64 / n as f64
        );
    }
}

/// `n` wakes of sessions of `s`; how many found their entry.
#[inline(never)]
fn wake_loop(c: &dyn Cache, s: &[(String, Arc<str>)], n: usize) -> usize {
    let mut rng = Rng(42);
    let mut found = 0;
    for i in 0..n {
        let k = if rng.below(5) < 4 {
            rng.below(500)
        } else {
            rng.below(s.len())
        };
        let (id, text) = &s[k];
        if c.get(id).is_some() {
            found += 1;
        } else {
            let v = Known {
                rev: i as i64,
                text: text.clone(),
            };
            c.insert(id.clone(), v, estimate(id, text));
        }
        for _ in 0..3 {
            std::hint::black_box(c.get(id));
        }
    }
    found
}

/// Heap each structure adds per entry: keys and texts are made before it is measured, so
/// what is counted is the table, its nodes and the structure's own bookkeeping.
fn memory() {
    let n = 10_000;
    println!("\nheap added per entry (10,000 entries of 1 KB, all kept):");
    for i in 0..caches(1).len() {
        let s = sessions(n, 1_024);
        let keys: Vec<(String, Known, usize)> = s
            .iter()
            .map(|(id, text)| {
                let v = Known {
                    rev: 0,
                    text: text.clone(),
                };
                (id.clone(), v, estimate(id, text))
            })
            .collect();
        let before = LIVE.load(Ordering::Relaxed);
        let c = caches(1_150).swap_remove(i);
        for (id, v, bytes) in keys {
            c.insert(id, v, bytes);
        }
        c.settle();
        let added = LIVE.load(Ordering::Relaxed) - before;
        println!(
            "  {:<30} {:>6.0} bytes per entry",
            c.name(),
            added as f64 / n as f64
        );
    }
}

/// `cache-bench [reads|wakes|memory|all] [cache name part]`.
fn main() {
    let what = std::env::args().nth(1).unwrap_or_else(|| "all".into());
    let all = what == "all";
    if all || what == "reads" {
        hits(1);
        hits(2);
    }
    if all || what == "wakes" {
        wakes();
    }
    if all || what == "memory" {
        memory();
    }
}
