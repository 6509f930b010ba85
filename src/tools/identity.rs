//! Who sandboxes run as. A server running as root gives every session's sandbox a host user
//! of its own: nothing on the host belongs to it but its workspace, files it creates (even
//! setuid ones) carry no privilege, and its processes are counted apart from everyone else's.

use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

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

/// Gives one path (never following a symlink) to `uid`.
pub fn give(path: &Path, uid: u32) -> io::Result<()> {
    std::os::unix::fs::lchown(path, Some(uid), Some(uid))
}

/// Gives a whole tree to `uid` when its root belongs to someone else (a workspace created
/// before sandboxes had users of their own).
pub fn give_tree(root: &Path, uid: u32) -> io::Result<()> {
    if std::fs::symlink_metadata(root)?.uid() == uid {
        return Ok(());
    }
    let mut stack = vec![root.to_path_buf()];
    while let Some(p) = stack.pop() {
        give(&p, uid)?;
        let meta = std::fs::symlink_metadata(&p)?;
        if meta.is_dir() {
            for entry in std::fs::read_dir(&p)? {
                stack.push(entry?.path());
            }
        }
    }
    Ok(())
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
