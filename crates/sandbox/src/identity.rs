//! Who sandboxes run as. A server running as root gives every session's sandbox a host user
//! of its own: nothing on the host belongs to it but its workspace, files it creates (even
//! setuid ones) carry no privilege, and its processes are counted apart from everyone else's.

use std::ffi::OsStr;
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::MetadataExt;

use rustix::fs::{AtFlags, FileType, Gid, Uid};
use rustix::io::Errno;

use super::files;

/// First uid of the range sandbox users are drawn from: far above login users and the usual
/// subordinate-id ranges, and below 2^31 (bubblewrap writes uid maps as signed integers).
const UID_BASE: u32 = 1_600_000_000;
/// Size of that range.
const UID_SPAN: u32 = 100_000_000;

/// Whether this process runs as root.
pub fn running_as_root() -> bool {
    // `/proc/self` belongs to the process's effective uid (std has no geteuid).
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// The host uid (also used as gid) of a session's sandbox.
pub fn session_uid(session_id: &str) -> u32 {
    // FNV-1a: stable across releases, unlike std's hasher.
    let mut h: u32 = 0x811c_9dc5;
    for b in session_id.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    UID_BASE + h % UID_SPAN
}

// Everything below acts on workspaces, which sandboxed commands change while the server works
// in them: a directory on the way may be swapped for a link to anywhere on the host at any
// moment. So nothing is ever given by path, only through handles the no-follow walks hold.

/// Gives an open file or directory to `uid`.
pub fn give(fd: impl AsFd, uid: u32) -> io::Result<()> {
    let id = (Some(Uid::from_raw(uid)), Some(Gid::from_raw(uid)));
    Ok(rustix::fs::fchown(fd, id.0, id.1)?)
}

/// Gives entry `name` of the open directory `dir` to `uid`; a link is given itself, never
/// what it points to.
pub fn give_at(dir: BorrowedFd<'_>, name: &OsStr, uid: u32) -> io::Result<()> {
    let id = (Some(Uid::from_raw(uid)), Some(Gid::from_raw(uid)));
    Ok(rustix::fs::chownat(
        dir,
        name,
        id.0,
        id.1,
        AtFlags::SYMLINK_NOFOLLOW,
    )?)
}

/// Directory levels [`give_tree`] descends: each holds a descriptor open.
const MAX_TREE_DEPTH: usize = 256;

/// Gives a whole tree, the open directory `root` and everything below it, to `uid` when the
/// root belongs to someone else (a workspace created before sandboxes had users of their
/// own). The root is given last: while it is closed to others (`0700`) and not yet given, the
/// session's sandbox cannot enter it to race the walk, and a walk cut short is retried the
/// next time.
pub fn give_tree(root: BorrowedFd<'_>, uid: u32) -> io::Result<()> {
    if rustix::fs::fstat(root)?.st_uid == uid {
        return Ok(());
    }
    if give_below(root, uid, 0)? {
        tracing::warn!(
            "a workspace nests directories more than {MAX_TREE_DEPTH} deep; the deeper ones stay the server's"
        );
    }
    give(root, uid)
}

/// Gives the entries of `dir` and, depth-first, of its subdirectories to `uid`; returns
/// whether some directory was too deep to enter.
fn give_below(dir: BorrowedFd<'_>, uid: u32, depth: usize) -> io::Result<bool> {
    let mut too_deep = false;
    for (name, kind) in files::entries(dir) {
        if kind != FileType::Directory {
            match give_at(dir, &name, uid) {
                Err(e) if !gone(&e) => return Err(e),
                _ => continue,
            }
        }
        if depth >= MAX_TREE_DEPTH {
            too_deep = true;
            continue;
        }
        // Given through its own handle, opened without following a link: what was swapped
        // in under this name since the listing is entered only if it is a real directory.
        match files::open_dir_at(dir, &name) {
            Ok(sub) => {
                too_deep |= give_below(sub.as_fd(), uid, depth + 1)?;
                give(&sub, uid)?;
            }
            Err(e) if gone(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(too_deep)
}

/// Whether a listed entry could not be given because it was removed or replaced meanwhile.
fn gone(e: &io::Error) -> bool {
    [Errno::NOENT, Errno::NOTDIR, Errno::LOOP]
        .iter()
        .any(|errno| e.raw_os_error() == Some(errno.raw_os_error()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn session_uids_are_stable_and_in_range() {
        let a = session_uid("sesn_01abc");
        assert_eq!(a, session_uid("sesn_01abc"));
        assert_ne!(a, session_uid("sesn_01abd"));
        assert!((UID_BASE..UID_BASE + UID_SPAN).contains(&a));
    }
}
