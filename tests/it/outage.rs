//! The database goes away under load and comes back: requests fail fast with 503, open
//! streams carry on, and every session finishes once the database returns.

use std::path::PathBuf;
use std::process::Command;

use serde_json::json;

use crate::crash::check_log;
use crate::support::sse::Stream;
use crate::support::{Backend, Options, TestServer, eventually, test_config};

/// A Postgres cluster of the test's own, which it may stop and start.
struct PrivatePostgres {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
}

impl PrivatePostgres {
    /// A fresh cluster, or None (saying why) where this machine cannot make one.
    fn create() -> Option<Self> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
            .filter(|b| b.join("initdb").exists())
            .max()?;
        let dir = tempfile::TempDir::new().ok()?;
        let pg = PrivatePostgres {
            port: crate::crash::free_port(),
            dir,
            bin,
        };
        if as_root() {
            // Postgres refuses to run as root: the cluster belongs to the postgres user.
            Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(pg.dir.path())
                .status()
                .ok()?
                .success()
                .then_some(())?;
        }
        let data = pg.data();
        pg.run("initdb", &["-A", "trust", "-U", "postgres", "-D", &data])
            .then_some(pg)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn run(&self, tool: &str, args: &[&str]) -> bool {
        let program = self.bin.join(tool);
        let mut cmd = if as_root() {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(program);
            c
        } else {
            Command::new(program)
        };
        cmd.args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }

    fn start(&self) {
        let opts = format!(
            "-p {} -k {} -c listen_addresses=127.0.0.1",
            self.port,
            self.dir.path().display()
        );
        assert!(
            self.run("pg_ctl", &["-D", &self.data(), "-o", &opts, "-w", "start"]),
            "the private cluster starts"
        );
    }

    fn stop(&self) {
        assert!(self.run("pg_ctl", &["-D", &self.data(), "-m", "fast", "-w", "stop"]));
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }
}

impl Drop for PrivatePostgres {
    fn drop(&mut self) {
        self.run(
            "pg_ctl",
            &["-D", &self.data(), "-m", "immediate", "-w", "stop"],
        );
    }
}

fn as_root() -> bool {
    mast::tools::identity::running_as_root()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_database_restarting_under_load() {
    let Some(pg) = PrivatePostgres::create() else {
        assert!(
            std::env::var("MAST_REQUIRE_POSTGRES").is_err(),
            "no PostgreSQL binaries to run a private cluster with"
        );
        mast::tools::test_env::cannot_run_here("no PostgreSQL binaries under /usr/lib/postgresql");
        return;
    };
    pg.start();
    let dir = tempfile::TempDir::new().unwrap();
    let config = test_config(
        dir.path().to_path_buf(),
        Some(pg.url()),
        &Options::default(),
    );
    let s = TestServer::boot(config, Backend::Postgres).await;
    let c = &s.client;
    let agent = c.agent(json!([])).await;
    let mut sessions = Vec::new();
    for i in 0..5 {
        let sid = c.session(&agent).await["id"].as_str().unwrap().to_string();
        let st = Stream::open(
            &s.url,
            &format!("/v1/sessions/{sid}/events/stream"),
            None,
            &[],
        )
        .await;
        c.say(&sid, &format!("sleep 2500\nsay finished {i}")).await;
        sessions.push((sid, st));
    }
    for (_, st) in &mut sessions {
        st.until(20, |e| e["type"] == "span.model_request_start")
            .await;
    }

    pg.stop();
    for path in ["/v1/agents", &format!("/v1/sessions/{}", sessions[0].0)] {
        let started = std::time::Instant::now();
        let msg = c.get(path).await.err(503);
        assert!(
            started.elapsed().as_secs() < 10,
            "{path} failed fast ({:?})",
            started.elapsed()
        );
        assert!(msg.contains("database"), "{msg}");
    }
    let resp = c.get("/v1/agents").await;
    assert_eq!(resp.body["error"]["type"], "api_error");
    assert_eq!(c.get("/readyz").await.status, 503);
    assert_eq!(c.get("/healthz").await.status, 200);
    tokio::time::sleep(std::time::Duration::from_secs(2)).await;

    pg.start();
    eventually(30, "requests to succeed again", || async {
        (c.get("/v1/agents").await.status == 200).then_some(())
    })
    .await;
    // No runner is lost: every turn in flight during the outage finishes, and the streams
    // opened before it carry the rest.
    for (i, (sid, st)) in sessions.iter_mut().enumerate() {
        let idle = st.until_idle(60).await;
        assert_eq!(idle["stop_reason"]["type"], "end_turn");
        let log = c.all_events(sid).await;
        check_log(&log);
        let said: Vec<_> = log
            .iter()
            .filter(|e| e["type"] == "agent.message")
            .collect();
        assert_eq!(said.len(), 1, "{sid}");
        assert_eq!(said[0]["content"][0]["text"], format!("finished {i}"));
    }
}
