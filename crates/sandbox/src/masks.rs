//! What a call the `auto` policy approved may not see: the protected entries of the trees a
//! sandbox can reach and that outlive a call (the workspace, the session's state, its
//! mounts), found by walking them without following links, and masked in the sandbox by a
//! read-only, mode-0000 entry the server owns, so any program gets `EACCES` and cannot move,
//! remove or change them either.
//!
//! The walk and the masks must see the same tree: a concurrent command could otherwise rename
//! a protected entry's parent in between. So a masked command runs alone among the session's
//! commands ([`SessionTools::calls`](super::SessionTools)); masks, once mounted, follow their
//! entries through renames.

use std::collections::HashSet;
use std::ffi::OsString;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use super::protected::hidden_entry;

/// The empty, mode-0000 file masked over protected files (in the server-only directory of
/// the sandbox's account files).
pub const MASK_FILE: &str = "masked-file";
/// The empty, mode-0000 directory masked over protected directories.
pub const MASK_DIR: &str = "masked-dir";
/// Entries walked at most where the workspace has no file cap.
const DEFAULT_CAP: u64 = 1_000_000;

/// One tree to walk: its host directory and where it appears in the sandbox.
pub struct Root {
    pub host: PathBuf,
    pub sandbox: PathBuf,
}

/// The protected entries of a sandbox's trees: (sandbox path, is a directory).
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Masks(Vec<(PathBuf, bool)>);

impl Masks {
    /// Whether nothing is protected.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether sandbox path `path` is a protected entry or lies in one.
    pub fn hides(&self, path: &Path) -> bool {
        self.0.iter().any(|(p, _)| path.starts_with(p))
    }

    /// The protected entries' sandbox paths.
    pub fn paths(&self) -> impl Iterator<Item = &Path> {
        self.0.iter().map(|(p, _)| p.as_path())
    }

    /// bubblewrap arguments binding the mask entries of `accounts` over every protected entry
    /// (after the trees themselves are bound).
    pub fn bwrap_args(&self, accounts: &Path) -> Vec<OsString> {
        let mut a = Vec::with_capacity(self.0.len() * 3);
        for (path, is_dir) in &self.0 {
            let mask = accounts.join(if *is_dir { MASK_DIR } else { MASK_FILE });
            a.extend([
                "--ro-bind".into(),
                mask.into_os_string(),
                path.clone().into_os_string(),
            ]);
        }
        a
    }
}

/// Creates the mask entries in `dir` (server-only, beside the account files).
pub fn write_mask_entries(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let file = dir.join(MASK_FILE);
    if !file.is_file() {
        std::fs::write(&file, b"")?;
    }
    let sub = dir.join(MASK_DIR);
    match std::fs::create_dir(&sub) {
        Err(e) if e.kind() != std::io::ErrorKind::AlreadyExists => return Err(e),
        _ => {}
    }
    for entry in [file, sub] {
        std::fs::set_permissions(entry, std::fs::Permissions::from_mode(0o000))?;
    }
    Ok(())
}

/// Finds the protected entries under `roots`, looking at `cap` entries at most (0: no cap of
/// the workspace's own). Fails, so the command does not run, where it cannot be sure: a tree
/// too large, or a directory it cannot list.
pub fn find(roots: &[Root], cap: u64) -> Result<Masks, String> {
    let mut walk = Walk {
        cap: if cap == 0 { DEFAULT_CAP } else { cap },
        seen: 0,
        hidden: Vec::new(),
        hidden_inodes: HashSet::new(),
        linked: Vec::new(),
        root: PathBuf::new(),
    };
    for root in roots {
        walk.root = root.sandbox.clone();
        match std::fs::symlink_metadata(&root.host) {
            Ok(meta) if meta.is_dir() => {
                let hidden = walk.entry(&root.sandbox, &meta);
                walk.dir(&root.host, &root.sandbox, hidden)?
            }
            // A file resource, or a tree not made yet.
            Ok(meta) => {
                walk.entry(&root.sandbox, &meta);
            }
            Err(_) => {}
        }
    }
    // A hard link shares its file's contents whatever its name: hide it too.
    for (path, inode) in std::mem::take(&mut walk.linked) {
        if walk.hidden_inodes.contains(&inode) {
            walk.hidden.push((path, false));
        }
    }
    // Sorted, a hidden directory comes just before what lies in it, which it hides already
    // (and a mount inside the mask would fail).
    walk.hidden.sort();
    let mut kept: Vec<(PathBuf, bool)> = Vec::with_capacity(walk.hidden.len());
    for (path, is_dir) in walk.hidden {
        if !kept.iter().any(|(k, _)| path.starts_with(k)) {
            kept.push((path, is_dir));
        }
    }
    Ok(Masks(kept))
}

