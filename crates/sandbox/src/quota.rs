//! The workspace quota: a session's workspace (and its private state directory) may hold so
//! many bytes and so many files. Ordinary disks have no per-directory quota (ext4 without the
//! `project` feature, overlay filesystems in containers), so usage is measured by walking the
//! tree — `st_blocks`, links not followed, hard links counted once — and enforced in three
//! places:
//!
//! - `write` and `edit` are refused while the workspace is at or over its quota;
//! - each `bash` command runs with `RLIMIT_FSIZE` at the room left, so no single file outgrows
//!   it (writes past it fail with "File too large"), and with none while over quota, so a
//!   command can still delete files but not grow them;
//! - while a command runs, a watcher measures again every [`MIN_INTERVAL`] (or four times the
//!   last walk's duration, if longer) and kills the command once the quota is exceeded.
//!
//! How far a command can overshoot: at most what it writes in one watcher interval plus one
//! walk (about 250 ms on a small workspace) — each file stays under the room left, but many
//! files written at once can add up to that — and the watcher tolerates 1/64 of the quota
//! (at least 64 KiB) beyond it, so a single file that stops exactly at the room left is never
//! mistaken for an overrun. A `write` or `edit` can add at most its own
//! content past the quota.

use std::collections::HashSet;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use super::sandbox::Limits;

/// How often a running command's workspace is measured, at most.
pub const MIN_INTERVAL: Duration = Duration::from_millis(250);

/// What a workspace holds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    /// Bytes of disk its files take.
    pub bytes: u64,
    /// Files, directories and links in it.
    pub files: u64,
}

/// Measures the trees under `roots` without following links.
pub fn measure(roots: &[PathBuf]) -> Usage {
    let mut usage = Usage::default();
    let mut seen = HashSet::new();
    let mut stack: Vec<PathBuf> = roots.to_vec();
    while let Some(dir) = stack.pop() {
        // Entries vanish while commands run; whatever is gone takes no room.
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            usage.files += 1;
            if meta.nlink() > 1 && !meta.is_dir() && !seen.insert((meta.dev(), meta.ino())) {
                continue;
            }
            usage.bytes += meta.blocks() * 512;
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    usage
}

/// Measures off the async threads; also says how long the walk took.
pub async fn measure_async(roots: Vec<PathBuf>) -> (Usage, Duration) {
    tokio::task::spawn_blocking(move || {
        let started = Instant::now();
        (measure(&roots), started.elapsed())
    })
    .await
    .unwrap_or_default()
}

/// `1.5 MB`, or `20 MB` for whole megabytes.
pub fn mb(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MB", bytes >> 20)
    } else {
        format!("{:.1} MB", bytes as f64 / f64::from(1 << 20))
    }
}

/// Which limit `usage` is over, if any: `at_most` counts reaching the limit as over (nothing
/// may be added), else only exceeding it.
pub fn over(usage: Usage, limits: &Limits, at_most: bool) -> Option<String> {
    let past = |used: u64, limit: u64| limit > 0 && (used > limit || (at_most && used >= limit));
    if past(usage.bytes, limits.workspace_bytes) {
        return Some(format!(
            "workspace quota {} exceeded ({} used)",
            mb(limits.workspace_bytes),
            mb(usage.bytes)
        ));
    }
    if past(usage.files, limits.workspace_files) {
        return Some(format!(
            "workspace holds {} files and directories, at most {} files",
            usage.files, limits.workspace_files
        ));
    }
    None
}

/// What to do about a workspace over quota, for the model.
pub const ADVICE: &str = "Delete files the task no longer needs with bash (see what is large with `du -sh /workspace/* | sort -h`; \
build outputs, caches and downloads are good candidates), then retry. Until then files cannot grow, but bash can still delete them.";

/// Bytes a workspace may hold beyond its quota while a command runs before the watcher stops
/// it: the blocks a filesystem holds for a file being written, and the shell's own state, are
/// not the command's doing (1/64 of the quota, at least 64 KiB).
fn slack(quota: u64) -> u64 {
    (quota / 64).max(64 << 10)
}

/// Bytes one file may grow to in a command: the file-size limit, or the room left.
pub fn file_cap(usage: Usage, limits: &Limits) -> u64 {
    if limits.workspace_bytes == 0 {
        return limits.file_bytes;
    }
    if over(usage, limits, true).is_some() {
        return 0;
    }
    limits
        .file_bytes
        .min(limits.workspace_bytes.saturating_sub(usage.bytes))
}

/// Whether a running command has grown the workspace past its quota (or, where it started
/// over quota, past what it started with).
pub fn grown_past(now: Usage, start: Usage, limits: &Limits) -> Option<String> {
    let allowed = Limits {
        workspace_bytes: if limits.workspace_bytes == 0 {
            0
        } else {
            (limits.workspace_bytes + slack(limits.workspace_bytes)).max(start.bytes)
        },
        workspace_files: if limits.workspace_files == 0 {
            0
        } else {
            limits.workspace_files.max(start.files)
        },
        ..*limits
    };
    over(now, &allowed, false).map(|_| over(now, limits, false).unwrap_or_default())
}

