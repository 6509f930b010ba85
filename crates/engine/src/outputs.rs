//! Session outputs: the files the agent leaves under `/mnt/session/outputs`
//! become Files scoped to the session — listed by `GET /v1/files?scope_id=<session id>`,
//! downloadable — as soon as the built-in tool call that wrote them ends.
//!
//! A path is registered again only when its size, modification time or inode changed since
//! it was last registered; the new content is a new File and the earlier one stays, so an id
//! a client has seen always serves the bytes it had. What was registered per path is kept in
//! a server-only file beside the outputs directory, so a restarted runner does not register
//! everything again.
//!
//! The Files a session's outputs become may total at most its workspace quota
//! (`MAST_WORKSPACE_QUOTA_MB`), every version counted and never given back (deleting a File
//! does not make room): the live directory counts toward the quota, but the Files outlive it,
//! so writing and deleting outputs would otherwise pile up Files without end. An output that
//! would pass the cap is not kept, and the tool result says why.
//!
//! The sandbox owns the directory and may plant links or swap entries while the server (often
//! root) reads it, so it is walked from directory handles and nothing is followed: links,
//! sockets and FIFOs are not outputs.

use std::collections::{BTreeMap, HashMap};
use std::ffi::CStr;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex};

use futures_util::StreamExt as _;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use serde::{Deserialize, Serialize};

use super::Inner;
use mast_domain::{file, ids::new_id};
use mast_sandbox::quota::mb;
use mast_store::FileRecord;

/// Most files one session's outputs may become; more are reported to the model, not kept.
pub const MAX_OUTPUTS: usize = 1000;
/// Deepest directory level under the outputs directory that is looked at.
const MAX_DEPTH: usize = 16;

/// One regular file found under the outputs directory.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Found {
    /// Path relative to the outputs directory, `/`-separated.
    rel: String,
    stamp: Stamp,
}

/// What tells one content of a path from the next without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
struct Stamp {
    size: u64,
    mtime_s: i64,
    mtime_ns: i64,
    ino: u64,
}

/// The registered state of a session's outputs (the server-only file).
#[derive(Debug, Default, Serialize, Deserialize)]
struct Registered {
    /// Per path: the stamp last registered and the File it became.
    paths: BTreeMap<String, (Stamp, String)>,
    /// Files registered so far, every version counted.
    count: usize,
    /// Bytes of the Files registered so far, every version counted (a manifest written before
    /// this was kept starts from 0).
    #[serde(default)]
    bytes: u64,
}

/// One lock per session: threads of a session share its sandbox and may end calls together.
static LOCKS: LazyLock<Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>> =
    LazyLock::new(Default::default);

/// Registers what changed under the session's outputs directory since the last call. Returns
/// a note for the tool result when something could not be kept, so the model can say so.
pub(super) async fn register(inner: &Inner, sid: &str) -> Option<String> {
    let files = inner.files.as_ref()?;
    let dir = inner.toolbox.outputs_dir(sid);
    let lock = LOCKS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .entry(sid.to_string())
        .or_default()
        .clone();
    let notes = {
        let _held = lock.lock().await;
        register_locked(inner, files, sid, &dir).await
    };
    drop(lock);
    // Forget the session's lock once nobody else holds it.
    let mut locks = LOCKS.lock().unwrap_or_else(|e| e.into_inner());
    if locks.get(sid).is_some_and(|l| Arc::strong_count(l) == 1) {
        locks.remove(sid);
    }
    (!notes.is_empty()).then(|| notes.join("\n"))
}

