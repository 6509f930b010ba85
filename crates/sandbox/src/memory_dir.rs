//! A mounted memory store's directory on the host, as the server reads and writes it between
//! tool calls. The sandbox can change the directory (links, FIFOs, renamed directories), so
//! every step goes through directory handles opened without following links: a link the
//! sandbox planted is never read (it would upload a host file as a memory) nor written
//! through (it would let the server write outside the directory).

use std::collections::BTreeMap;
use std::os::fd::{AsFd as _, BorrowedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use rustix::fs::{FileType, OFlags};

use super::files::{Missing, Workspace, entries, open_dir_at, open_regular_at, read_capped};

/// Directory levels a store's tree may have (memory paths have at most 20 segments).
const MAX_DEPTH: usize = 20;

/// What a walk found: each regular file's path from the root (`a/b.md`) and its bytes, up to
/// `max_bytes` each; `too_big` lists files over that, `skipped` entries that are neither
/// regular files nor directories (links, FIFOs…), which never become memories.
#[derive(Debug, Default)]
pub struct Tree {
    pub files: BTreeMap<String, Vec<u8>>,
    pub too_big: Vec<String>,
    pub skipped: Vec<String>,
}

/// Reads every regular file below `root`.
pub fn walk(root: &Path, max_bytes: u64) -> std::io::Result<Tree> {
    let dir = rustix::fs::open(
        root,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    let mut tree = Tree::default();
    walk_dir(dir.as_fd(), "", max_bytes, 0, &mut tree);
    Ok(tree)
}

fn walk_dir(dir: BorrowedFd<'_>, prefix: &str, max_bytes: u64, depth: usize, tree: &mut Tree) {
    for (name, kind) in entries(dir) {
        let Ok(name_str) = std::str::from_utf8(name.as_bytes()) else {
            tree.skipped.push(format!(
                "{prefix}{}",
                String::from_utf8_lossy(name.as_bytes())
            ));
            continue;
        };
        let rel = format!("{prefix}{name_str}");
        match kind {
            FileType::Directory if depth < MAX_DEPTH => {
                if let Ok(sub) = open_dir_at(dir, &name) {
                    walk_dir(sub.as_fd(), &format!("{rel}/"), max_bytes, depth + 1, tree);
                }
            }
            FileType::RegularFile => match open_regular_at(dir, &name, OFlags::RDONLY) {
                Ok((file, _)) => match read_capped(&file, max_bytes) {
                    Ok(Some(bytes)) => {
                        tree.files.insert(rel, bytes);
                    }
                    Ok(None) => tree.too_big.push(rel),
                    Err(_) => tree.skipped.push(rel),
                },
                Err(_) => tree.skipped.push(rel),
            },
            _ => tree.skipped.push(rel),
        }
    }
}

/// Writes `content` to `rel` below `root` (creating directories), handing what it creates
/// to `owner`; links on the way are followed only while they stay below `root`.
pub fn put(root: &Path, rel: &str, content: &[u8], owner: Option<u32>) -> Result<(), String> {
    use std::io::Write as _;
    let loc = Workspace::open(root)
        .and_then(|ws| ws.locate(rel, Missing::Create { owner }))
        .map_err(|e| e.message(rel))?;
    // Replace rather than overwrite: the sandbox may hold the old file open or have made it
    // a hard link to something else.
    let _ = loc.remove_entry();
    let mut file = loc.create_regular(owner).map_err(|e| e.message(rel))?;
    file.write_all(content)
        .map_err(|e| format!("`{rel}` could not be written: {e}"))
}

/// Removes the entry at `rel` below `root` (a file, link or other non-directory), and then
/// any directories it leaves empty on the way up.
pub fn remove(root: &Path, rel: &str) -> Result<(), String> {
    let ws = Workspace::open(root).map_err(|e| e.message(rel))?;
    let path = Path::new(rel);
    let (Some(name), parent) = (path.file_name(), path.parent().and_then(Path::to_str)) else {
        return Err(format!("`{rel}` names no entry"));
    };
    // The entry itself is never followed: a link is removed, not what it points at.
    let dir = match parent.filter(|p| !p.is_empty()) {
        None => ws.root().try_clone_to_owned().map_err(|e| e.to_string())?,
        Some(p) => match ws.locate(p, Missing::Fail).and_then(|l| l.open_dir()) {
            Ok(d) => d,
            Err(super::files::FileError::Missing) => return Ok(()),
            Err(e) => return Err(e.message(p)),
        },
    };
    match rustix::fs::unlinkat(&dir, name, rustix::fs::AtFlags::empty()) {
        Ok(()) | Err(rustix::io::Errno::NOENT) => {}
        Err(e) => return Err(format!("`{rel}` could not be removed: {e}")),
    }
    let mut parent = Path::new(rel).parent();
    while let Some(p) = parent.filter(|p| !p.as_os_str().is_empty()) {
        let Some(s) = p.to_str() else { break };
        match ws.locate(s, Missing::Fail) {
            Ok(loc) if loc.is_empty_dir() => {
                let _ = loc.remove_dir();
            }
            _ => break,
        }
        parent = p.parent();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn walks_files_and_never_follows_links() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("store");
        std::fs::create_dir(&root).unwrap();
        put(&root, "a/b.md", b"hello", None).unwrap();
        put(&root, "top.md", b"x", None).unwrap();
        std::fs::write(dir.path().join("secret"), "host file").unwrap();
        std::os::unix::fs::symlink(dir.path().join("secret"), root.join("link.md")).unwrap();
        std::os::unix::fs::symlink(dir.path(), root.join("out")).unwrap();
        std::fs::write(root.join("big.md"), vec![b'x'; 11]).unwrap();
        let t = walk(&root, 10).unwrap();
        assert_eq!(
            t.files.keys().collect::<Vec<_>>(),
            ["a/b.md", "top.md"],
            "links are not read"
        );
        assert_eq!(t.files["a/b.md"], b"hello");
        assert_eq!(t.too_big, ["big.md"]);
        assert!(t.skipped.contains(&"link.md".to_string()));
        // Writing through a link that leaves the root is refused; the host file is untouched.
        assert!(put(&root, "out/secret", b"owned", None).is_err());
        assert_eq!(
            std::fs::read_to_string(dir.path().join("secret")).unwrap(),
            "host file"
        );
        remove(&root, "a/b.md").unwrap();
        assert!(!root.join("a").exists(), "emptied directories go too");
        remove(&root, "link.md").unwrap();
        assert!(
            dir.path().join("secret").exists(),
            "a link is removed, not its target"
        );
    }
}
