//! Content-addressed snapshots of a directory tree (a session's workspace), for checkpoints a
//! fork restores and for moving a workspace between machines.
//!
//! A snapshot is a [`Manifest`] (every directory, file and link, with modes and times) whose
//! files are lists of chunks of at most [`manifest::CHUNK_SIZE`] bytes. Chunks and manifests
//! are objects in an [`Objects`] store, each named by the SHA-256 of its bytes and compressed
//! when that helps, so what is unchanged since any earlier snapshot (of this tree or of any
//! other) is stored once: a second snapshot costs what changed. A file whose status is
//! unchanged since the previous snapshot of the same tree is not even read again.
//!
//! Objects are never removed with a snapshot, since others may share them: a [`sweep()`]
//! removes what nothing refers to.

mod codec;
pub mod manifest;
pub mod objects;
pub mod restore;
pub mod sweep;
pub mod take;

pub use manifest::Manifest;
pub use objects::{LocalObjects, Objects};
pub use restore::{RestoreStats, restore};
pub use sweep::{references, sweep};
pub use take::{TakeStats, Taken, take};

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::os::unix::fs::{PermissionsExt as _, symlink};
    use std::path::Path;
    use std::time::{Duration, SystemTime};

    use super::*;
    use crate::tree_copy::Budget;

    fn read(p: impl AsRef<Path>) -> String {
        std::fs::read_to_string(p).unwrap()
    }

    /// A tree with nested files, a large file of several chunks, an executable, an empty
    /// file and directory, and links inside and out.
    fn tree(root: &Path, outside: &Path) {
        std::fs::create_dir_all(root.join("src/deep")).unwrap();
        std::fs::create_dir_all(root.join("empty")).unwrap();
        std::fs::write(root.join("src/a.py"), "print('a')\n").unwrap();
        std::fs::write(root.join("src/deep/b.py"), "print('b')\n").unwrap();
        std::fs::write(root.join("empty.txt"), "").unwrap();
        let big: Vec<u8> = (0..(manifest::CHUNK_SIZE * 2 + 100))
            .map(|i| (i % 251) as u8)
            .collect();
        std::fs::write(root.join("big.bin"), big).unwrap();
        std::fs::write(root.join("run.sh"), "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(root.join("run.sh"), std::fs::Permissions::from_mode(0o4755))
            .unwrap();
        symlink("src/a.py", root.join("rel")).unwrap();
        symlink(outside, root.join("out")).unwrap();
    }

    #[test]
    fn a_restored_snapshot_is_the_tree_it_was_taken_of() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("secret"), "outside").unwrap();
        let src = tempfile::tempdir().unwrap();
        tree(src.path(), outside.path());
        let store = tempfile::tempdir().unwrap();
        let objects = LocalObjects::new(store.path().join("objects"));
        let taken = take(src.path(), &objects, None, Budget::UNLIMITED).unwrap();
        assert_eq!(taken.stats.files, 5);
        assert_eq!(taken.stats.unchanged_files, 0);
        // Four small files' chunks (the empty one has none), the big one's three (all
        // different), and the manifest.
        assert_eq!(taken.stats.new_objects, 7, "{:?}", taken.stats);

        let dst_parent = tempfile::tempdir().unwrap();
        let dst = dst_parent.path().join("copy");
        let stored = objects.get(&taken.key).unwrap();
        let manifest = Manifest::open(&taken.key, &stored).unwrap();
        assert_eq!(manifest, taken.manifest);
        let restored = restore(&manifest, &objects, &dst).unwrap();
        assert_eq!(restored.files, 5);
        assert_eq!(read(dst.join("src/deep/b.py")), "print('b')\n");
        assert_eq!(read(dst.join("empty.txt")), "");
        assert!(dst.join("empty").is_dir());
        assert_eq!(
            std::fs::read(dst.join("big.bin")).unwrap(),
            std::fs::read(src.path().join("big.bin")).unwrap()
        );
        let mode = std::fs::metadata(dst.join("run.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o755, "kept, without set-user-id");
        assert_eq!(std::fs::read_link(dst.join("out")).unwrap(), outside.path());
        assert_eq!(read(dst.join("rel")), "print('a')\n");
        let mtime = |p: &Path| std::fs::metadata(p).unwrap().modified().unwrap();
        assert_eq!(
            mtime(&dst.join("src/a.py")),
            mtime(&src.path().join("src/a.py"))
        );
        assert_eq!(mtime(&dst.join("src")), mtime(&src.path().join("src")));
        // What is outside was not taken: the link was not followed.
        assert!(
            !taken
                .manifest
                .nodes
                .iter()
                .any(|n| n.path.ends_with(b"secret"))
        );
        // Nothing is left beside the destination, and it is not restored over.
        assert_eq!(std::fs::read_dir(dst_parent.path()).unwrap().count(), 1);
        assert!(restore(&manifest, &objects, &dst).is_err());
    }

    #[test]
    fn a_second_snapshot_reads_and_stores_only_what_changed() {
        let outside = tempfile::tempdir().unwrap();
        let src = tempfile::tempdir().unwrap();
        tree(src.path(), outside.path());
        let store = tempfile::tempdir().unwrap();
        let objects = LocalObjects::new(store.path());
        // As if the first snapshot were taken well after the files were written.
        let mut first = take(src.path(), &objects, None, Budget::UNLIMITED).unwrap();
        first.manifest.taken_at_ns += 2 * take::RACY_NS;
        std::fs::write(src.path().join("src/a.py"), "print('changed')\n").unwrap();
        let second = take(
            src.path(),
            &objects,
            Some(&first.manifest),
            Budget::UNLIMITED,
        )
        .unwrap();
        assert_eq!(second.stats.files, 5);
        assert_eq!(second.stats.unchanged_files, 4, "{:?}", second.stats);
        assert_eq!(second.stats.read_bytes, 17);
        assert_eq!(
            second.stats.new_objects, 2,
            "the changed file and the manifest"
        );
        // Without the previous manifest every file is read, and nothing new is stored but
        // the manifest (the same tree: the same manifest but for its times).
        let third = take(src.path(), &objects, None, Budget::UNLIMITED).unwrap();
        assert_eq!(third.stats.unchanged_files, 0);
        assert_eq!(third.stats.new_objects, 1, "{:?}", third.stats);
        // A file changed less than the guard before the previous snapshot began is read
        // again.
        let mut racy = third.manifest.clone();
        racy.taken_at_ns = racy
            .nodes
            .iter()
            .filter_map(|n| match &n.kind {
                manifest::Kind::File { stat: Some(s), .. } => Some(s.ctime_ns),
                _ => None,
            })
            .min()
            .unwrap()
            + take::RACY_NS
            - 1;
        let racy = take(src.path(), &objects, Some(&racy), Budget::UNLIMITED).unwrap();
        assert_eq!(
            racy.stats.unchanged_files, 0,
            "all were written within the guard"
        );
    }

    #[test]
    fn a_tree_past_its_budget_is_refused() {
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("a"), vec![1u8; 1000]).unwrap();
        std::fs::write(src.path().join("b"), vec![2u8; 1000]).unwrap();
        let store = tempfile::tempdir().unwrap();
        let objects = LocalObjects::new(store.path());
        let within = |disk_bytes, entries| {
            take(
                src.path(),
                &objects,
                None,
                Budget {
                    disk_bytes,
                    entries,
                },
            )
        };
        let e = within(1500, 10).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::QuotaExceeded);
        let e = within(1 << 20, 1).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::QuotaExceeded);
        assert_eq!(within(2000, 2).unwrap().stats.bytes, 2000);
    }

    #[test]
    fn a_restore_refuses_a_corrupt_object_or_a_path_out_of_the_tree() {
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("f"), "hello").unwrap();
        let store = tempfile::tempdir().unwrap();
        let objects = LocalObjects::new(store.path());
        let taken = take(src.path(), &objects, None, Budget::UNLIMITED).unwrap();
        let chunk = taken.manifest.chunks().next().unwrap().to_string();
        objects.delete(&chunk).unwrap();
        objects.put(&chunk, b"\x00tampered").unwrap();
        let parent = tempfile::tempdir().unwrap();
        let e = restore(&taken.manifest, &objects, &parent.path().join("x")).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::InvalidData, "{e}");
        assert_eq!(std::fs::read_dir(parent.path()).unwrap().count(), 0);
        let mut escaping = taken.manifest.clone();
        escaping.nodes[0].path = b"../f".to_vec();
        let e = restore(&escaping, &objects, &parent.path().join("x")).unwrap_err();
        assert!(e.to_string().contains("plain relative path"), "{e}");
        let mut orphan = taken.manifest.clone();
        orphan.nodes[0].path = b"d/f".to_vec();
        assert!(restore(&orphan, &objects, &parent.path().join("x")).is_err());
    }

    #[test]
    fn a_sweep_removes_only_old_unreferenced_objects() {
        let src = tempfile::tempdir().unwrap();
        std::fs::write(src.path().join("kept"), "kept").unwrap();
        std::fs::write(src.path().join("gone"), "gone").unwrap();
        let store = tempfile::tempdir().unwrap();
        let objects = LocalObjects::new(store.path());
        let old = take(src.path(), &objects, None, Budget::UNLIMITED).unwrap();
        std::fs::remove_file(src.path().join("gone")).unwrap();
        let new = take(src.path(), &objects, None, Budget::UNLIMITED).unwrap();
        let refs = || references(&objects, [new.key.as_str()]);
        assert_eq!(refs().unwrap().len(), 2, "the manifest and one chunk");
        // Written after the cutoff: left alone.
        let s = sweep(
            &objects,
            refs,
            SystemTime::now() - Duration::from_secs(3600),
        )
        .unwrap();
        assert_eq!((s.removed, s.referenced), (0, 2));
        // The old manifest and the removed file's chunk go.
        let later = SystemTime::now() + Duration::from_secs(3600);
        let s = sweep(&objects, refs, later).unwrap();
        assert_eq!((s.removed, s.referenced), (2, 2));
        assert!(!objects.has(&old.key).unwrap());
        let parent = tempfile::tempdir().unwrap();
        restore(&new.manifest, &objects, &parent.path().join("x")).unwrap();
        // What is referenced is read after the listing: a snapshot recorded in between keeps
        // its objects.
        let none = HashSet::new();
        let again = std::cell::OnceCell::new();
        let s = sweep(
            &objects,
            || {
                let taken = take(src.path(), &objects, None, Budget::UNLIMITED)?;
                let refs = references(&objects, [taken.key.as_str(), new.key.as_str()]);
                again.set(taken).unwrap();
                refs
            },
            later,
        )
        .unwrap();
        assert_eq!(s.removed, 0, "{s:?}");
        let again = again.into_inner().unwrap();
        assert!(objects.has(&again.key).unwrap());
        // A reuse touches: an object last written long ago but reused after the cutoff
        // stays though nothing refers to it.
        let chunk = again.manifest.chunks().next().unwrap().to_string();
        let path = objects.root().join(&chunk[..2]).join(&chunk);
        let long_ago = SystemTime::now() - Duration::from_secs(7200);
        let age = |path: &Path| {
            std::fs::File::options()
                .write(true)
                .open(path)
                .unwrap()
                .set_times(std::fs::FileTimes::new().set_modified(long_ago))
                .unwrap()
        };
        let cutoff = SystemTime::now() - Duration::from_secs(3600);
        age(&path);
        objects.touch(&chunk).unwrap();
        let s = sweep(&objects, || Ok(none.clone()), cutoff).unwrap();
        assert!(objects.has(&chunk).unwrap());
        assert_eq!(s.removed, 0, "everything is newer than the cutoff: {s:?}");
        // Untouched, it would have gone.
        age(&path);
        let s = sweep(
            &objects,
            || references(&objects, [again.key.as_str()]),
            cutoff,
        )
        .unwrap();
        assert_eq!((s.removed, s.referenced), (0, 2), "referenced again: {s:?}");
        age(&path);
        sweep(&objects, || Ok(none.clone()), cutoff).unwrap();
        assert!(!objects.has(&chunk).unwrap());
        objects
            .put(
                &chunk,
                &std::fs::read(src.path().join("kept"))
                    .map(|b| codec::seal(&b).unwrap())
                    .unwrap(),
            )
            .unwrap();
        // A leftover of a write cut short goes once old.
        let fan = objects.root().join(&again.key[1..3]);
        let leftover = format!(".{}.tmp_x.partial", again.key);
        std::fs::write(fan.join(&leftover), "half").unwrap();
        let s = sweep(
            &objects,
            || references(&objects, [again.key.as_str()]),
            later,
        )
        .unwrap();
        assert_eq!(s.removed, 2, "the leftover and the other manifest: {s:?}");
        assert!(!fan.join(&leftover).exists());
    }
}
