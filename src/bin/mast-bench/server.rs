//! The server under test: a real `mast serve` process (the binary next to this one) on
//! SQLite or on a fresh Postgres database, and what can be read of it from `/proc`.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running `mast serve`, killed and cleaned up on drop.
pub struct Server {
    child: Child,
    /// Its base URL.
    pub base: String,
    /// `sqlite` or `postgres`.
    pub backend: &'static str,
    /// The API key clients send (a Mast server is measured as it is run, with a key; the
    /// floor server has none).
    pub key: Option<String>,
    dir: PathBuf,
    /// The child is a wrapper (`MAST_BENCH_SERVER_WRAPPER`) running the server.
    wrapped: bool,
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.wrapped {
            // A profiler writes its report when the program it runs exits, so the server is
            // stopped as a deployment stops it and the wrapper left to finish.
            let _ = Command::new("kill")
                .args(["-TERM", &self.pid().to_string()])
                .status();
        } else {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Server {
    /// The server's process id (under a wrapper, that of the descendant running the `mast`
    /// binary: a profiler may start helpers of its own beside it).
    pub fn pid(&self) -> u32 {
        let root = self.child.id();
        if !self.wrapped {
            return root;
        }
        let bin = std::env::current_exe().unwrap().with_file_name("mast");
        let mut todo = vec![root];
        while let Some(pid) = todo.pop() {
            if std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == bin) {
                return pid;
            }
            let children = std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
                .unwrap_or_default();
            todo.extend(
                children
                    .split_whitespace()
                    .filter_map(|c| c.parse::<u32>().ok()),
            );
        }
        root
    }

    /// Resident memory (VmRSS) in MB.
    pub fn rss_mb(&self) -> f64 {
        let status =
            std::fs::read_to_string(format!("/proc/{}/status", self.pid())).unwrap_or_default();
        let kb: f64 = status
            .lines()
            .find(|l| l.starts_with("VmRSS:"))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        kb / 1024.0
    }

    /// CPU time (user + system) the server has used so far, in ms.
    pub fn cpu_ms(&self) -> f64 {
        let (user, system) = self.cpu_split_ms();
        user + system
    }

    /// CPU time the server has used so far in user space and in the kernel, in ms.
    pub fn cpu_split_ms(&self) -> (f64, f64) {
        let stat =
            std::fs::read_to_string(format!("/proc/{}/stat", self.pid())).unwrap_or_default();
        // Fields after the command name (which may hold spaces): state is the first, utime
        // and stime the 12th and 13th (fields 14 and 15 of proc(5)).
        let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let ticks = |i: usize| {
            fields
                .get(i)
                .and_then(|v| v.parse::<f64>().ok())
                .unwrap_or(0.0)
        };
        // Clock ticks of USER_HZ, which Linux fixes at 100 for user space.
        (ticks(11) * 10.0, ticks(12) * 10.0)
    }

    /// The server's data directory (a SQLite server's database file lives there).
    pub fn data_dir(&self) -> &std::path::Path {
        &self.dir
    }
}

async fn fresh_database(url: &str) -> String {
    use sqlx::Connection;
    let mut conn = sqlx::PgConnection::connect(url)
        .await
        .expect("connect to DATABASE_URL");
    let name = format!(
        "mast_bench_{}",
        mast::domain::ids::new_secret(8).to_lowercase()
    );
    sqlx::query(&format!("CREATE DATABASE {name}"))
        .execute(&mut conn)
        .await
        .expect("create database");
    format!(
        "{}/{name}",
        url.rsplit_once('/').map(|(b, _)| b).unwrap_or(url)
    )
}

/// The store servers use: a fresh Postgres database under DATABASE_URL, or None (SQLite).
pub async fn database() -> Option<String> {
    match std::env::var("DATABASE_URL").ok().filter(|u| !u.is_empty()) {
        Some(url) => Some(fresh_database(&url).await),
        None => None,
    }
}

/// Drops the database the run created.
pub async fn drop_database(admin: &str, db: &str) {
    use sqlx::Connection;
    let Some((_, name)) = db.rsplit_once('/') else {
        return;
    };
    if let Ok(mut conn) = sqlx::PgConnection::connect(admin).await {
        let _ = sqlx::query(&format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
            .execute(&mut conn)
            .await;
    }
}

/// Starts `mast serve` on a free port, with `env` added to its environment, and waits until
/// it answers. With `MAST_BENCH_SERVER_WRAPPER` set (a command and its arguments, split at
/// spaces, e.g. `heaptrack -o /tmp/mast`), the server runs under that command.
pub async fn start_server(database: Option<&str>, env: &[(&str, String)]) -> Server {
    let bin: PathBuf = std::env::current_exe().unwrap().with_file_name("mast");
    let (port, dir) = (free_port(), scratch_dir());
    let key = create_key(&bin, database, &dir);
    let wrapper = std::env::var("MAST_BENCH_SERVER_WRAPPER").unwrap_or_default();
    let mut words = wrapper.split_whitespace();
    let mut cmd = match words.next() {
        Some(program) => {
            let mut cmd = Command::new(program);
            cmd.args(words).arg(&bin);
            cmd
        }
        None => Command::new(&bin),
    };
    cmd.args([
        "serve",
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--data-dir",
    ])
    .arg(&dir)
    .env("MAST_LOG", "warn")
    .envs(env.iter().map(|(k, v)| (*k, v.as_str())));
    let mut server = spawn(cmd, database, port, dir, Some(key)).await;
    server.wrapped = !wrapper.trim().is_empty();
    server
}

/// Creates an API key in the store of a server about to start (`mast keys create`).
fn create_key(bin: &std::path::Path, database: Option<&str>, dir: &std::path::Path) -> String {
    let mut cmd = Command::new(bin);
    cmd.args(["keys", "create", "--data-dir"])
        .arg(dir)
        .env("MAST_LOG", "warn")
        .stderr(Stdio::null());
    match database {
        Some(url) => cmd.env("DATABASE_URL", url),
        None => cmd.env_remove("DATABASE_URL"),
    };
    let out = cmd.output().expect("run `mast keys create`");
    assert!(out.status.success(), "`mast keys create` failed");
    String::from_utf8(out.stdout)
        .expect("a key is text")
        .trim()
        .to_string()
}

/// Starts the round trip's floor server ([`crate::floor_server`], this binary run with
/// `--floor-server`) on a free port and the same store, and waits until it answers.
pub async fn start_floor_server(database: Option<&str>) -> Server {
    let (port, dir) = (free_port(), scratch_dir());
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--floor-server",
        &format!("127.0.0.1:{port}"),
        "--floor-dir",
    ])
    .arg(&dir);
    spawn(cmd, database, port, dir, None).await
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn scratch_dir() -> PathBuf {
    std::env::temp_dir().join(format!("mast-bench-{}", mast::domain::ids::new_secret(8)))
}

/// Spawns `cmd` (a server listening on `port`, its data in `dir`, answering `key`) on
/// `database` (SQLite when `None`) and waits until it answers `/healthz`.
async fn spawn(
    mut cmd: Command,
    database: Option<&str>,
    port: u16,
    dir: PathBuf,
    key: Option<String>,
) -> Server {
    cmd.stdout(Stdio::null()).stderr(Stdio::inherit());
    let backend = match database {
        Some(url) => {
            cmd.env("DATABASE_URL", url);
            "postgres"
        }
        None => {
            cmd.env_remove("DATABASE_URL");
            "sqlite"
        }
    };
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot start {:?}: {e}", cmd.get_program()));
    // From here the child is owned by `Server`, whose Drop kills and reaps it.
    let server = Server {
        child,
        base: format!("http://127.0.0.1:{port}"),
        backend,
        key,
        dir,
        wrapped: false,
    };
    for _ in 0..400 {
        if reqwest::get(format!("{}/healthz", server.base))
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            eprintln!(
                "mast-bench: server pid {} ({:?})",
                server.pid(),
                cmd.get_program()
            );
            return server;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("server did not start");
}
