//! The `snapshot` scenario: what a workspace checkpoint costs. For a source tree (9 MB in 800
//! files) and a virtualenv-shaped tree (about 480 MB in 25,000 files), both generated, and
//! for any tree given with `--snapshot-tree`: the first snapshot into an empty object store
//! (time and bytes stored), its restore, and a second snapshot after one file changed; beside
//! them the whole-tree copy checkpoints were before (time and bytes of disk). The snapshots
//! are of that copy, so a tree given is only read. No server runs: this is the sandbox
//! crate's code, as the server calls it.

use std::path::{Path, PathBuf};
use std::time::Instant;

use mast::tools::snapshots::{self, LocalObjects};
use mast::tools::tree_copy::{self, Budget};

/// Runs the scenario in a scratch directory under `scratch` (the system's temporary directory
/// when none is given: put it on the filesystem the data directory will be on).
pub fn run(scratch: Option<&Path>, extra: Option<&Path>) {
    let base = scratch.map_or_else(std::env::temp_dir, Path::to_path_buf);
    let dir = base.join(format!("mast-bench-snapshot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    let source = dir.join("source");
    generate(&source, 800, 9 << 20, 0);
    let venv = dir.join("venv");
    generate(&venv, 25_000, 480 << 20, 120);
    let mut trees: Vec<(String, PathBuf)> = vec![
        ("source tree (generated)".into(), source),
        ("virtualenv-shaped tree (generated)".into(), venv),
    ];
    if let Some(extra) = extra {
        trees.push((extra.display().to_string(), extra.to_path_buf()));
    }
    for (name, tree) in trees {
        measure(&name, &tree, &dir);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn mb(bytes: u64) -> String {
    if bytes < 1_000 {
        format!("{bytes} B")
    } else if bytes < 1_000_000 {
        format!("{:.1} kB", bytes as f64 / 1e3)
    } else {
        format!("{:.1} MB", bytes as f64 / 1e6)
    }
}

/// Measures one tree: a whole-tree copy of it first (the cost checkpoints had before, and the
/// tree the rest works on, so a tree given with `--snapshot-tree` is never changed), then the
/// snapshots. Every read is from a warm page cache, as a checkpoint's usually is.
fn measure(name: &str, original: &Path, scratch: &Path) {
    let tree = scratch.join(format!("copy-{}", mast::domain::ids::new_id("b")));
    let started = Instant::now();
    let c = tree_copy::copy_tree(original, &tree).expect("a copy");
    println!(
        "| whole-tree copy: {name} | {:.2} s, {} of disk ({} cloned) | — |",
        started.elapsed().as_secs_f64(),
        mb(c.disk_bytes),
        c.cloned
    );
    let tree = tree.as_path();
    let objects =
        LocalObjects::new(scratch.join(format!("objects-{}", mast::domain::ids::new_id("b"))));
    let first = snapshots::take(tree, &objects, None, Budget::UNLIMITED).expect("a snapshot");
    let s = first.stats;
    println!(
        "| snapshot: {name}, first | {} files, {}: {:.2} s, {} stored ({} objects, {} of disk) | the copy above |",
        s.files,
        mb(s.bytes),
        s.micros as f64 / 1e6,
        mb(s.new_bytes),
        s.new_objects,
        mb(disk_usage(objects.root()))
    );
    let restored = scratch.join(format!("restored-{}", mast::domain::ids::new_id("b")));
    let r = snapshots::restore(&first.manifest, &objects, &restored).expect("a restore");
    println!(
        "| snapshot: {name}, restore | {} files: {:.2} s, {} read | the copy above |",
        r.files,
        r.micros as f64 / 1e6,
        mb(r.fetched_bytes)
    );
    let _ = std::fs::remove_dir_all(&restored);
    // One file changed, as a tool call would: the largest (the worst case for a whole-file
    // store) and then a small one.
    let mut previous = first.manifest;
    for which in [Pick::Largest, Pick::Smallest] {
        // As the server does: the previous checkpoint was taken a turn before, well past the
        // guard against writes in the same clock tick.
        previous.taken_at_ns += 2 * snapshots::take::RACY_NS;
        let changed = pick(tree, which);
        let mut bytes = std::fs::read(&changed).unwrap_or_default();
        bytes.extend_from_slice(b"\n# changed\n");
        std::fs::write(&changed, bytes).expect("a change");
        let next = snapshots::take(tree, &objects, Some(&previous), Budget::UNLIMITED)
            .expect("a second snapshot");
        let s = next.stats;
        println!(
            "| snapshot: {name}, second after changing the {} file | {} unchanged, {} read: {:.3} s, {} stored | the copy above |",
            which.word(),
            s.unchanged_files,
            mb(s.read_bytes),
            s.micros as f64 / 1e6,
            mb(s.new_bytes)
        );
        previous = next.manifest;
    }
    let _ = std::fs::remove_dir_all(tree);
    let _ = std::fs::remove_dir_all(objects.root());
}

/// Bytes of disk the files under `root` take (their blocks, as `du` counts them).
fn disk_usage(root: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt as _;
    let mut total = 0;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            total += meta.blocks() * 512;
            if meta.is_dir() {
                stack.push(entry.path());
            }
        }
    }
    total
}

#[derive(Clone, Copy)]
enum Pick {
    Largest,
    Smallest,
}

impl Pick {
    fn word(self) -> &'static str {
        match self {
            Pick::Largest => "largest",
            Pick::Smallest => "smallest",
        }
    }
}

/// The largest or smallest non-empty regular file under `root`.
fn pick(root: &Path, which: Pick) -> PathBuf {
    let mut best: Option<(u64, PathBuf)> = None;
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            let t = entry.file_type().expect("a type");
            if t.is_dir() {
                stack.push(entry.path());
            } else if t.is_file() && meta.len() > 0 {
                let better = best.as_ref().is_none_or(|(n, _)| match which {
                    Pick::Largest => meta.len() > *n,
                    Pick::Smallest => meta.len() < *n,
                });
                if better {
                    best = Some((meta.len(), entry.path()));
                }
            }
        }
    }
    best.expect("a file to change").1
}

