//! Per-turn workspace checkpoints, so a fork of a session at an earlier event gets the
//! workspace as it was then (`POST /v1/sessions/{id}/fork`, Mast's own).
//!
//! A checkpoint is a snapshot of the workspace ([`super::snapshots`]: content-addressed, so
//! it stores only what no earlier snapshot holds, and reads only files changed since the
//! session's previous checkpoint) taken by the primary thread just before its first built-in
//! tool call after a `user.message`, keyed by that message, recording the log position it
//! was taken at. Between two tool calls nothing changes the workspace, so a checkpoint holds
//! the workspace as of every point back to the previous tool call; a fork at position `C`
//! takes the earliest checkpoint at or after `C`, or the live workspace when no tool ran
//! after `C`. A fork is given its original's checkpoints before the fork point as they are
//! (index entries naming the same snapshots), so forking copies no bytes of them.
//!
//! Layout: `<data dir>/workspace-checkpoints/<session id>/index.json`, every checkpoint ever
//! taken, kept ones and those retention removed, so a fork never mistakes a removed
//! checkpoint for "nothing changed"; the snapshots' objects under
//! `<data dir>/workspace-objects/`. Both are private to the server (0700 directories, 0600
//! files): the sandbox never sees them. Checkpoints taken by an earlier version as whole
//! copies (`<session id>/<user.message id>/`) are still served and removed as before.
//!
//! Retention: the newest `keep` per session, and those together at most the workspace quota
//! in distinct bytes of content (what they would take stored uncompressed, each chunk held
//! by several counted once); older ones are removed first, and a workspace larger than the
//! quota (in bytes or in files) by itself is recorded as not kept. Removing a checkpoint
//! removes its index entry's claim; its objects go when a sweep finds nothing refers to them.

use std::collections::{HashMap, HashSet};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::snapshots::manifest::{CHUNK_SIZE, Kind};
use super::snapshots::{self, LocalObjects, Manifest, Objects, sweep::SweepStats};
use super::tree_copy::Budget;

/// One checkpoint of a session's index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The `user.message` whose turn it precedes.
    pub event_id: String,
    /// The log position it was taken at: it holds the workspace as of every event up to this
    /// sequence number, back to the tool call before it.
    pub position: i64,
    /// Still restorable; false once retention removed it.
    pub kept: bool,
    /// The snapshot's manifest key (none for a copy an earlier version took, whose
    /// directory is named by `event_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
    /// What the workspace held and what taking it cost (for the operator; the figures in
    /// docs/fork.md).
    #[serde(default)]
    pub bytes: u64,
    #[serde(default)]
    pub files: u64,
    #[serde(default)]
    pub micros: u64,
    /// Bytes this checkpoint added to the store (a copy: the bytes of disk it took).
    #[serde(default)]
    pub disk_bytes: u64,
    /// Files, directories and links.
    #[serde(default)]
    pub entries: u64,
    /// Files taken from the previous checkpoint without being read.
    #[serde(default)]
    pub unchanged_files: u64,
}

/// Where a fork's workspace comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// The snapshot with this manifest key.
    Snapshot(String),
    /// This copy of the workspace (taken by an earlier version).
    Copy(PathBuf),
    /// The original's live workspace (nothing ran after the fork point, as far as it knows).
    Live,
}

/// Why no workspace can be given for a fork point.
#[derive(Debug, Clone, PartialEq)]
pub struct NotKept {
    pub event_id: String,
}

/// The checkpoints of every session under one data directory.
#[derive(Clone)]
pub struct Checkpoints {
    root: PathBuf,
    objects: Arc<dyn Objects>,
    keep: usize,
    cap: Budget,
    /// When each snapshot in progress (in this process) began: a sweep spares what was
    /// written or reused since the oldest.
    in_flight: Arc<std::sync::Mutex<Vec<(u64, SystemTime)>>>,
    /// Woken when retention retires a checkpoint or a session's go, so their objects go
    /// soon.
    retired: Arc<tokio::sync::Notify>,
}

