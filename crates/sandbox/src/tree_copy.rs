//! Copies a directory tree the way `cp -a --reflink=auto` would, for workspace checkpoints and
//! forks: each regular file is cloned (`FICLONE`, copy-on-write, on filesystems that share
//! extents: Btrfs, XFS, bcachefs, ZFS 2.2+) or else copied; modes and modification times are
//! kept; symbolic links are recreated as links and never followed.
//!
//! The walk goes from directory handles opened with `O_NOFOLLOW`, so a link swapped in while a
//! sandbox still runs (a fork of a running session) cannot lead the copy out of the tree.
//! Set-user-id and set-group-id bits are dropped (the server may run as root), and entries
//! that are neither files, directories nor links (FIFOs, sockets, devices) are skipped.

use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use rustix::fs::{AtFlags, FileType, Mode, OFlags, Timestamps};

/// What a copy did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CopyStats {
    /// Regular files copied (cloned or not).
    pub files: u64,
    /// Of those, how many were cloned (sharing their data with the source).
    pub cloned: u64,
    /// Bytes in the regular files.
    pub bytes: u64,
    /// Directories and links created.
    pub others: u64,
    /// Bytes of disk the copy's files and directories take (their blocks, as the workspace
    /// quota counts them; a cloned file counts whole though it shares its data).
    pub disk_bytes: u64,
}

impl CopyStats {
    /// Files, directories and links in the copy.
    pub fn entries(&self) -> u64 {
        self.files + self.others
    }
}

/// How much a copy may take; one that would take more fails with
/// [`io::ErrorKind::QuotaExceeded`] and leaves nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Bytes of disk ([`CopyStats::disk_bytes`]).
    pub disk_bytes: u64,
    /// Files, directories and links ([`CopyStats::entries`]).
    pub entries: u64,
}

impl Budget {
    /// No limit.
    pub const UNLIMITED: Budget = Budget {
        disk_bytes: u64::MAX,
        entries: u64::MAX,
    };

    /// Fails once `stats` are past the budget.
    fn check(&self, stats: &CopyStats) -> io::Result<()> {
        if stats.disk_bytes > self.disk_bytes || stats.entries() > self.entries {
            return Err(over_budget());
        }
        Ok(())
    }
}

fn over_budget() -> io::Error {
    io::Error::new(
        io::ErrorKind::QuotaExceeded,
        "the tree is larger than its copy may be",
    )
}

/// How deep a tree may nest; deeper is refused rather than recursing without end.
pub(crate) const MAX_DEPTH: usize = 256;

/// Copies directory `src` to `dst`, which must not exist. The copy is built beside `dst` and
/// renamed into place, so `dst` is either absent or complete.
pub fn copy_tree(src: &Path, dst: &Path) -> io::Result<CopyStats> {
    copy_tree_within(src, dst, Budget::UNLIMITED)
}

/// [`copy_tree`], stopped (and removed) as soon as it would take more than `budget`: a tree
/// too large is never written whole.
pub fn copy_tree_within(src: &Path, dst: &Path, budget: Budget) -> io::Result<CopyStats> {
    // rename(2) would replace an empty directory: refuse any existing entry first.
    if std::fs::symlink_metadata(dst).is_ok() {
        return Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists", dst.display()),
        ));
    }
    let src_fd = rustix::fs::open(
        src,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let parent = dst
        .parent()
        .ok_or_else(|| io::Error::other("the copy's destination has no parent"))?;
    std::fs::create_dir_all(parent)?;
    let name = dst.file_name().unwrap_or(OsStr::new("copy"));
    let mut tmp_name = OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".partial-{}", mast_domain::ids::new_id("tmp")));
    let tmp = parent.join(tmp_name);
    std::fs::create_dir(&tmp)?;
    let result = (|| {
        let dst_fd = open_dir(&tmp)?;
        let mut stats = CopyStats::default();
        copy_dir(src_fd.as_fd(), dst_fd.as_fd(), &mut stats, &budget, 0)?;
        copy_meta(src_fd.as_fd(), dst_fd.as_fd())?;
        Ok(stats)
    })();
    match result {
        Ok(stats) => {
            std::fs::rename(&tmp, dst)?;
            Ok(stats)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&tmp);
            Err(e)
        }
    }
}

