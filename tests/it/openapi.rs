//! The committed OpenAPI document must equal the one generated from the handlers' types.

#[test]
fn committed_openapi_matches_the_code() {
    let generated = mast::api::openapi::document();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi/openapi.json");
    let committed = std::fs::read_to_string(path).unwrap_or_default();
    if committed != generated {
        if std::env::var("MAST_UPDATE_OPENAPI").is_ok() {
            std::fs::write(path, &generated).unwrap();
            return;
        }
        panic!(
            "openapi/openapi.json is stale: run `MAST_UPDATE_OPENAPI=1 cargo test --test it openapi` (or `cargo run -- openapi > openapi/openapi.json`)"
        );
    }
    let doc: serde_json::Value = serde_json::from_str(&generated).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");
    for path in [
        "/v1/agents",
        "/v1/environments/{environment_id}",
        "/v1/sessions",
        "/v1/sessions/{session_id}/events/stream",
    ] {
        assert!(doc["paths"].get(path).is_some(), "{path} documented");
    }
    // Generated clients name methods after operation ids: each is unique, and every operation
    // and parameter says what it is for.
    let mut ids = std::collections::HashSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for (method, op) in item.as_object().unwrap() {
            let id = op["operationId"].as_str().unwrap_or_default();
            assert!(!id.is_empty(), "{method} {path} has an operation id");
            assert!(ids.insert(id.to_string()), "operation id `{id}` repeats");
            for field in ["summary", "description"] {
                assert!(
                    op[field].as_str().is_some_and(|s| !s.is_empty()),
                    "{method} {path} has a {field}"
                );
            }
            for p in op["parameters"].as_array().into_iter().flatten() {
                assert!(
                    p["description"].as_str().is_some_and(|s| !s.is_empty()),
                    "{method} {path}: parameter {} is described",
                    p["name"]
                );
            }
        }
    }
}