impl std::fmt::Debug for Checkpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checkpoints")
            .field("root", &self.root)
            .field("keep", &self.keep)
            .field("cap", &self.cap)
            .finish_non_exhaustive()
    }
}

impl Checkpoints {
    /// Checkpoints under `<data_dir>/workspace-checkpoints` with their objects under
    /// `<data_dir>/workspace-objects`, keeping the newest `keep` per session (0: none are
    /// kept, and forks at earlier points are refused), together within `cap` (the workspace
    /// quota).
    pub fn new(data_dir: &Path, keep: usize, cap: Budget) -> Self {
        Checkpoints {
            root: data_dir.join("workspace-checkpoints"),
            objects: Arc::new(LocalObjects::new(Self::objects_dir(data_dir))),
            keep,
            cap,
            in_flight: Default::default(),
            retired: Default::default(),
        }
    }

    /// Where the snapshots' objects are under a data directory.
    pub fn objects_dir(data_dir: &Path) -> PathBuf {
        data_dir.join("workspace-objects")
    }

    /// The cap on a session's kept checkpoints for a workspace quota of `limits` (a limit of
    /// 0 is none).
    pub fn cap_of(limits: &super::sandbox::Limits) -> Budget {
        let or_none = |n: u64| if n == 0 { u64::MAX } else { n };
        Budget {
            disk_bytes: or_none(limits.workspace_bytes),
            entries: or_none(limits.workspace_files),
        }
    }

    /// Creates (or tightens) the directories of a session's checkpoints, private to the
    /// server.
    fn private_dir(&self, session_id: &str) -> io::Result<PathBuf> {
        let dir = self.dir(session_id);
        mast_domain::private_fs::dir(&self.root)?;
        mast_domain::private_fs::dir(&dir)?;
        Ok(dir)
    }

    fn dir(&self, session_id: &str) -> PathBuf {
        self.root.join(session_id)
    }

    /// A session's index, oldest first (empty when it has none).
    pub fn index(&self, session_id: &str) -> io::Result<Vec<Entry>> {
        match std::fs::read(self.dir(session_id).join("index.json")) {
            Ok(bytes) => serde_json::from_slice(&bytes).map_err(io::Error::other),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(vec![]),
            Err(e) => Err(e),
        }
    }

    /// Replaces a session's index (written beside it and renamed, so readers see a whole one).
    pub fn write_index(&self, session_id: &str, entries: &[Entry]) -> io::Result<()> {
        let dir = self.private_dir(session_id)?;
        let tmp = dir.join(format!(".index.{}.json", mast_domain::ids::new_id("tmp")));
        mast_domain::private_fs::write(
            &tmp,
            &serde_json::to_vec(entries).map_err(io::Error::other)?,
        )?;
        std::fs::rename(&tmp, dir.join("index.json"))
    }

    /// Whether a checkpoint keyed by `event_id` was taken (kept or not).
    pub fn has(&self, session_id: &str, event_id: &str) -> io::Result<bool> {
        Ok(self
            .index(session_id)?
            .iter()
            .any(|e| e.event_id == event_id))
    }

    /// The manifest stored under `key`.
    pub fn manifest(&self, key: &str) -> io::Result<Manifest> {
        Manifest::open(key, &self.objects.get(key)?)
    }

