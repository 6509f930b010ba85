//! Per-turn workspace checkpoints, so a fork of a session at an earlier event gets the
//! workspace as it was then (`POST /v1/sessions/{id}/fork`, Mast's own).
//!
//! A checkpoint is a copy of the workspace ([`super::tree_copy`]: cloned where the filesystem
//! shares extents, a plain copy otherwise) taken by the primary thread just before its first
//! built-in tool call after a `user.message`, keyed by that message, recording the log
//! position it was taken at. Between two tool calls nothing changes the workspace, so a
//! checkpoint holds the workspace as of every point back to the previous tool call; a fork
//! at position `C` takes the earliest checkpoint at or after `C`, or the live workspace when
//! no tool ran after `C`. Hard links were ruled out: the sandbox's tools (and the agent's
//! shell) change files in place, which would change a linked checkpoint too.
//!
//! Layout: `<data dir>/workspace-checkpoints/<session id>/<user.message id>/` plus an
//! `index.json` of every checkpoint ever taken, kept ones and those retention removed, so a
//! fork never mistakes a removed checkpoint for "nothing changed". Server-private: the sandbox
//! never sees these directories, and other host users cannot enter them (both levels are
//! 0700, the index 0600). The copies keep the workspace's own modes, which a fork restores,
//! so it is that directory chain which keeps them private.
//!
//! Retention: the newest `keep` per session, and those together at most the workspace quota
//! (its bytes of disk and its files, measured as the quota measures them): older ones are
//! removed first, and a checkpoint larger than the quota by itself is recorded as not kept
//! (its copy stops as soon as it passes the quota). Without a cap, checkpoints would take up
//! to `keep` times the quota on disk.

use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::tree_copy::{self, Budget};

/// One checkpoint of a session's index.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    /// The `user.message` whose turn it precedes (also its directory's name).
    pub event_id: String,
    /// The log position it was taken at: it holds the workspace as of every event up to this
    /// sequence number, back to the tool call before it.
    pub position: i64,
    /// Still on disk; false once retention removed it (or when a fork copied the entry of
    /// its original without the files).
    pub kept: bool,
    /// What the copy held and took (for the operator; the cost figures in docs/fork.md).
    #[serde(default)]
    pub bytes: u64,
    #[serde(default)]
    pub files: u64,
    #[serde(default)]
    pub micros: u64,
    /// What the copy takes against the cap: bytes of disk and files, directories and links
    /// (0 in an index written before the cap).
    #[serde(default)]
    pub disk_bytes: u64,
    #[serde(default)]
    pub entries: u64,
}

/// Where a fork's workspace comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Source {
    /// This checkpoint directory.
    Checkpoint(PathBuf),
    /// The original's live workspace (nothing ran after the fork point, as far as it knows).
    Live,
}

/// Why no workspace can be given for a fork point.
#[derive(Debug, Clone, PartialEq)]
pub struct NotKept {
    pub event_id: String,
}

/// The checkpoints of every session under one data directory.
#[derive(Debug, Clone)]
pub struct Checkpoints {
    root: PathBuf,
    keep: usize,
    cap: Budget,
}

impl Checkpoints {
    /// Checkpoints under `<data_dir>/workspace-checkpoints`, keeping the newest `keep` per
    /// session (0: none are kept, and forks at earlier points are refused), together within
    /// `cap` (the workspace quota).
    pub fn new(data_dir: &Path, keep: usize, cap: Budget) -> Self {
        Checkpoints {
            root: data_dir.join("workspace-checkpoints"),
            keep,
            cap,
        }
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

    /// Copies `workspace` as the checkpoint of `event_id` at `position`, then removes the
    /// oldest beyond the retention (a count and a cap). Blocking (a whole tree copy): run it
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
        let mut entry = Entry {
            event_id: event_id.to_string(),
            position,
            kept: false,
            bytes: 0,
            files: 0,
            micros: 0,
            disk_bytes: 0,
            entries: 0,
        };
        if self.keep > 0 {
            let target = self.private_dir(session_id)?.join(event_id);
            // A copy left by a crash between the copy and the index is replaced.
            if target.exists() {
                std::fs::remove_dir_all(&target)?;
            }
            match tree_copy::copy_tree_within(workspace, &target, self.cap) {
                Ok(stats) => {
                    entry.kept = true;
                    entry.bytes = stats.bytes;
                    entry.files = stats.files;
                    entry.disk_bytes = stats.disk_bytes;
                    entry.entries = stats.entries();
                }
                // Recorded as not kept: a fork at a point it covers is refused, never given
                // a later workspace.
                Err(e) if e.kind() == io::ErrorKind::QuotaExceeded => {}
                Err(e) => return Err(e),
            }
        }
        entry.micros = started.elapsed().as_micros() as u64;
        entries.push(entry.clone());
        for i in self.beyond_retention(&entries) {
            let _ = std::fs::remove_dir_all(self.dir(session_id).join(&entries[i].event_id));
            entries[i].kept = false;
        }
        self.write_index(session_id, &entries)?;
        Ok(entry)
    }

