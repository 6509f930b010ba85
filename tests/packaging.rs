//! The container build and the compose file, checked without a container runtime: the
//! Dockerfile's build stage copies every file the crates embed or build from, and the compose
//! file only starts what depends on a replica once that replica is healthy.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// What the Dockerfile's first (build) stage copies into the build, as repository paths.
fn copied() -> Vec<PathBuf> {
    let text = std::fs::read_to_string(root().join("Dockerfile")).unwrap();
    text.lines()
        .skip_while(|l| !l.starts_with("FROM "))
        .skip(1)
        .take_while(|l| !l.starts_with("FROM "))
        .filter_map(|l| l.trim().strip_prefix("COPY "))
        .filter(|l| !l.starts_with("--from"))
        .flat_map(|l| {
            let words: Vec<&str> = l.split_whitespace().collect();
            // Every word but the last is a source.
            words[..words.len() - 1]
                .iter()
                .map(|w| PathBuf::from(w.trim_start_matches("./")))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// Every Rust source file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The files and folders the crates' sources embed (`include_bytes!`, `include_str!`,
/// `sqlx::migrate!`), as repository paths.
fn embedded() -> BTreeSet<PathBuf> {
    let mut files = Vec::new();
    sources(&root().join("src"), &mut files);
    sources(&root().join("crates"), &mut files);
    let mut found = BTreeSet::new();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        for (mac, relative_to_manifest) in [
            ("include_bytes!(", false),
            ("include_str!(", false),
            ("sqlx::migrate!(", true),
        ] {
            for rest in text.split(mac).skip(1) {
                // `concat!("../assets/console/", $name)` names a folder: take its literal part.
                let Some(literal) = rest.split('"').nth(1) else {
                    continue;
                };
                let base = if relative_to_manifest {
                    crate_dir(&file)
                } else {
                    file.parent().unwrap().to_path_buf()
                };
                let path = normalise(&base.join(literal));
                found.insert(path.strip_prefix(root()).unwrap().to_path_buf());
            }
        }
    }
    found
}

/// The folder of the crate a source file belongs to (its nearest `Cargo.toml`).
fn crate_dir(file: &Path) -> PathBuf {
    let mut dir = file.parent().unwrap();
    while !dir.join("Cargo.toml").exists() {
        dir = dir.parent().unwrap();
    }
    dir.to_path_buf()
}

/// `a/b/../c` as `a/c`.
fn normalise(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other),
        }
    }
    out
}

#[test]
fn the_dockerfile_copies_everything_the_build_needs() {
    let copied = copied();
    let mut needed = embedded();
    assert!(
        needed.iter().any(|p| p.starts_with("crates/api/assets")),
        "the console's files are embedded: {needed:?}"
    );
    // The manifests and every workspace crate.
    needed.extend(["Cargo.toml", "Cargo.lock", "src/main.rs"].map(PathBuf::from));
    for entry in std::fs::read_dir(root().join("crates")).unwrap() {
        let dir = entry.unwrap().path();
        needed.insert(dir.strip_prefix(root()).unwrap().join("Cargo.toml"));
    }
    let missing: Vec<_> = needed
        .iter()
        .filter(|p| !copied.iter().any(|c| p.starts_with(c)))
        .collect();
    assert!(
        missing.is_empty(),
        "the Dockerfile's build stage copies {copied:?} but not {missing:?}"
    );
}

/// The lines of one service of the compose file.
fn service<'a>(compose: &'a str, name: &str) -> Vec<&'a str> {
    compose
        .lines()
        .skip_while(|l| !l.starts_with(&format!("  {name}:")))
        .skip(1)
        .take_while(|l| l.is_empty() || l.starts_with("    "))
        .collect()
}

/// Whether a service waits for `on` to be healthy.
fn waits_healthy(lines: &[&str], on: &str) -> bool {
    lines
        .iter()
        .skip_while(|l| l.trim() != format!("{on}:"))
        .nth(1)
        .is_some_and(|l| l.trim() == "condition: service_healthy")
}

#[test]
fn compose_starts_each_replica_once_the_one_before_is_healthy() {
    let compose = std::fs::read_to_string(root().join("docker-compose.yml")).unwrap();
    let first = service(&compose, "mast-1");
    let check = first
        .iter()
        .skip_while(|l| l.trim() != "healthcheck:")
        .find(|l| l.trim().starts_with("test:"))
        .expect("mast-1 has a health check");
    assert!(
        check.contains("\"mast\"") || check.contains("/mast\""),
        "{check}"
    );
    assert!(check.contains("\"health\""), "{check}");
    // mast-2 inherits the check (`<<: *mast`) and starts after mast-1 is healthy.
    let second = service(&compose, "mast-2");
    assert!(second.iter().any(|l| l.trim() == "<<: *mast"), "{second:?}");
    assert!(waits_healthy(&second, "mast-1"), "{second:?}");
    let nginx = service(&compose, "nginx");
    assert!(
        waits_healthy(&nginx, "mast-1") && waits_healthy(&nginx, "mast-2"),
        "{nginx:?}"
    );
}