    /// Snapshots `workspace` as the checkpoint of `event_id` at `position`, then retires the
    /// oldest beyond the retention (a count and a cap). Blocking (a walk of the tree): run it
    /// off the runtime.
    pub fn take(
        &self,
        session_id: &str,
        workspace: &Path,
        event_id: &str,
        position: i64,
    ) -> io::Result<Entry> {
        let mut entries = self.index(session_id)?;
        if let Some(e) = entries.iter().find(|e| e.event_id == event_id) {
            return Ok(e.clone());
        }
        let started = std::time::Instant::now();
        // Until the index records it, what the snapshot stores is referenced by nothing.
        let _taking = InFlight::begin(&self.in_flight);
        let mut entry = Entry {
            event_id: event_id.to_string(),
            position,
            kept: false,
            manifest: None,
            bytes: 0,
            files: 0,
            micros: 0,
            disk_bytes: 0,
            entries: 0,
            unchanged_files: 0,
        };
        let mut loaded = HashMap::new();
        let mut failure = None;
        if self.keep > 0 {
            // The newest kept snapshot tells which files are unchanged; without one (or when
            // it cannot be read) every file is read.
            let previous = entries
                .iter()
                .rev()
                .filter(|e| e.kept)
                .find_map(|e| e.manifest.as_deref())
                .and_then(|key| self.manifest(key).ok());
            match snapshots::take(workspace, &*self.objects, previous.as_ref(), self.cap) {
                Ok(taken) => {
                    entry.kept = true;
                    entry.bytes = taken.stats.bytes;
                    entry.files = taken.stats.files;
                    entry.disk_bytes = taken.stats.new_bytes;
                    entry.entries = taken.stats.entries();
                    entry.unchanged_files = taken.stats.unchanged_files;
                    entry.manifest = Some(taken.key.clone());
                    loaded.insert(taken.key, taken.manifest);
                }
                // Recorded as not kept: a fork at a point it covers is refused, never given
                // a later workspace.
                Err(e) if e.kind() == io::ErrorKind::QuotaExceeded => {}
                // Recorded too (and reported): an unreadable directory the agent made must
                // not make a fork at this point get a later workspace.
                Err(e) => failure = Some(e),
            }
        }
        entry.micros = started.elapsed().as_micros() as u64;
        entries.push(entry.clone());
        let retired = self.beyond_retention(&entries, &mut loaded);
        for &i in &retired {
            if entries[i].manifest.is_none() {
                let _ = std::fs::remove_dir_all(self.dir(session_id).join(&entries[i].event_id));
            }
            entries[i].kept = false;
        }
        self.write_index(session_id, &entries)?;
        if !retired.is_empty() || failure.is_some() {
            self.retired.notify_one();
        }
        match failure {
            Some(e) => Err(e),
            None => Ok(entry),
        }
    }

    /// The kept checkpoints retention retires: all but the newest that together stay within
    /// the count and the cap (once one does not fit, neither does any older one).
    fn beyond_retention(
        &self,
        entries: &[Entry],
        loaded: &mut HashMap<String, Manifest>,
    ) -> Vec<usize> {
        // Each checkpoint's whole size bounds what it adds: when the newest within the count
        // fit by that bound, no manifest need be read to know it.
        let kept: Vec<usize> = (0..entries.len())
            .rev()
            .filter(|&i| entries[i].kept)
            .collect();
        let bound = kept.iter().take(self.keep).fold(0u64, |sum, &i| {
            let e = &entries[i];
            sum.saturating_add(if e.manifest.is_some() {
                e.bytes
            } else {
                e.disk_bytes
            })
        });
        if bound <= self.cap.disk_bytes {
            return kept.into_iter().skip(self.keep).collect();
        }
        let mut count = 0usize;
        let mut content = Content::default();
        let mut out = Vec::new();
        for (i, e) in entries.iter().enumerate().rev().filter(|(_, e)| e.kept) {
            let fits = out.is_empty()
                && count < self.keep
                && match &e.manifest {
                    Some(key) => {
                        if !loaded.contains_key(key) {
                            match self.manifest(key) {
                                Ok(m) => {
                                    loaded.insert(key.clone(), m);
                                }
                                // Gone or corrupt: it could not be restored either.
                                Err(e)
                                    if matches!(
                                        e.kind(),
                                        io::ErrorKind::NotFound | io::ErrorKind::InvalidData
                                    ) =>
                                {
                                    out.push(i);
                                    continue;
                                }
                                // Not readable now: counted at its whole size, not retired
                                // for a passing error.
                                Err(_) => {}
                            }
                        }
                        match loaded.get(key) {
                            Some(m) => content.add(m),
                            None => content.bytes = content.bytes.saturating_add(e.bytes),
                        }
                        content.bytes <= self.cap.disk_bytes
                    }
                    None => {
                        content.bytes = content.bytes.saturating_add(e.disk_bytes);
                        content.bytes <= self.cap.disk_bytes
                    }
                };
            if fits {
                count += 1;
            } else {
                out.push(i);
            }
        }
        out
    }