    /// The kept checkpoints retention removes: all but the newest that together stay within
    /// the count and the cap (once one does not fit, neither does any older one).
    fn beyond_retention(&self, entries: &[Entry]) -> Vec<usize> {
        let (mut count, mut disk, mut files) = (0usize, 0u64, 0u64);
        let mut out = Vec::new();
        for (i, e) in entries.iter().enumerate().rev().filter(|(_, e)| e.kept) {
            let fits = out.is_empty()
                && count < self.keep
                && disk.saturating_add(e.disk_bytes) <= self.cap.disk_bytes
                && files.saturating_add(e.entries) <= self.cap.entries;
            if fits {
                count += 1;
                disk += e.disk_bytes;
                files += e.entries;
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
            Some(id) => Source::Checkpoint(self.dir(session_id).join(id)),
            None => Source::Live,
        }))
    }

    /// Gives a fork the index entries of its original before the fork point (with the
    /// events' new ids), without their files: a fork of the fork at such a point is refused
    /// rather than given a later workspace.
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
                    kept: false,
                    ..e
                })
            })
            .collect();
        if entries.is_empty() {
            return Ok(());
        }
        self.write_index(fork, &entries)
    }

    /// Removes a deleted session's checkpoints.
    pub async fn remove(&self, session_id: &str) {
        let _ = tokio::fs::remove_dir_all(self.dir(session_id)).await;
    }
}

/// The id of the checkpoint that holds the workspace as of `position` (None: the live
/// workspace does), or the removed one that did.
fn source_in(entries: &[Entry], position: i64) -> Result<Option<&str>, NotKept> {
    match entries.iter().find(|e| e.position >= position) {
        None => Ok(None),
        Some(e) if e.kept => Ok(Some(&e.event_id)),
        Some(e) => Err(NotKept {
            event_id: e.event_id.clone(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let Ok(Source::Checkpoint(dir)) = at(2) else {
            panic!()
        };
        assert_eq!(std::fs::read_to_string(dir.join("f")).unwrap(), "1");
        let Ok(Source::Checkpoint(dir)) = at(4) else {
            panic!()
        };
        assert_eq!(std::fs::read_to_string(dir.join("f")).unwrap(), "2");
        assert_eq!(at(10), Ok(Source::Live));
        // A third checkpoint pushes the first out; a point before it is refused, not moved on.
        cp.take("s", ws.path(), "u3", 20).unwrap();
        assert_eq!(
            at(2),
            Err(NotKept {
                event_id: "u1".into()
            })
        );
        assert!(!data.path().join("workspace-checkpoints/s/u1").exists());
        assert!(matches!(at(15), Ok(Source::Checkpoint(_))));
    }

    #[test]
    fn no_retention_records_checkpoints_without_copying() {
        let data = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let cp = Checkpoints::new(data.path(), 0, Budget::UNLIMITED);
        let e = cp.take("s", ws.path(), "u1", 3).unwrap();
        assert!(!e.kept);
        assert!(cp.source_at("s", 1).unwrap().is_err());
        assert_eq!(cp.source_at("s", 4).unwrap(), Ok(Source::Live));
    }

    #[test]
    fn kept_checkpoints_stay_within_the_cap_oldest_going_first() {
        let data = tempfile::tempdir().unwrap();
        let ws = tempfile::tempdir().unwrap();
        let cap = Budget {
            disk_bytes: 320_000,
            entries: 1000,
        };
        let cp = Checkpoints::new(data.path(), 8, cap);
        std::fs::write(ws.path().join("a"), vec![1u8; 100_000]).unwrap();
        cp.take("s", ws.path(), "u1", 1).unwrap();
        cp.take("s", ws.path(), "u2", 2).unwrap();
        std::fs::write(ws.path().join("b"), vec![2u8; 100_000]).unwrap();
        cp.take("s", ws.path(), "u3", 3).unwrap();
        let kept = |cp: &Checkpoints| -> Vec<bool> {
            cp.index("s").unwrap().iter().map(|e| e.kept).collect()
        };
        assert_eq!(
            kept(&cp),
            [false, true, true],
            "200 kB and 100 kB fit (in 4 KiB blocks), 100 kB more do not"
        );
        assert!(!data.path().join("workspace-checkpoints/s/u1").exists());
        // Larger than the cap alone: not kept, and nothing of it left; the others stay.
        std::fs::write(ws.path().join("c"), vec![3u8; 200_000]).unwrap();
        let e = cp.take("s", ws.path(), "u4", 4).unwrap();
        assert!(!e.kept);
        assert_eq!(kept(&cp), [false, true, true, false]);
        let left: Vec<_> = std::fs::read_dir(data.path().join("workspace-checkpoints/s"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n != "index.json")
            .collect();
        assert_eq!(left.len(), 2, "{left:?}");
        assert_eq!(
            cp.source_at("s", 4).unwrap(),
            Err(NotKept {
                event_id: "u4".into()
            })
        );
        // A cap on files counts too.
        let few = Checkpoints::new(
            data.path(),
            8,
            Budget {
                disk_bytes: u64::MAX,
                entries: 2,
            },
        );
        assert!(
            !few.take("t", ws.path(), "u1", 1).unwrap().kept,
            "three files"
        );
    }
}