/// Whether `limits` set a quota at all.
pub fn enabled(limits: &Limits) -> bool {
    limits.workspace_bytes > 0 || limits.workspace_files > 0
}

/// Measures the workspace where a quota applies (an empty usage where none does).
pub async fn usage(roots: Vec<PathBuf>, limits: &Limits) -> Usage {
    if enabled(limits) {
        measure_async(roots).await.0
    } else {
        Usage::default()
    }
}

/// Waits until a running command grows the workspace past its quota; returns the reason.
/// Never returns where there is no quota.
pub async fn watch(roots: Vec<PathBuf>, start: Usage, limits: Limits) -> String {
    if !enabled(&limits) {
        return std::future::pending().await;
    }
    let mut interval = MIN_INTERVAL;
    loop {
        tokio::time::sleep(interval).await;
        let (now, took) = measure_async(roots.clone()).await;
        if let Some(why) = grown_past(now, start, &limits) {
            return why;
        }
        // Walking a large workspace costs CPU: spend at most a fifth of a core on it.
        interval = MIN_INTERVAL.max(took * 4);
    }
}

/// The refusal of a `write` or `edit` while the workspace is at or over its quota.
pub async fn refuse_write(roots: Vec<PathBuf>, limits: &Limits) -> Option<String> {
    if !enabled(limits) {
        return None;
    }
    over(usage(roots, limits).await, limits, true)
        .map(|why| format!("Nothing was written: {why}. {ADVICE}"))
}

/// The directories a session's quota covers: its workspace, its private state and its writable
/// mounts (all writable inside the sandbox).
pub fn roots(tools: &super::SessionTools) -> Vec<PathBuf> {
    // Writable mounts (the outputs directory) are the session's disk too.
    let writable = tools.mounts.entries().iter().filter(|m| !m.read_only);
    [tools.workspace.clone(), tools.state_dir.clone()]
        .into_iter()
        .chain(writable.map(|m| m.host.clone()))
        .collect()
}

/// The refusal of a `write` or `edit` call while the session's workspace is over quota.
pub async fn refusal(tools: &super::SessionTools, tool: &str) -> Option<super::ToolOutput> {
    if tool != "write" && tool != "edit" {
        return None;
    }
    refuse_write(roots(tools), &tools.limits)
        .await
        .map(super::ToolOutput::error)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(bytes: u64, files: u64) -> Limits {
        Limits {
            workspace_bytes: bytes,
            workspace_files: files,
            file_bytes: 1 << 30,
            ..Limits::default()
        }
    }

    #[test]
    fn measures_blocks_and_entries_without_following_links() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(ws.join("sub")).unwrap();
        std::fs::write(ws.join("sub/a"), vec![1u8; 100_000]).unwrap();
        std::fs::hard_link(ws.join("sub/a"), ws.join("b")).unwrap();
        std::fs::write(dir.path().join("outside"), vec![1u8; 1_000_000]).unwrap();
        std::os::unix::fs::symlink(dir.path(), ws.join("up")).unwrap();
        let u = measure(std::slice::from_ref(&ws));
        assert_eq!(u.files, 4, "sub, sub/a, b, up");
        assert!(
            (100_000..200_000).contains(&u.bytes),
            "one copy of the hard-linked file, nothing through the link: {u:?}"
        );
        assert_eq!(measure(&[ws.join("missing")]), Usage::default());
    }

    #[test]
    fn limits_and_room_left() {
        let l = limits(20 << 20, 100);
        let u = Usage {
            bytes: 15 << 20,
            files: 10,
        };
        assert_eq!(over(u, &l, true), None);
        assert_eq!(file_cap(u, &l), 5 << 20);
        let full = Usage {
            bytes: 20 << 20,
            files: 10,
        };
        assert!(over(full, &l, false).is_none());
        assert!(
            over(full, &l, true)
                .unwrap()
                .contains("quota 20 MB exceeded")
        );
        assert_eq!(file_cap(full, &l), 0);
        let many = Usage {
            bytes: 0,
            files: 101,
        };
        assert!(over(many, &l, false).unwrap().contains("at most 100 files"));
        assert_eq!(file_cap(u, &limits(0, 0)), 1 << 30, "no quota");
        assert_eq!(over(many, &limits(0, 0), true), None);
        // A command that started over quota may delete, not grow.
        let start = Usage {
            bytes: 30 << 20,
            files: 10,
        };
        assert!(grown_past(start, start, &l).is_none());
        let grown = Usage {
            bytes: (30 << 20) + 1,
            ..start
        };
        assert!(grown_past(grown, start, &l).unwrap().contains("20 MB"));
        assert_eq!(mb(1536 << 10), "1.5 MB");
    }
}
