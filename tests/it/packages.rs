//! Environment packages: real installs from the registries this machine reaches (pip, npm and
//! apt), one layer built once for sessions starting together, importable and runnable in
//! the sandbox, and a misspelt package reported with the installer's own words.
//!
//! The registries may resolve to reserved addresses here (a test network's interception
//! proxy), so these servers let exactly those hosts through with the private allowlist
//! (`MAST_ALLOW_PRIVATE_HOSTS`) instead of opening every private address.

use serde_json::{Value, json};

use crate::backend_tests;
use crate::support::sse::Stream;
use crate::support::{Backend, Options, TestServer};
use crate::toolset::{call, results, steps, toolset};

backend_tests!(
    packages_install_once_into_a_shared_layer,
    a_misspelt_package_fails_with_the_installers_words,
);

/// The registry hosts the installs below reach.
const REGISTRIES: &[&str] = &[
    "pypi.org",
    "files.pythonhosted.org",
    "registry.npmjs.org",
    "deb.debian.org",
];

async fn server(b: Backend) -> TestServer {
    TestServer::start_with(
        b,
        Options {
            allow_private_network: false,
            allow_private_hosts: REGISTRIES.iter().map(|h| h.to_string()).collect(),
            ..Options::default()
        },
    )
    .await
}

/// A session of environment `env` with a bash tool, and its stream.
async fn session(s: &TestServer, env: &str) -> (String, Stream) {
    let agent = s
        .client
        .post(
            "/v1/agents",
            json!({"name": "worker", "model": "mast-scripted", "tools": toolset(json!([]), "always_allow")}),
        )
        .await
        .ok();
    let id = s
        .client
        .post(
            "/v1/sessions",
            json!({"agent": agent["id"], "environment_id": env}),
        )
        .await
        .ok()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let st = Stream::open(
        &s.url,
        &format!("/v1/sessions/{id}/events/stream"),
        None,
        &[],
    )
    .await;
    (id, st)
}

async fn environment(s: &TestServer, packages: Value) -> String {
    let env = s
        .client
        .post(
            "/v1/environments",
            json!({"name": format!("pk-{}", mast::domain::ids::new_secret(6)), "config": {
                "type": "cloud",
                "networking": {"type": "limited", "allow_package_managers": true},
                "packages": packages,
            }}),
        )
        .await
        .ok();
    assert_eq!(env["config"]["packages"]["type"], "packages");
    env["id"].as_str().unwrap().to_string()
}

async fn packages_install_once_into_a_shared_layer(b: Backend) {
    let s = server(b).await;
    let env = environment(
        &s,
        json!({"pip": ["iniconfig==2.0.0"], "npm": ["is-number@7.0.0"], "apt": ["hello"]}),
    )
    .await;
    let script = steps(&[call(
        "bash",
        json!({"command": "python3 -c 'import iniconfig; print(\"pip\", iniconfig.__name__)'; \
            node -e 'console.log(\"npm\", require(\"is-number\")(5))'; hello; \
            touch /opt/mast/packages/x 2>/dev/null || echo read-only"}),
    )]);
    // Two sessions of the environment start together: one build, both wait for it.
    let (id1, mut st1) = session(&s, &env).await;
    let (id2, mut st2) = session(&s, &env).await;
    s.client.say(&id1, &script).await;
    s.client.say(&id2, &script).await;
    tokio::join!(st1.until_idle(300), st2.until_idle(300));
    for st in [&st1, &st2] {
        let r = results(&st.seen);
        assert!(!r[0].1, "{}", r[0].0);
        assert_eq!(
            r[0].0, "pip iniconfig\nnpm true\nHello, world!\nread-only\n[exit code 0]",
            "installed packages are found in the sandbox"
        );
    }
    let log = std::fs::read_to_string(s.data_dir.join("package-layers/builds.log")).unwrap();
    assert_eq!(log.matches(" built in ").count(), 1, "one build: {log}");
    assert!(!log.contains("failed"), "{log}");
}

async fn a_misspelt_package_fails_with_the_installers_words(b: Backend) {
    let s = server(b).await;
    let env = environment(&s, json!({"pip": ["mast-no-such-package-zqx"]})).await;
    let (id, mut st) = session(&s, &env).await;
    let script = steps(&[
        call("bash", json!({"command": "echo never"})),
        call("bash", json!({"command": "echo still never"})),
    ]);
    s.client.say(&id, &script).await;
    st.until_idle(300).await;
    let r = results(&st.seen);
    for (text, is_error) in &r[..2] {
        assert!(*is_error, "{text}");
        assert!(
            text.starts_with(
                "installing the environment's pip packages failed (`mast-no-such-package-zqx`); the installer's last lines:"
            ) && text.contains("No matching distribution found for mast-no-such-package-zqx"),
            "{text}"
        );
    }
    let errors: Vec<&Value> = st
        .seen
        .iter()
        .filter(|e| e["type"] == "session.error")
        .collect();
    assert_eq!(errors.len(), 1, "reported once: {errors:?}");
    assert_eq!(errors[0]["error"]["type"], "unknown_error");
    assert!(
        errors[0]["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`mast-no-such-package-zqx`")
    );
    let log = std::fs::read_to_string(s.data_dir.join("package-layers/builds.log")).unwrap();
    assert_eq!(
        log.matches(" failed: ").count(),
        1,
        "the failure is remembered: {log}"
    );
}