pub(crate) fn open_dir(path: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

pub(crate) fn open_dir_at(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// A directory's entries with their types (links as links); errors reading it are errors.
pub(crate) fn entries(dir: BorrowedFd<'_>) -> io::Result<Vec<(OsString, FileType)>> {
    let mut out = Vec::new();
    for entry in rustix::fs::Dir::read_from(dir)? {
        let entry = entry?;
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        // Some filesystems do not report types in directory entries.
        let kind = match entry.file_type() {
            FileType::Unknown => {
                let st = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)?;
                FileType::from_raw_mode(st.st_mode)
            }
            kind => kind,
        };
        out.push((name.to_os_string(), kind));
    }
    Ok(out)
}

/// Permission bits without set-user-id and set-group-id.
pub(crate) fn safe_mode(raw: u32) -> Mode {
    Mode::from_bits_truncate(raw & 0o1777)
}

/// Gives `dst` the mode and times of `src`.
fn copy_meta(src: BorrowedFd<'_>, dst: BorrowedFd<'_>) -> io::Result<()> {
    let st = rustix::fs::fstat(src)?;
    rustix::fs::fchmod(dst, safe_mode(st.st_mode))?;
    let times = Timestamps {
        last_access: rustix::fs::Timespec {
            tv_sec: st.st_atime as _,
            tv_nsec: st.st_atime_nsec as _,
        },
        last_modification: rustix::fs::Timespec {
            tv_sec: st.st_mtime as _,
            tv_nsec: st.st_mtime_nsec as _,
        },
    };
    rustix::fs::futimens(dst, &times)?;
    Ok(())
}

fn copy_dir(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    stats: &mut CopyStats,
    budget: &Budget,
    depth: usize,
) -> io::Result<()> {
    if depth > MAX_DEPTH {
        return Err(io::Error::other(format!(
            "the tree nests deeper than {MAX_DEPTH} directories"
        )));
    }
    for (name, kind) in entries(src)? {
        match kind {
            FileType::Directory => {
                let s = open_dir_at(src, &name)?;
                rustix::fs::mkdirat(dst, &name, Mode::from_bits_truncate(0o700))?;
                let d = open_dir_at(dst, &name)?;
                stats.others += 1;
                stats.disk_bytes += blocks(d.as_fd())?;
                budget.check(stats)?;
                copy_dir(s.as_fd(), d.as_fd(), stats, budget, depth + 1)?;
                // After the entries: a read-only directory must still take them.
                copy_meta(s.as_fd(), d.as_fd())?;
            }
            FileType::RegularFile => copy_file(src, dst, &name, stats, budget)?,
            FileType::Symlink => {
                let target = rustix::fs::readlinkat(src, &name, Vec::new())?;
                rustix::fs::symlinkat(target.as_c_str(), dst, &name)?;
                stats.others += 1;
                budget.check(stats)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// Bytes of disk an open file or directory takes.
fn blocks(fd: BorrowedFd<'_>) -> io::Result<u64> {
    Ok(u64::try_from(rustix::fs::fstat(fd)?.st_blocks).unwrap_or(0) * 512)
}

fn copy_file(
    src: BorrowedFd<'_>,
    dst: BorrowedFd<'_>,
    name: &OsStr,
    stats: &mut CopyStats,
    budget: &Budget,
) -> io::Result<()> {
    // O_NONBLOCK: a FIFO swapped in after the directory was read is not waited on.
    let s = rustix::fs::openat(
        src,
        name,
        OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )?;
    let st = rustix::fs::fstat(&s)?;
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
        return Ok(());
    }
    // What the source takes, before copying it; the copy's own blocks are counted after (the
    // source may have grown meanwhile, or the copy be less sparse).
    budget.check(&CopyStats {
        files: stats.files + 1,
        disk_bytes: stats.disk_bytes + u64::try_from(st.st_blocks).unwrap_or(0) * 512,
        ..*stats
    })?;
    let d = rustix::fs::openat(
        dst,
        name,
        OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::from_bits_truncate(0o600),
    )?;
    if rustix::fs::ioctl_ficlone(&d, &s).is_ok() {
        stats.cloned += 1;
    } else {
        // std's copy uses copy_file_range where it can (in-kernel, and itself a clone on
        // some filesystems), falling back to read/write.
        // At most the room left: a sparse file takes few blocks but may be copied whole.
        use std::io::Read as _;
        let room = budget.disk_bytes.saturating_sub(stats.disk_bytes);
        let (from, mut to) = (File::from(s.try_clone()?), File::from(d.try_clone()?));
        if io::copy(&mut from.take(room.saturating_add(1)), &mut to)? > room {
            return Err(over_budget());
        }
    }
    copy_meta(s.as_fd(), d.as_fd())?;
    stats.files += 1;
    stats.bytes += u64::try_from(st.st_size).unwrap_or(0);
    stats.disk_bytes += blocks(d.as_fd())?;
    budget.check(stats)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{PermissionsExt, symlink};
    use std::path::PathBuf;

    use super::*;

    #[test]
    fn copies_files_modes_and_links_without_following_them() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "outside").unwrap();
        let src = tempfile::tempdir().unwrap();
        let root = src.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/f.txt"), "hello").unwrap();
        std::fs::write(root.join("run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o4755))
            .unwrap();
        symlink(outside.path(), root.join("out")).unwrap();
        symlink("a/b/f.txt", root.join("rel")).unwrap();
        let dst_parent = tempfile::tempdir().unwrap();
        let dst = dst_parent.path().join("copy");
        let stats = copy_tree(root, &dst).unwrap();
        assert_eq!(stats.files, 2);
        assert_eq!(stats.bytes, 15);
        assert_eq!(
            std::fs::read_to_string(dst.join("a/b/f.txt")).unwrap(),
            "hello"
        );
        // The mode is kept, without set-user-id.
        let mode = std::fs::metadata(dst.join("run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o755);
        // Links are links, pointing where they pointed; what is outside is not copied.
        assert_eq!(std::fs::read_link(dst.join("out")).unwrap(), outside.path());
        assert!(
            std::fs::symlink_metadata(dst.join("out"))
                .unwrap()
                .is_symlink()
        );
        assert_eq!(
            std::fs::read_link(dst.join("rel")).unwrap(),
            Path::new("a/b/f.txt")
        );
        // The copy is independent of its source.
        std::fs::write(root.join("a/b/f.txt"), "changed").unwrap();
        assert_eq!(
            std::fs::read_to_string(dst.join("a/b/f.txt")).unwrap(),
            "hello"
        );
        // No partial directory is left beside it.
        assert_eq!(std::fs::read_dir(dst_parent.path()).unwrap().count(), 1);
    }

    /// Regular files under `dir` (links not followed) and their bytes.
    fn census(dir: &Path) -> (u64, u64) {
        let mut out = (0, 0);
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let meta = std::fs::symlink_metadata(entry.path()).unwrap();
            if meta.is_dir() {
                let (f, b) = census(&entry.path());
                out = (out.0 + f, out.1 + b);
            } else if meta.is_file() {
                out = (out.0 + 1, out.1 + meta.len());
            }
        }
        out
    }

    /// What a whole-tree copy costs (a fork of the live workspace): copies the tree
    /// `MAST_MEASURE_TREE` names (next to it, so on the same filesystem) and prints what it
    /// took; the copy must be complete.
    /// Without it (as in the suite, which runs ignored tests too) it copies a generated tree
    /// of 200 files in nested directories.
    #[test]
    #[ignore = "a measurement: MAST_MEASURE_TREE=<dir> cargo test --lib measure_copy -- --ignored --nocapture"]
    fn measure_copy() {
        let generated = tempfile::tempdir().unwrap();
        let src = match std::env::var("MAST_MEASURE_TREE") {
            Ok(dir) => PathBuf::from(dir),
            Err(_) => {
                let root = generated.path().join("tree");
                for i in 0..200 {
                    let dir = root.join(format!("d{}", i % 7)).join(format!("e{}", i % 3));
                    std::fs::create_dir_all(&dir).unwrap();
                    std::fs::write(dir.join(format!("f{i}")), vec![i as u8; 4096 + i]).unwrap();
                }
                root
            }
        };
        let beside = tempfile::tempdir_in(src.parent().unwrap()).unwrap();
        let dst = beside.path().join("copy");
        let started = std::time::Instant::now();
        let stats = copy_tree(&src, &dst).unwrap();
        let took = started.elapsed();
        assert_eq!((stats.files, stats.bytes), census(&src));
        assert_eq!(census(&dst), census(&src));
        let du = std::process::Command::new("du")
            .args(["-sk"])
            .arg(&dst)
            .output()
            .unwrap();
        println!(
            "{} files, {} bytes ({} cloned) in {:?}; du of the copy: {}",
            stats.files,
            stats.bytes,
            stats.cloned,
            took,
            String::from_utf8_lossy(&du.stdout).trim()
        );
    }

    #[test]
    fn a_copy_past_its_budget_stops_and_leaves_nothing() {
        let src = tempfile::tempdir().unwrap();
        std::fs::create_dir(src.path().join("d")).unwrap();
        std::fs::write(src.path().join("d/big"), vec![1u8; 200_000]).unwrap();
        let parent = tempfile::tempdir().unwrap();
        let dst = parent.path().join("copy");
        let within = |disk_bytes, entries| {
            copy_tree_within(
                src.path(),
                &dst,
                Budget {
                    disk_bytes,
                    entries,
                },
            )
        };
        let e = within(100_000, 10).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::QuotaExceeded);
        let e = within(1 << 20, 1).unwrap_err();
        assert_eq!(
            e.kind(),
            io::ErrorKind::QuotaExceeded,
            "two entries, one allowed"
        );
        assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 0);
        let stats = within(1 << 20, 2).unwrap();
        assert_eq!(stats.entries(), 2);
        assert!((200_000..300_000).contains(&stats.disk_bytes), "{stats:?}");
    }

    #[test]
    fn refuses_an_existing_destination_and_a_linked_source() {
        let src = tempfile::tempdir().unwrap();
        let dst = tempfile::tempdir().unwrap();
        assert!(copy_tree(src.path(), dst.path()).is_err());
        let link = dst.path().join("link");
        symlink(src.path(), &link).unwrap();
        assert!(copy_tree(&link, &dst.path().join("x")).is_err());
    }
}
