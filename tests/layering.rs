//! The architecture's layering, held by the crates' manifests: each crate may depend only on
//! the Mast crates below it. The compiler then refuses any import that reaches past them; this
//! test refuses a manifest that widens what a crate may reach.

use std::collections::BTreeSet;
use std::path::Path;

/// Each crate with the Mast crates it may depend on.
const ALLOWED: &[(&str, &[&str])] = &[
    ("mast-domain", &[]),
    ("mast-store", &["mast-domain"]),
    ("mast-sandbox", &["mast-domain"]),
    ("mast-models", &["mast-domain"]),
    (
        "mast-engine",
        &["mast-domain", "mast-store", "mast-sandbox", "mast-models"],
    ),
    ("mast-api", &["mast-domain", "mast-engine"]),
];

/// The Mast crates a manifest depends on, in any of its dependency tables.
fn mast_dependencies(manifest: &Path) -> BTreeSet<String> {
    let text = std::fs::read_to_string(manifest).unwrap();
    let doc: toml::Table = toml::from_str(&text).unwrap();
    ["dependencies", "dev-dependencies", "build-dependencies"]
        .iter()
        .filter_map(|t| doc.get(*t).and_then(|v| v.as_table()))
        .flat_map(|t| t.keys())
        .filter(|k| k.starts_with("mast-"))
        .cloned()
        .collect()
}

#[test]
fn each_crate_depends_only_on_the_layers_below_it() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let mut seen = BTreeSet::new();
    for entry in std::fs::read_dir(root.join("crates")).unwrap() {
        let manifest = entry.unwrap().path().join("Cargo.toml");
        let doc: toml::Table =
            toml::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
        let name = doc["package"]["name"].as_str().unwrap().to_string();
        let allowed: BTreeSet<String> = ALLOWED
            .iter()
            .find(|(n, _)| *n == name)
            .unwrap_or_else(|| panic!("{name} is not placed in the layering: add it to ALLOWED"))
            .1
            .iter()
            .map(|s| s.to_string())
            .collect();
        let actual = mast_dependencies(&manifest);
        let beyond: Vec<_> = actual.difference(&allowed).collect();
        assert!(
            beyond.is_empty(),
            "{name} depends on {beyond:?}, past the layers below it ({allowed:?})"
        );
        seen.insert(name);
    }
    let expected: BTreeSet<String> = ALLOWED.iter().map(|(n, _)| n.to_string()).collect();
    assert_eq!(seen, expected, "every layer is a crate under crates/");
}
