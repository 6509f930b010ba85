//! Removing objects no snapshot refers to. Objects are shared (by every snapshot holding the
//! same bytes, across sessions and their forks), so none is removed with a snapshot; a sweep
//! removes what nothing recorded refers to instead.
//!
//! A snapshot stores or reuses objects before its manifest is recorded anywhere, so "not
//! referenced" alone is not "garbage": a sweep removes only objects last written or reused
//! (a reuse touches the object) before a cutoff, which the caller sets before the start of
//! any snapshot still in progress, and it reads what is referenced only after listing the
//! objects, checking each one's time again just before removing it. Chunks a snapshot takes
//! unread from the previous one need no touch: the previous one is recorded until the new
//! record replaces it in one write.

use std::collections::HashSet;
use std::io;
use std::time::SystemTime;

use super::manifest::Manifest;
use super::objects::{Objects, is_leftover, valid_key};

/// What a sweep did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SweepStats {
    /// Objects (and leftovers of writes cut short) removed.
    pub removed: u64,
    /// Objects some snapshot refers to.
    pub referenced: u64,
    /// Objects that could not be removed (left for the next sweep).
    pub failed: u64,
}

/// Removes the objects under `objects` that were last written or reused before `cutoff` and
/// that `referenced` (asked after the listing) does not name.
pub fn sweep(
    objects: &dyn Objects,
    referenced: impl FnOnce() -> io::Result<HashSet<String>>,
    cutoff: SystemTime,
) -> io::Result<SweepStats> {
    let listed = objects.list()?;
    let referenced = referenced()?;
    let mut stats = SweepStats::default();
    for (key, written) in listed {
        if referenced.contains(&key) {
            stats.referenced += 1;
            continue;
        }
        if written > cutoff || !(valid_key(&key) || is_leftover(&key)) {
            continue;
        }
        let removed = match objects.modified(&key) {
            Ok(Some(t)) if t <= cutoff => objects.delete(&key).map(|()| true),
            Ok(_) => Ok(false),
            Err(e) => Err(e),
        };
        match removed {
            Ok(true) => stats.removed += 1,
            Ok(false) => {}
            Err(e) => {
                tracing::debug!(key = %key, error = %e, "a snapshot object could not be removed");
                stats.failed += 1;
            }
        }
    }
    Ok(stats)
}

/// Every object the snapshots under `manifests` (manifest keys) refer to: the manifests and
/// their chunks. A manifest that is not there (or is corrupt) refers to nothing.
pub fn references<'a>(
    objects: &dyn Objects,
    manifests: impl IntoIterator<Item = &'a str>,
) -> io::Result<HashSet<String>> {
    let mut out = HashSet::new();
    for key in manifests {
        if !out.insert(key.to_string()) {
            continue;
        }
        let stored = match objects.get(key) {
            Ok(s) => s,
            Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
            Err(e) => return Err(e),
        };
        // A corrupt manifest cannot be restored, so what only it names is of no use.
        match Manifest::open(key, &stored) {
            Ok(manifest) => out.extend(manifest.chunks().map(str::to_string)),
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                tracing::warn!(key, error = %e, "a snapshot manifest is corrupt")
            }
            Err(e) => return Err(e),
        }
    }
    Ok(out)
}