async fn register_locked(
    inner: &Inner,
    files: &crate::files::Files,
    sid: &str,
    dir: &Path,
) -> Vec<String> {
    let root = dir.to_path_buf();
    let found = match tokio::task::spawn_blocking(move || scan(&root)).await {
        Ok(Ok(f)) => f,
        // No outputs directory yet: the session has not run a tool since it was created.
        Ok(Err(e)) if e.kind() == std::io::ErrorKind::NotFound => return vec![],
        Ok(Err(e)) => return vec![format!("{OUTPUTS} could not be read for outputs: {e}")],
        Err(e) => return vec![format!("{OUTPUTS} could not be read for outputs: {e}")],
    };
    let state_path = manifest_path(dir);
    let mut state = load(&state_path).await;
    let changed: Vec<Found> = found
        .into_iter()
        .filter(|f| state.paths.get(&f.rel).map(|(s, _)| *s) != Some(f.stamp))
        .collect();
    if changed.is_empty() {
        return vec![];
    }
    let ws = match inner.store.get_session_by_id(sid).await {
        Ok(Some(rec)) => rec.workspace_id,
        Ok(None) => return vec![],
        Err(e) => return vec![format!("outputs could not be saved: {e}")],
    };
    let cap = inner.toolbox.limits().workspace_bytes;
    let mut notes = Vec::new();
    for f in changed {
        let shown = format!("{OUTPUTS}/{}", f.rel);
        if state.count >= MAX_OUTPUTS {
            notes.push(format!(
                "{shown} was not saved as an output file: the session already has {MAX_OUTPUTS}"
            ));
            continue;
        }
        // Checked on the size seen now, and again on the bytes read: the file may grow.
        let room = (cap > 0).then(|| cap.saturating_sub(state.bytes));
        if room.is_some_and(|room| f.stamp.size > room) {
            notes.push(format!(
                "{shown} was not saved as an output file: {}",
                over_cap(cap, state.bytes)
            ));
            continue;
        }
        let too_large = over_cap(cap, state.bytes);
        match save(files, &ws, sid, dir, &f.rel, room.map(|r| (r, too_large))).await {
            Ok((id, size)) => {
                state.paths.insert(f.rel, (f.stamp, id));
                state.count += 1;
                state.bytes += size;
            }
            Err(e) => notes.push(format!("{shown} was not saved as an output file: {e}")),
        }
    }
    if let Err(e) = store(&state_path, &state).await {
        tracing::warn!(session_id = sid, error = %e, "could not record the registered outputs; they may be registered again");
    }
    notes
}

use mast_sandbox::OUTPUTS;

/// Why an output does not fit under the cap on a session's output Files (its workspace
/// quota): the Files stay when the directory's copy is deleted, so without a cap a session
/// could pile up Files by writing and deleting outputs within its quota.
fn over_cap(cap: u64, kept: u64) -> String {
    format!(
        "a session's output files may total at most {} (the workspace quota), every saved \
         version counted, and {} are saved already. Keep only final results in {OUTPUTS}, or \
         tell the user it could not be saved",
        mb(cap),
        mb(kept)
    )
}

/// Stores one output's bytes, streamed from a handle opened without following links, and
/// lists it as a File of the session; returns its id and size. With a `limit`, more bytes
/// than it allows fail the save with its message, and nothing is kept.
async fn save(
    files: &crate::files::Files,
    ws: &str,
    sid: &str,
    dir: &Path,
    rel: &str,
    limit: Option<(u64, String)>,
) -> Result<(String, u64), String> {
    let (root, path) = (dir.to_path_buf(), rel.to_string());
    let fd = tokio::task::spawn_blocking(move || open_regular(&root, &path))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("it could not be opened: {e}"))?;
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let mime_type = file::stored_mime_type(None, Some(name)).map_err(|e| e.message)?;
    let filename = file::stored_filename(Some(name), &mime_type).map_err(|e| e.message)?;
    let id = new_id("file");
    let reader = tokio::fs::File::from_std(std::fs::File::from(fd));
    let mut read = 0u64;
    let body = tokio_util::io::ReaderStream::new(reader)
        .map(move |chunk| {
            let chunk = chunk?;
            read += chunk.len() as u64;
            match &limit {
                Some((max, why)) if read > *max => Err(std::io::Error::other(why.clone())),
                _ => Ok(chunk),
            }
        })
        .boxed();
    let size = files.put_bytes(&id, body).await.map_err(|e| match e {
        // The source's own words (the cap, a read error), not "the upload broke off".
        mast_store::blobs::BlobError::Source(why) => why,
        e => e.to_string(),
    })?;
    let record = FileRecord {
        id: id.clone(),
        workspace_id: ws.to_string(),
        filename,
        mime_type,
        size_bytes: size as i64,
        downloadable: true,
        scope_id: Some(sid.to_string()),
        created_at: files.now(),
        expires_at: None,
    };
    files
        .register(&record)
        .await
        .map_err(|e| format!("it could not be listed: {e}"))?;
    Ok((id, size))
}

/// Where the registered state of the outputs in `dir` is kept: beside it, where the sandbox
/// (which sees only `dir` itself) cannot reach.
pub(crate) fn manifest_path(dir: &Path) -> PathBuf {
    dir.with_extension("registered.json")
}