struct Walk {
    cap: u64,
    seen: u64,
    hidden: Vec<(PathBuf, bool)>,
    /// (device, inode) of hidden files with more than one link.
    hidden_inodes: HashSet<(u64, u64)>,
    /// Unhidden files with more than one link, for the check against `hidden_inodes`.
    linked: Vec<(PathBuf, (u64, u64))>,
    /// The sandbox path of the tree being walked.
    root: PathBuf,
}

impl Walk {
    /// Walks directory `host` (`sandbox` inside) and everything below it; `inside_hidden` when
    /// it is hidden already and only the inodes of its files are wanted. Iterative: the agent
    /// decides how deep the tree is, and a recursion that deep would overflow the stack.
    fn dir(&mut self, host: &Path, sandbox: &Path, inside_hidden: bool) -> Result<(), String> {
        let mut pending = vec![(host.to_path_buf(), sandbox.to_path_buf(), inside_hidden)];
        while let Some((host, sandbox, inside_hidden)) = pending.pop() {
            let listing_failed =
                |e: std::io::Error| format!("{} could not be listed ({e})", sandbox.display());
            let entries = match std::fs::read_dir(&host) {
                Ok(e) => e,
                // Removed meanwhile by the server (a memory store's sync): nothing to hide.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(listing_failed(e)),
            };
            for entry in entries {
                let entry = entry.map_err(listing_failed)?;
                self.seen += 1;
                if self.seen > self.cap {
                    return Err(format!("they hold more than {} entries", self.cap));
                }
                let Ok(meta) = std::fs::symlink_metadata(entry.path()) else {
                    continue;
                };
                let child = sandbox.join(entry.file_name());
                let hidden = inside_hidden || self.entry(&child, &meta);
                if meta.is_dir() {
                    pending.push((entry.path(), child, hidden));
                } else if meta.nlink() > 1 && !meta.is_symlink() {
                    let inode = (meta.dev(), meta.ino());
                    if hidden {
                        self.hidden_inodes.insert(inode);
                    } else {
                        self.linked.push((child, inode));
                    }
                }
            }
        }
        Ok(())
    }

    /// Records entry `path` if it is protected, and says whether it is. A link is never
    /// masked: its target is, where it lies in a tree, and a mount on a link would land on
    /// its target.
    fn entry(&mut self, path: &Path, meta: &std::fs::Metadata) -> bool {
        if meta.is_symlink() {
            return false;
        }
        // Names that are not UTF-8 are matched in their lossy form: the patterns are ASCII,
        // and an invalid byte never completes one.
        let text = path.to_string_lossy();
        let Some(hidden) = hidden_entry(&text, meta.is_dir()) else {
            return false;
        };
        // The prefix is whole components: take as many of the real path's. Where the match
        // begins above the walked tree (a mount at a protected path), the tree is hidden.
        let depth = hidden.matches('/').count() + 1;
        let floor = self.root.components().count();
        let hidden: PathBuf = path.components().take(depth.max(floor)).collect();
        let is_dir = hidden != path || meta.is_dir();
        self.hidden.push((hidden, is_dir));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protected_entries_and_their_hard_links_are_found_without_following_links() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        let outside = dir.path().join("outside");
        for d in [
            ws.join(".ssh"),
            ws.join("deploy"),
            ws.join("p/.docker"),
            outside.clone(),
        ] {
            std::fs::create_dir_all(d).unwrap();
        }
        for f in [
            ".ssh/id_rsa",
            "deploy/id_ed25519",
            "p/.docker/config.json",
            "notes",
        ] {
            std::fs::write(ws.join(f), "x").unwrap();
        }
        std::fs::write(outside.join("id_rsa"), "x").unwrap();
        std::fs::hard_link(ws.join("deploy/id_ed25519"), ws.join("innocent")).unwrap();
        std::fs::hard_link(ws.join(".ssh/id_rsa"), ws.join("also-innocent")).unwrap();
        std::os::unix::fs::symlink(&outside, ws.join("link")).unwrap();
        std::os::unix::fs::symlink("notes", ws.join("link-id_rsa")).unwrap();
        let roots = [Root {
            host: ws.clone(),
            sandbox: "/workspace".into(),
        }];
        let masks = find(&roots, 0).unwrap();
        let paths: Vec<&str> = masks.paths().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(
            paths,
            [
                "/workspace/.ssh",
                "/workspace/also-innocent",
                "/workspace/deploy/id_ed25519",
                "/workspace/innocent",
                "/workspace/p/.docker",
            ]
        );
        assert!(masks.0.contains(&("/workspace/p/.docker".into(), true)));
        // A tree mounted at a protected path is hidden whole.
        let mounted = [Root {
            host: dir.path().join("ws/p/.docker"),
            sandbox: "/mnt/session/uploads/.docker".into(),
        }];
        let masks = find(&mounted, 0).unwrap();
        assert_eq!(masks.0, [("/mnt/session/uploads/.docker".into(), true)]);
        assert!(find(&roots, 5).unwrap_err().contains("more than 5 entries"));
    }
}