    /// Where the workspace as of log position `position` is: the earliest checkpoint at or
    /// after it, else the live workspace. A removed checkpoint is an error, never skipped.
    pub fn source_at(
        &self,
        session_id: &str,
        position: i64,
    ) -> io::Result<Result<Source, NotKept>> {
        let entries = self.index(session_id)?;
        Ok(source_in(&entries, position).map(|found| match found {
            Some(e) => match &e.manifest {
                Some(key) => Source::Snapshot(key.clone()),
                None => Source::Copy(self.dir(session_id).join(&e.event_id)),
            },
            None => Source::Live,
        }))
    }

    /// Rebuilds the snapshot under `key` at `dst` (which must not exist).
    pub fn restore(&self, key: &str, dst: &Path) -> io::Result<snapshots::RestoreStats> {
        snapshots::restore(&self.manifest(key)?, &*self.objects, dst)
    }

    /// Gives a fork the index entries of its original before the fork point (with the
    /// events' new ids). Snapshots are shared as they are; copies an earlier version took
    /// are not, so a fork of the fork at such a point is refused rather than given a later
    /// workspace.
    pub fn inherit(
        &self,
        original: &str,
        fork: &str,
        before: i64,
        rename: impl Fn(&str) -> Option<String>,
    ) -> io::Result<()> {
        let entries: Vec<Entry> = self
            .index(original)?
            .into_iter()
            .filter(|e| e.position < before)
            .filter_map(|e| {
                Some(Entry {
                    event_id: rename(&e.event_id)?,
                    kept: e.kept && e.manifest.is_some(),
                    ..e
                })
            })
            .collect();
        if entries.is_empty() {
            return Ok(());
        }
        self.write_index(fork, &entries)
    }

    /// Removes a deleted session's checkpoints (their objects go with the next sweeps).
    pub async fn remove(&self, session_id: &str) {
        if tokio::fs::remove_dir_all(self.dir(session_id))
            .await
            .is_ok()
        {
            self.retired.notify_one();
        }
    }

    /// Every object a kept checkpoint of any session refers to.
    pub fn referenced(&self) -> io::Result<HashSet<String>> {
        let mut manifests = HashSet::new();
        let sessions = match std::fs::read_dir(&self.root) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(HashSet::new()),
            Err(e) => return Err(e),
        };
        for session in sessions {
            let session = session?;
            let Some(id) = session.file_name().to_str().map(str::to_string) else {
                continue;
            };
            for e in self.index(&id)? {
                if let (true, Some(key)) = (e.kept, e.manifest) {
                    manifests.insert(key);
                }
            }
        }
        snapshots::references(&*self.objects, manifests.iter().map(String::as_str))
    }

    /// Removes the objects no kept checkpoint refers to that were last written or reused
    /// more than `grace` ago and before any snapshot in progress here began. Blocking: run it
    /// off the runtime.
    pub fn sweep(&self, grace: std::time::Duration) -> io::Result<SweepStats> {
        let mut cutoff = SystemTime::now() - grace;
        if let Some(oldest) = self
            .in_flight
            .lock()
            .map_err(|_| io::Error::other("poisoned"))?
            .iter()
            .map(|(_, t)| *t)
            .min()
        {
            // File times come from a coarse clock, a little behind the one `oldest` was read
            // from: an object written just after the snapshot began may show an earlier time.
            cutoff = cutoff.min(oldest - std::time::Duration::from_secs(1));
        }
        snapshots::sweep::sweep(&*self.objects, || self.referenced(), cutoff)
    }
}