async fn load(path: &Path) -> Registered {
    match tokio::fs::read(path).await {
        Ok(b) => serde_json::from_slice(&b).unwrap_or_default(),
        Err(_) => Registered::default(),
    }
}

/// Writes the manifest (server-private: it names the session's outputs and their Files).
async fn store(path: &Path, state: &Registered) -> std::io::Result<()> {
    let tmp = path.with_extension("tmp");
    mast_domain::private_fs::write_async(&tmp, serde_json::to_vec(state)?).await?;
    tokio::fs::rename(&tmp, path).await
}

const DIR_FLAGS: OFlags = OFlags::RDONLY
    .union(OFlags::DIRECTORY)
    .union(OFlags::NOFOLLOW)
    .union(OFlags::CLOEXEC);

/// Every regular file under `root`, at most [`MAX_DEPTH`] levels down.
fn scan(root: &Path) -> std::io::Result<Vec<Found>> {
    let fd = rustix::fs::open(root, DIR_FLAGS, Mode::empty())?;
    let mut out = Vec::new();
    walk(&fd, "", 0, &mut out)?;
    Ok(out)
}

fn walk(dir: &OwnedFd, prefix: &str, depth: usize, out: &mut Vec<Found>) -> std::io::Result<()> {
    let mut entries = rustix::fs::Dir::read_from(dir)?;
    while let Some(entry) = entries.read() {
        let entry = entry?;
        let name: &CStr = entry.file_name();
        let bytes = name.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        // Names that are not UTF-8 cannot be a File's name.
        let Ok(text) = std::str::from_utf8(bytes) else {
            continue;
        };
        let rel = if prefix.is_empty() {
            text.to_string()
        } else {
            format!("{prefix}/{text}")
        };
        // The entry may go (or change kind) between listing and looking: skip it then.
        let Ok(st) = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) else {
            continue;
        };
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Directory if depth < MAX_DEPTH => {
                if let Ok(sub) = rustix::fs::openat(dir, name, DIR_FLAGS, Mode::empty()) {
                    walk(&sub, &rel, depth + 1, out)?;
                }
            }
            FileType::RegularFile => out.push(Found {
                rel,
                stamp: Stamp {
                    size: st.st_size as u64,
                    mtime_s: st.st_mtime,
                    mtime_ns: st.st_mtime_nsec as i64,
                    ino: st.st_ino,
                },
            }),
            _ => {}
        }
    }
    Ok(())
}

/// Opens `rel` under `root` for reading, component by component, following no link; fails
/// unless it ends at a regular file (a FIFO swapped in does not block the open).
fn open_regular(root: &Path, rel: &str) -> std::io::Result<OwnedFd> {
    let mut dir = rustix::fs::open(root, DIR_FLAGS, Mode::empty())?;
    let mut parts = rel.split('/').peekable();
    while let Some(part) = parts.next() {
        if parts.peek().is_some() {
            dir = rustix::fs::openat(&dir, part, DIR_FLAGS, Mode::empty())?;
            continue;
        }
        let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
        let fd = rustix::fs::openat(&dir, part, flags, Mode::empty())?;
        let st = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Err(std::io::Error::other("it is not a regular file"));
        }
        // Reads stay blocking-free either way: regular files ignore O_NONBLOCK.
        return Ok(fd);
    }
    Err(std::io::Error::other("empty path"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scan_finds_regular_files_and_follows_no_link() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("top.txt"), "1").unwrap();
        std::fs::write(root.join("a/b/deep.csv"), "22").unwrap();
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "s").unwrap();
        std::os::unix::fs::symlink(outside.path().join("secret"), root.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("dirlink")).unwrap();
        let mut found: Vec<(String, u64)> = scan(root)
            .unwrap()
            .into_iter()
            .map(|f| (f.rel, f.stamp.size))
            .collect();
        found.sort();
        assert_eq!(
            found,
            [("a/b/deep.csv".to_string(), 2), ("top.txt".to_string(), 1)]
        );
        assert!(open_regular(root, "a/b/deep.csv").is_ok());
        assert!(open_regular(root, "link").is_err());
        assert!(open_regular(root, "dirlink/secret").is_err());
        assert!(open_regular(root, "a").is_err());
    }

    #[test]
    fn the_manifest_lives_beside_the_directory() {
        assert_eq!(
            manifest_path(Path::new("/d/session-outputs/sesn_1")),
            Path::new("/d/session-outputs/sesn_1.registered.json")
        );
    }
}