/// Writes `files` files of `bytes` in all under `root`, in nested directories: text like
/// source code (words from a small vocabulary, which compresses as code does), and `binaries`
/// of them larger and half noise (as compiled extension modules are).
fn generate(root: &Path, files: usize, bytes: u64, binaries: usize) {
    const WORDS: &[&str] = &[
        "def", "return", "self", "import", "from", "class", "if", "else", "for", "in", "None",
        "value", "data", "result", "config", "request", "item", "index", "name", "path", "(", ")",
        ":", "=", "==", "\n    ", "\n", "self.", "args", "kwargs", "0", "1", "True",
    ];
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    // Binaries take 60% of the bytes, text the rest.
    let binary_bytes = if binaries == 0 { 0 } else { bytes * 6 / 10 };
    let text_each = (bytes - binary_bytes) / (files - binaries) as u64;
    for i in 0..files {
        let dir = root
            .join(format!("pkg{}", i % 40))
            .join(format!("sub{}", (i / 40) % 12));
        std::fs::create_dir_all(&dir).expect("a directory");
        let mut body = Vec::new();
        if i < binaries {
            let size = binary_bytes / binaries as u64;
            while (body.len() as u64) < size {
                let r = next();
                if r % 2 == 0 {
                    body.extend_from_slice(&r.to_le_bytes());
                } else {
                    body.extend_from_slice(&[0u8; 8]);
                }
            }
            std::fs::write(dir.join(format!("ext{i}.so")), body).expect("a file");
        } else {
            // Sizes vary around the mean, as real files do.
            let size = text_each / 2 + next() % text_each.max(1);
            while (body.len() as u64) < size {
                body.extend_from_slice(WORDS[(next() % WORDS.len() as u64) as usize].as_bytes());
                body.push(b' ');
            }
            std::fs::write(dir.join(format!("mod{i}.py")), body).expect("a file");
        }
    }
}
