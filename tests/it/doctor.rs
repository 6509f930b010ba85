//! `mast doctor` through the real binary: one line per check, what to fix, and a failing exit
//! when something fails.

use std::process::Output;

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use serde_json::json;

use crate::keys::{StoreAt, mast_ok};
use crate::support::{Backend, TestServer};

/// A stand-in model provider answering its model list to one key.
async fn provider() -> String {
    let app = Router::new()
        .route(
            "/v1/models",
            get(|h: HeaderMap| async move {
                let key = h.get("x-api-key").and_then(|v| v.to_str().ok());
                let bearer = h.get("authorization").and_then(|v| v.to_str().ok());
                if key == Some("good-key") || bearer == Some("Bearer good-key") {
                    (
                        StatusCode::OK,
                        axum::Json(json!({"data": [{"id": "m1"}, {"id": "m2"}]})),
                    )
                } else {
                    (StatusCode::UNAUTHORIZED, axum::Json(json!({"error": "no"})))
                }
            }),
        )
        .route(
            "/models",
            get(|| async { axum::Json(json!({"data": [{"id": "llama"}]})) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// `mast doctor ARGS` with only the given provider settings (none from the caller's shell).
async fn doctor(store: &StoreAt<'_>, env: &[(&str, &str)], args: &[&str]) -> Output {
    let cwd = tempfile::TempDir::new().unwrap();
    let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mast"));
    cmd.arg("doctor").args(args).current_dir(cwd.path());
    for var in [
        "ANTHROPIC_API_KEY",
        "ANTHROPIC_AUTH_TOKEN",
        "ANTHROPIC_BASE_URL",
        "MAST_ANTHROPIC_API_KEY",
        "MAST_ANTHROPIC_AUTH_TOKEN",
        "MAST_ANTHROPIC_BASE_URL",
        "MAST_PROVIDERS",
        "MAST_CONFIG",
        "MAST_LISTEN",
        "MAST_UNSAFE_UNSANDBOXED_TOOLS",
    ] {
        cmd.env_remove(var);
    }
    match store {
        StoreAt::Sqlite(dir) => {
            cmd.env_remove("DATABASE_URL").env("MAST_DATA_DIR", dir);
        }
        StoreAt::Postgres(url) => {
            cmd.env("DATABASE_URL", url);
        }
    }
    cmd.envs(env.iter().copied());
    cmd.output().await.expect("mast doctor runs")
}

/// The report's line for `check`.
fn line<'a>(report: &'a str, check: &str) -> &'a str {
    report
        .lines()
        .find(|l| l.get(6..).is_some_and(|rest| rest.starts_with(check)))
        .unwrap_or_else(|| panic!("no `{check}` line in:\n{report}"))
}

/// The exit code says whether any check failed.
fn exit_matches(out: &Output, report: &str) {
    let failing = report.lines().any(|l| l.starts_with("FAIL"));
    assert_eq!(out.status.success(), !failing, "{report}");
}

async fn doctor_passes_beside_a_running_server(b: Backend) {
    let s = TestServer::start(b).await;
    let store = StoreAt::of(&s);
    mast_ok(&store, &["keys", "create"]).await;
    let provider = provider().await;
    let listen = s.url.trim_start_matches("http://").to_string();
    let openai =
        json!([{"name": "local", "kind": "openai", "base_url": provider, "models": ["llama"]}]);
    let out = doctor(
        &store,
        &[
            ("ANTHROPIC_BASE_URL", provider.as_str()),
            ("ANTHROPIC_API_KEY", "good-key"),
            ("MAST_PROVIDERS", &openai.to_string()),
        ],
        &["--listen", &listen],
    )
    .await;
    let report = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(line(&report, "store").starts_with("ok"), "{report}");
    assert!(
        line(&report, "store").contains("schema up to date"),
        "{report}"
    );
    assert!(line(&report, "auth").starts_with("ok"), "{report}");
    assert!(line(&report, "data dir").starts_with("ok"), "{report}");
    let listen_line = line(&report, "listen");
    assert!(
        listen_line.starts_with("ok") && listen_line.contains("a Mast server is already listening"),
        "{report}"
    );
    let anthropic = line(&report, "provider anthropic");
    assert!(
        anthropic.starts_with("ok") && anthropic.contains("2 models"),
        "{report}"
    );
    assert!(
        line(&report, "provider local").starts_with("ok"),
        "{report}"
    );
    for check in ["sandbox", "user", "cgroups"] {
        line(&report, check);
    }
    if b == Backend::Sqlite {
        assert!(
            line(&report, "data dir").contains(&format!("pid {}", std::process::id())),
            "the data directory's server is named: {report}"
        );
    }
    exit_matches(&out, &report);
}

crate::backend_tests!(doctor_passes_beside_a_running_server);

#[tokio::test]
async fn doctor_says_what_fails_and_how_to_fix_it() {
    let dir = tempfile::TempDir::new().unwrap();
    let busy = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let listen = busy.local_addr().unwrap().to_string();
    let provider = provider().await;

    // No store yet, a port another program holds, a provider refusing its key.
    let out = doctor(
        &StoreAt::Sqlite(dir.path()),
        &[
            ("ANTHROPIC_BASE_URL", provider.as_str()),
            ("ANTHROPIC_API_KEY", "bad-key"),
        ],
        &["--listen", &listen],
    )
    .await;
    let report = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(!out.status.success(), "{report}");
    assert!(line(&report, "store").starts_with("warn"), "{report}");
    assert!(
        report.contains("`mast serve` (or `mast migrate`) creates it"),
        "{report}"
    );
    assert!(
        !dir.path().join("mast.db").exists(),
        "doctor creates nothing"
    );
    let l = line(&report, "listen");
    assert!(
        l.starts_with("FAIL") && l.contains("in use by another program"),
        "{report}"
    );
    let l = line(&report, "provider anthropic");
    assert!(
        l.starts_with("FAIL") && l.contains("refused the credentials"),
        "{report}"
    );
    assert!(report.contains("fix: check ANTHROPIC_API_KEY"), "{report}");
    assert!(report.contains("failing"), "{report}");

    // An unreachable provider, a provider pointing at the server itself, a bad database.
    let free = crate::crash::free_port();
    let out = doctor(
        &StoreAt::Postgres("postgres://postgres@127.0.0.1:9/none"),
        &[("ANTHROPIC_BASE_URL", "http://127.0.0.1:9")],
        &["--listen", &format!("127.0.0.1:{free}")],
    )
    .await;
    let report = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(!out.status.success());
    let l = line(&report, "store");
    assert!(
        l.starts_with("FAIL") && l.contains("cannot read the Postgres store"),
        "{report}"
    );
    assert!(report.contains("fix: check DATABASE_URL"), "{report}");
    let l = line(&report, "provider anthropic");
    assert!(
        l.starts_with("FAIL") && l.contains("cannot reach http://127.0.0.1:9/v1/models"),
        "{report}"
    );
    assert!(line(&report, "listen").starts_with("ok"), "{report}");

    let out = doctor(
        &StoreAt::Sqlite(dir.path()),
        &[("ANTHROPIC_BASE_URL", &format!("http://127.0.0.1:{free}"))],
        &["--listen", &format!("127.0.0.1:{free}")],
    )
    .await;
    let report = String::from_utf8(out.stdout).unwrap();
    let l = line(&report, "providers");
    assert!(
        l.starts_with("FAIL") && l.contains("points at this server itself"),
        "{report}"
    );

    // No key and a public address: serve would refuse, whether the store exists yet or not.
    for migrated in [false, true] {
        if migrated {
            mast_ok(&StoreAt::Sqlite(dir.path()), &["migrate"]).await;
        }
        let out = doctor(
            &StoreAt::Sqlite(dir.path()),
            &[],
            &["--listen", &format!("0.0.0.0:{free}")],
        )
        .await;
        let report = String::from_utf8(out.stdout).unwrap();
        let l = line(&report, "auth");
        assert!(
            l.starts_with("FAIL") && l.contains("refuses to listen"),
            "{report}"
        );
        assert!(
            line(&report, "provider anthropic").starts_with("warn"),
            "{report}"
        );
    }
    drop(busy);
}