/// A snapshot in progress, from its start to its drop (see [`Checkpoints::sweep`]).
struct InFlight<'a> {
    all: &'a std::sync::Mutex<Vec<(u64, SystemTime)>>,
    id: u64,
}

impl<'a> InFlight<'a> {
    fn begin(all: &'a std::sync::Mutex<Vec<(u64, SystemTime)>>) -> Self {
        static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if let Ok(mut all) = all.lock() {
            all.push((id, SystemTime::now()));
        }
        InFlight { all, id }
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Ok(mut all) = self.all.lock() {
            all.retain(|(id, _)| *id != self.id);
        }
    }
}

/// How often the checkpoints' objects are swept unless configured, and how long ago an
/// object must have been last written or reused to go: a snapshot taken by another process
/// sharing the data directory must be recorded within it.
pub const SWEEP_INTERVAL: std::time::Duration = std::time::Duration::from_secs(300);

/// The least time between two sweeps, however often checkpoints are retired.
const SWEEP_GAP: std::time::Duration = std::time::Duration::from_secs(60);

impl Checkpoints {
    /// Starts the task that sweeps the checkpoints' objects: at once, every `interval`, and
    /// soon after retention retires a checkpoint or a session's are removed (at most once a
    /// minute, or once an `interval` when that is shorter), until `shutdown` is cancelled.
    pub fn spawn_sweeper(
        self,
        interval: std::time::Duration,
        shutdown: tokio_util::sync::CancellationToken,
    ) -> tokio::task::JoinHandle<()> {
        tokio::spawn(async move {
            loop {
                let cps = self.clone();
                match tokio::task::spawn_blocking(move || cps.sweep(interval)).await {
                    Ok(Ok(s)) if s.removed > 0 => tracing::info!(
                        removed = s.removed,
                        referenced = s.referenced,
                        "removed workspace snapshot objects no checkpoint refers to"
                    ),
                    Ok(Ok(_)) => {}
                    Ok(Err(e)) => {
                        tracing::warn!(error = %e, "could not sweep workspace snapshot objects")
                    }
                    Err(e) => tracing::warn!(error = %e, "the workspace snapshot sweep failed"),
                }
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(SWEEP_GAP.min(interval)) => {}
                }
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(interval.saturating_sub(SWEEP_GAP.min(interval))) => {}
                    _ = self.retired.notified() => {}
                }
            }
        })
    }
}

/// Distinct content of a set of snapshots: each chunk counted once, at its plain size.
#[derive(Default)]
struct Content {
    seen: HashSet<String>,
    bytes: u64,
}

impl Content {
    fn add(&mut self, manifest: &Manifest) {
        for node in &manifest.nodes {
            let Kind::File { size, chunks, .. } = &node.kind else {
                continue;
            };
            for (i, chunk) in chunks.iter().enumerate() {
                let len = size
                    .saturating_sub((i * CHUNK_SIZE) as u64)
                    .min(CHUNK_SIZE as u64);
                if !self.seen.contains(chunk) {
                    self.seen.insert(chunk.clone());
                    self.bytes = self.bytes.saturating_add(len);
                }
            }
        }
    }
}

