//! Restoring a snapshot: the tree is rebuilt beside its destination and renamed into place,
//! so the destination is either absent or complete. Directories and links come first, in the
//! manifest's order, then a few threads fetch, check and write the files, and last the
//! directories get their modes and times (deepest first, so a read-only one still takes its
//! entries).

use std::collections::HashSet;
use std::ffi::{OsStr, OsString};
use std::io::{self, Write as _};
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

use rustix::fs::{Mode, Timespec, Timestamps};

use super::codec;
use super::manifest::{CHUNK_SIZE, Kind, Manifest, Node};
use super::objects::Objects;

/// What a restore did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RestoreStats {
    pub files: u64,
    pub bytes: u64,
    /// Bytes fetched from the store (compressed).
    pub fetched_bytes: u64,
    pub micros: u64,
}

/// Rebuilds the tree `manifest` describes at `dst`, which must not exist.
pub fn restore(manifest: &Manifest, objects: &dyn Objects, dst: &Path) -> io::Result<RestoreStats> {
    let started = Instant::now();
    if std::fs::symlink_metadata(dst).is_ok() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists", dst.display()),
        ));
    }
    check_paths(manifest)?;
    let parent = dst
        .parent()
        .ok_or_else(|| io::Error::other("the restore's destination has no parent"))?;
    std::fs::create_dir_all(parent)?;
    let mut tmp_name = OsString::from(".");
    tmp_name.push(dst.file_name().unwrap_or(OsStr::new("restore")));
    tmp_name.push(format!(".partial-{}", mast_domain::ids::new_id("tmp")));
    let tmp = parent.join(tmp_name);
    std::fs::DirBuilder::new().mode(0o700).create(&tmp)?;
    let result = build(manifest, objects, &tmp);
    match result {
        Ok(mut stats) => {
            std::fs::rename(&tmp, dst)?;
            stats.micros = started.elapsed().as_micros() as u64;
            Ok(stats)
        }
        Err(e) => {
            open_up(&tmp);
            let _ = std::fs::remove_dir_all(&tmp);
            Err(e)
        }
    }
}

/// Makes every directory of a half-built tree writable again, so it can be removed after a
/// failure that came once some had their (read-only) modes.
fn open_up(dir: &Path) {
    use std::os::unix::fs::PermissionsExt as _;
    let _ = std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700));
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        if entry.file_type().is_ok_and(|t| t.is_dir()) {
            open_up(&entry.path());
        }
    }
}

/// Refuses a manifest whose paths could leave the tree or come out of order: every component
/// a plain name, and every parent a directory listed before.
fn check_paths(manifest: &Manifest) -> io::Result<()> {
    let mut dirs: HashSet<&[u8]> = HashSet::new();
    for node in &manifest.nodes {
        let bad = |why: &str| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "snapshot entry `{}` {why}",
                    String::from_utf8_lossy(&node.path)
                ),
            )
        };
        let plain = node
            .path
            .split(|&b| b == b'/')
            .all(|c| !c.is_empty() && c != b"." && c != b".." && !c.contains(&0));
        if !plain {
            return Err(bad("is not a plain relative path"));
        }
        if let Some(cut) = node.path.iter().rposition(|&b| b == b'/')
            && !dirs.contains(&node.path[..cut])
        {
            return Err(bad("comes before its directory"));
        }
        if matches!(node.kind, Kind::Dir) && !dirs.insert(&node.path) {
            return Err(bad("is listed twice"));
        }
    }
    Ok(())
}

fn at(root: &Path, node: &Node) -> PathBuf {
    root.join(OsStr::from_bytes(&node.path))
}

fn build(manifest: &Manifest, objects: &dyn Objects, root: &Path) -> io::Result<RestoreStats> {
    let mut files = Vec::new();
    for node in &manifest.nodes {
        match &node.kind {
            Kind::Dir => std::fs::DirBuilder::new()
                .mode(0o700)
                .create(at(root, node))?,
            Kind::Link { target } => {
                std::os::unix::fs::symlink(OsStr::from_bytes(target), at(root, node))?
            }
            Kind::File { .. } => files.push(node),
        }
    }
    let stats = Mutex::new(RestoreStats::default());
    let next = Mutex::new(files.into_iter());
    let workers = objects.parallelism().max(1);
    std::thread::scope(|scope| {
        let handles: Vec<_> = (0..workers)
            .map(|_| {
                scope.spawn(|| -> io::Result<()> {
                    loop {
                        let Some(node) = next.lock().ok().and_then(|mut it| it.next()) else {
                            return Ok(());
                        };
                        let (bytes, fetched) = write_file(objects, root, node)?;
                        let mut s = stats.lock().map_err(|_| io::Error::other("poisoned"))?;
                        s.files += 1;
                        s.bytes += bytes;
                        s.fetched_bytes += fetched;
                    }
                })
            })
            .collect();
        handles.into_iter().try_for_each(|h| {
            h.join()
                .map_err(|_| io::Error::other("a restore thread panicked"))?
        })
    })?;
    for node in manifest.nodes.iter().rev() {
        if matches!(node.kind, Kind::Dir) {
            set_meta(&at(root, node), node)?;
        }
    }
    set_meta(
        root,
        &Node {
            path: Vec::new(),
            mode: manifest.root_mode,
            mtime_ns: manifest.root_mtime_ns,
            kind: Kind::Dir,
        },
    )?;
    stats.into_inner().map_err(|_| io::Error::other("poisoned"))
}

/// Writes one file from its chunks, each checked against its name; returns its bytes and what
/// was fetched.
fn write_file(objects: &dyn Objects, root: &Path, node: &Node) -> io::Result<(u64, u64)> {
    let Kind::File { size, chunks, .. } = &node.kind else {
        return Ok((0, 0));
    };
    let path = at(root, node);
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&path)?;
    let (mut written, mut fetched) = (0u64, 0u64);
    for key in chunks {
        let stored = objects.get(key)?;
        fetched += stored.len() as u64;
        let raw = codec::open(key, &stored, CHUNK_SIZE).inspect_err(|e| {
            // A corrupt object would be reused by every later snapshot holding these bytes:
            // removed, the next one stores them again.
            if e.kind() == io::ErrorKind::InvalidData {
                let _ = objects.delete(key);
            }
        })?;
        file.write_all(&raw)?;
        written += raw.len() as u64;
    }
    if written != *size {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "snapshot file `{}` has {written} bytes in its chunks, not {size}",
                String::from_utf8_lossy(&node.path)
            ),
        ));
    }
    drop(file);
    set_meta(&path, node)?;
    Ok((written, fetched))
}

/// Gives a restored file or directory its mode and modification time.
fn set_meta(path: &Path, node: &Node) -> io::Result<()> {
    rustix::fs::chmod(path, Mode::from_bits_truncate(node.mode & 0o1777))?;
    let t = |ns: i64| Timespec {
        tv_sec: ns.div_euclid(1_000_000_000) as _,
        tv_nsec: ns.rem_euclid(1_000_000_000) as _,
    };
    rustix::fs::utimensat(
        rustix::fs::CWD,
        path,
        &Timestamps {
            last_access: t(node.mtime_ns),
            last_modification: t(node.mtime_ns),
        },
        rustix::fs::AtFlags::SYMLINK_NOFOLLOW,
    )?;
    Ok(())
}