/// The checkpoint that holds the workspace as of `position` (None: the live workspace does),
/// or the removed one that did.
fn source_in(entries: &[Entry], position: i64) -> Result<Option<&Entry>, NotKept> {
    match entries.iter().find(|e| e.position >= position) {
        None => Ok(None),
        Some(e) if e.kept => Ok(Some(e)),
        Some(e) => Err(NotKept {
            event_id: e.event_id.clone(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The file `name` of the workspace checkpoint `source` holds.
    fn read_in(cp: &Checkpoints, source: &Source, name: &str) -> String {
        let Source::Snapshot(key) = source else {
            panic!("{source:?} is not a snapshot")
        };
        let parent = tempfile::tempdir().unwrap();
        let dst = parent.path().join("ws");
        cp.restore(key, &dst).unwrap();
        std::fs::read_to_string(dst.join(name)).unwrap()
    }

    #[test]
    fn a_fork_point_takes_the_earliest_checkpoint_at_or_after_it() {
        let data = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let cp = Checkpoints::new(data.path(), 2, Budget::UNLIMITED);
        std::fs::write(ws.path().join("f"), "1").unwrap();
        cp.take("s", ws.path(), "u1", 3).unwrap();
        std::fs::write(ws.path().join("f"), "2").unwrap();
        cp.take("s", ws.path(), "u2", 9).unwrap();
        // Taking one again is a no-op.
        std::fs::write(ws.path().join("f"), "3").unwrap();
        assert_eq!(cp.take("s", ws.path(), "u2", 12).unwrap().position, 9);
        let at = |p| cp.source_at("s", p).unwrap();
        assert_eq!(read_in(&cp, &at(2).unwrap(), "f"), "1");
        assert_eq!(read_in(&cp, &at(4).unwrap(), "f"), "2");
        assert_eq!(at(10), Ok(Source::Live));
        // A third checkpoint pushes the first out; a point before it is refused, not moved on.
        cp.take("s", ws.path(), "u3", 20).unwrap();
        assert_eq!(
            at(2),
            Err(NotKept {
                event_id: "u1".into()
            })
        );
        assert_eq!(read_in(&cp, &at(15).unwrap(), "f"), "3");
    }

    #[test]
    fn no_retention_records_checkpoints_without_taking_them() {
        let data = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let cp = Checkpoints::new(data.path(), 0, Budget::UNLIMITED);
        let e = cp.take("s", ws.path(), "u1", 3).unwrap();
        assert!(!e.kept);
        assert!(cp.source_at("s", 1).unwrap().is_err());
        assert_eq!(cp.source_at("s", 4).unwrap(), Ok(Source::Live));
        assert!(!Checkpoints::objects_dir(data.path()).exists());
    }

    #[test]
    fn kept_checkpoints_hold_at_most_the_cap_of_distinct_content() {
        let data = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let cap = Budget {
            disk_bytes: 250_000,
            entries: 1000,
        };
        let cp = Checkpoints::new(data.path(), 8, cap);
        let kept = |cp: &Checkpoints| -> Vec<bool> {
            cp.index("s").unwrap().iter().map(|e| e.kept).collect()
        };
        let a = ws.path().join("a");
        std::fs::write(&a, vec![1u8; 100_000]).unwrap();
        cp.take("s", ws.path(), "u1", 1).unwrap();
        std::fs::write(&a, vec![2u8; 100_000]).unwrap();
        cp.take("s", ws.path(), "u2", 2).unwrap();
        std::fs::write(&a, vec![3u8; 100_000]).unwrap();
        cp.take("s", ws.path(), "u3", 3).unwrap();
        assert_eq!(kept(&cp), [false, true, true], "200 kB fit, 300 kB do not");
        // Unchanged content is counted once: a fourth holding what the third holds fits.
        let e = cp.take("s", ws.path(), "u4", 4).unwrap();
        assert!(e.kept);
        assert_eq!(kept(&cp), [false, true, true, true]);
        // Larger than the cap alone: not kept; the others stay.
        std::fs::write(ws.path().join("c"), vec![4u8; 200_000]).unwrap();
        let e = cp.take("s", ws.path(), "u5", 5).unwrap();
        assert!(!e.kept);
        assert_eq!(kept(&cp), [false, true, true, true, false]);
        assert_eq!(
            cp.source_at("s", 5).unwrap(),
            Err(NotKept {
                event_id: "u5".into()
            })
        );
        // A cap on files counts too.
        let few = Checkpoints::new(
            data.path(),
            8,
            Budget {
                disk_bytes: u64::MAX,
                entries: 1,
            },
        );
        assert!(
            !few.take("t", ws.path(), "u1", 1).unwrap().kept,
            "two files"
        );
    }

    #[test]
    fn a_fork_shares_its_originals_checkpoints_and_a_sweep_keeps_them() {
        let data = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let cp = Checkpoints::new(data.path(), 4, Budget::UNLIMITED);
        std::fs::write(ws.path().join("f"), "before").unwrap();
        cp.take("orig", ws.path(), "u1", 3).unwrap();
        std::fs::write(ws.path().join("f"), "after").unwrap();
        cp.take("orig", ws.path(), "u2", 9).unwrap();
        cp.inherit("orig", "fork", 9, |e| Some(format!("{e}-fork")))
            .unwrap();
        let index = cp.index("fork").unwrap();
        assert_eq!(index.len(), 1);
        assert_eq!(index[0].event_id, "u1-fork");
        assert!(index[0].kept, "shared, not copied");
        let source = cp.source_at("fork", 2).unwrap().unwrap();
        assert_eq!(read_in(&cp, &source, "f"), "before");
        // The original goes; objects written within the grace stay, then what only it held
        // goes, and the fork's checkpoint still restores.
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        rt.block_on(cp.remove("orig"));
        let stats = cp.sweep(std::time::Duration::from_secs(3600)).unwrap();
        assert_eq!((stats.removed, stats.referenced), (0, 2), "{stats:?}");
        // A snapshot in progress (not yet recorded) keeps what it wrote or reused since it
        // began (and a second before): here the chunk only the removed original held.
        {
            let _taking = InFlight::begin(&cp.in_flight);
            let taken = snapshots::take(ws.path(), &*cp.objects, None, Budget::UNLIMITED).unwrap();
            let stats = cp.sweep(std::time::Duration::ZERO).unwrap();
            assert_eq!(stats.removed, 0, "{stats:?}");
            assert!(cp.objects.has(&taken.key).unwrap());
            let chunk = taken.manifest.chunks().next().unwrap();
            assert!(cp.objects.has(chunk).unwrap());
        }
        let stats = cp.sweep(std::time::Duration::ZERO).unwrap();
        assert_eq!(
            stats.removed, 3,
            "u2's manifest, and the unrecorded snapshot's manifest and chunk: {stats:?}"
        );
        assert_eq!(stats.referenced, 2);
        assert_eq!(read_in(&cp, &source, "f"), "before");
    }

    #[test]
    fn a_copy_an_earlier_version_took_is_still_served() {
        let data = tempfile::tempdir().unwrap();
        let cp = Checkpoints::new(data.path(), 2, Budget::UNLIMITED);
        let dir = data.path().join("workspace-checkpoints/s/u1");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("f"), "copied").unwrap();
        let old: Vec<Entry> = serde_json::from_str(
            r#"[{"event_id":"u1","position":3,"kept":true,"bytes":6,"files":1,"micros":9,"disk_bytes":4096,"entries":1}]"#,
        )
        .unwrap();
        cp.write_index("s", &old).unwrap();
        assert_eq!(cp.source_at("s", 2).unwrap(), Ok(Source::Copy(dir.clone())));
        // Pushed out by newer ones like any other, and its copy removed.
        let ws = tempfile::tempdir().unwrap();
        cp.take("s", ws.path(), "u2", 5).unwrap();
        cp.take("s", ws.path(), "u3", 7).unwrap();
        assert!(cp.source_at("s", 2).unwrap().is_err());
        assert!(!dir.exists());
    }
}
