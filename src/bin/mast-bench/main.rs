//! `mast-bench`: a benchmark harness. It starts a real `mast serve` (the binary next to this
//! one; SQLite, or Postgres when `DATABASE_URL` is set — a fresh database is created on that
//! server) and measures, with the scripted model, each figure beside its target or floor:
//!
//! - `latency`: one session, `user.message` posted → `session.status_idle` seen on SSE, for a
//!   plain turn and for a whole custom-tool round trip, and the server's CPU per turn, beside
//!   the same figures of a minimal server doing the same I/O (the round trip's floor);
//! - `realistic`: the same with a 20 KB system prompt and 10 tool schemas, plus `history`;
//! - `history`: a turn at position 1,000 of one session against one at position 10;
//! - `throughput`: N sessions doing turns concurrently: turns/s and events/s, as a share of
//!   the store's floor (raw single-row JSON inserts) measured in the same run;
//! - `fanout`: S subscribers on one session: delay from an event's `processed_at` to arrival;
//! - `idle`: server RSS with K sessions idle on `requires_action`;
//! - `active`: N sessions running at once on a slow model: server RSS and event delay;
//! - `compaction`: a turn that compacts the context beside one that does not;
//! - `soak`: N long sessions doing custom-tool round trips for 30 minutes: the server's RSS
//!   over time, its plateau and what it keeps after the load, against `--ceiling-mb`;
//! - `workflow`: one workflow run of N agents (wall time, CPU and RSS per agent), then
//!   sessions idle with an open run paused (their RSS, and CPU while they sit);
//! - `snapshot` (no server): workspace checkpoint snapshots of a source tree and a
//!   virtualenv-shaped tree, their restore and a second snapshot, beside a whole-tree copy.
//!
//! `MAST_BENCH_SERVER_WRAPPER` runs the server under a command (e.g. `heaptrack -o FILE`):
//! the harness then measures the wrapped `mast` process and stops it with SIGTERM.
//!
//! Run: `cargo build --release && ulimit -n 65536 && target/release/mast-bench --scenario all`.

mod active;
mod api;
mod compaction;
mod fanout;
mod floor;
mod floor_server;
mod history;
mod idle;
mod latency;
mod server;
mod snapshot;
mod soak;
mod throughput;
mod workflow;

use clap::Parser;

use api::{Agent, Api};

#[derive(Debug, Parser)]
#[command(
    name = "mast-bench",
    about = "Benchmarks a real mast server with the scripted model"
)]
struct Args {
    /// latency | realistic | history | throughput | fanout | idle | active | compaction | soak |
    /// workflow | snapshot | all (`all` runs every scenario but `active`, `compaction`,
    /// `soak`, `workflow` and `snapshot`, which have servers of their own or none: run them
    /// alone)
    #[arg(long, default_value = "all")]
    scenario: String,
    /// Measured turns in the latency scenario (after 20 warm-up turns).
    #[arg(long, default_value_t = 300)]
    turns: usize,
    /// Turns per session in the latency scenario before starting a fresh session.
    #[arg(long, default_value_t = 10)]
    turns_per_session: usize,
    /// The position of the late turns in the history scenario.
    #[arg(long, default_value_t = 1000)]
    depth: usize,
    /// Turns measured at each position in the history scenario (half plain turns, half
    /// custom-tool round trips).
    #[arg(long, default_value_t = 120)]
    window: usize,
    /// Concurrent sessions in the throughput scenario.
    #[arg(long, default_value_t = 50)]
    sessions: usize,
    /// Seconds the throughput scenario (and the store floor before it) runs.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Connections of the Postgres store floor; default: Mast's own, 16. (The SQLite floor
    /// always uses one, as Mast's store has one writer.)
    #[arg(long)]
    floor_connections: Option<usize>,
    /// Where the snapshot scenario writes its trees and objects (a filesystem like the data
    /// directory's; the system's temporary directory by default).
    #[arg(long)]
    snapshot_dir: Option<std::path::PathBuf>,
    /// A tree the snapshot scenario measures too (a real virtualenv, a checkout).
    #[arg(long)]
    snapshot_tree: Option<std::path::PathBuf>,
    /// Agents of the workflow scenario's run.
    #[arg(long, default_value_t = 200)]
    workflow_agents: usize,
    /// Sessions of the workflow scenario left idle with a paused run.
    #[arg(long, default_value_t = 100)]
    workflow_paused: usize,
    /// Sessions left idle on requires_action in the idle scenario.
    #[arg(long, default_value_t = 10_000)]
    idle_sessions: usize,
    /// Subscribers in the fan-out scenario.
    #[arg(long, default_value_t = 1000)]
    subscribers: usize,
    /// Sessions running at once in the active scenario.
    #[arg(long, default_value_t = 10_000)]
    active_sessions: usize,
    /// Sessions of the active scenario whose streams are read for event delays.
    #[arg(long, default_value_t = 200)]
    active_streams: usize,
    /// How long each active session's model takes, in ms.
    #[arg(long, default_value_t = 30_000)]
    active_sleep_ms: u64,
    /// Measured turns of the compaction scenario (after 10 warm-up turns).
    #[arg(long, default_value_t = 200)]
    compaction_turns: usize,
    /// Sessions doing custom-tool round trips at once in the soak scenario.
    #[arg(long, default_value_t = 10)]
    soak_sessions: usize,
    /// Minutes the soak scenario's round trips go on (fractions allowed).
    #[arg(long, default_value_t = 30.0)]
    soak_minutes: f64,
    /// Seconds between two samples of the server's memory in the soak scenario.
    #[arg(long, default_value_t = 5)]
    soak_sample_secs: u64,
    /// Seconds the soak scenario watches the server after its load stops.
    #[arg(long, default_value_t = 60)]
    soak_rest_secs: u64,
    /// The soak scenario fails (exit status 1) when the server's RSS passes this many MB at
    /// any point of the run. The default is the ceiling BENCHMARKS.md documents for 10
    /// sessions on SQLite: about 1.3 times the highest RSS measured, and below what the history
    /// cache's budget alone would take on top of the server at start, so entries that grow
    /// with their sessions again fail it.
    #[arg(long, default_value_t = 80.0)]
    ceiling_mb: f64,
    /// Server processes on one Postgres database (DATABASE_URL); the throughput scenario
    /// posts each session's messages to one replica and streams it from the next.
    #[arg(long, default_value_t = 1)]
    replicas: usize,
    /// Runs as the round trip's floor server on this address (started by the latency
    /// scenario itself).
    #[arg(long, hide = true)]
    floor_server: Option<String>,
    /// The floor server's SQLite directory.
    #[arg(long, hide = true)]
    floor_dir: Option<std::path::PathBuf>,
}

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if let Some(listen) = &args.floor_server {
        let dir = args.floor_dir.clone().unwrap_or_else(std::env::temp_dir);
        floor_server::serve(listen, &dir).await;
        return;
    }
    if args.scenario == "snapshot" {
        println!("| scenario | result | before |\n|---|---|---|");
        snapshot::run(args.snapshot_dir.as_deref(), args.snapshot_tree.as_deref());
        return;
    }
    let all = args.scenario == "all";
    let run = |name: &str| all || args.scenario == name;
    let db = server::database().await;
    if args.replicas > 1 && db.is_none() {
        panic!("--replicas needs DATABASE_URL: replicas share one Postgres");
    }
    // The compaction and soak scenarios' servers have a small context window for the
    // scripted model.
    let server_env = match args.scenario.as_str() {
        "compaction" => compaction::server_env(),
        "soak" => soak::server_env(),
        _ => vec![],
    };
    let mut servers = Vec::new();
    for _ in 0..args.replicas.max(1) {
        servers.push(server::start_server(db.as_deref(), &server_env).await);
    }
    let http = reqwest::Client::builder()
        .pool_max_idle_per_host(256)
        .build()
        .unwrap();
    let apis: Vec<Api> = servers.iter().map(|s| Api::of(&http, s)).collect();
    let (server, api) = (&servers[0], &apis[0]);
    println!(
        "| scenario ({} store, {} replica{}) | result | target / floor |\n|---|---|---|",
        server.backend,
        servers.len(),
        if servers.len() == 1 { "" } else { "s" }
    );
    let per = args.turns_per_session;
    // The floor's series, measured once for both scenarios that print it.
    let mut floor = if run("latency") || run("realistic") {
        Some(latency::floor(&http, db.as_deref(), args.turns, per).await)
    } else {
        None
    };
    if run("latency") {
        let floor = floor.as_mut().expect("measured above");
        latency::run(api, server, Agent::Plain, args.turns, per, floor).await;
    }
    if run("history") {
        history::run(api, Agent::Plain, args.depth, args.window).await;
    }
    if run("realistic") {
        let floor = floor.as_mut().expect("measured above");
        latency::run(api, server, Agent::Realistic, args.turns, per, floor).await;
        history::run(api, Agent::Realistic, args.depth, args.window).await;
    }
    if run("throughput") {
        let connections = match db {
            Some(_) => args.floor_connections.unwrap_or(16),
            None => 1,
        };
        let floor = match &db {
            Some(url) => floor::postgres(url, connections, args.seconds).await,
            None => floor::sqlite(&server.data_dir().join("floor"), args.seconds).await,
        };
        let events = throughput::run(&apis, args.sessions, args.seconds).await;
        let store = match &db {
            Some(_) => format!("{connections} connection(s)"),
            None => format!(
                "{connections} connection(s), synchronous = {}",
                floor::sqlite_synchronous()
            ),
        };
        throughput::share(server.backend, floor, &store, events);
    }
    if run("fanout") {
        fanout::run(api, args.subscribers).await;
    }
    if run("idle") {
        if all {
            // After the other scenarios the server holds what they left (the history
            // cache, memory the allocator keeps): the idle figure gets a server of its own.
            let fresh = server::start_server(db.as_deref(), &server_env).await;
            let api = Api::of(&http, &fresh);
            idle::run(&api, &fresh, args.idle_sessions).await;
        } else {
            idle::run(api, server, args.idle_sessions).await;
        }
    }
    if args.scenario == "active" {
        active::run(
            api,
            server,
            args.active_sessions,
            args.active_streams,
            args.active_sleep_ms,
        )
        .await;
    }
    if args.scenario == "compaction" {
        compaction::run(api, server, args.compaction_turns).await;
    }
    if args.scenario == "workflow" {
        workflow::run(api, server, args.workflow_agents, args.workflow_paused).await;
    }
    let mut failed = false;
    if args.scenario == "soak" {
        let options = soak::Options {
            sessions: args.soak_sessions,
            duration: std::time::Duration::from_secs_f64(args.soak_minutes * 60.0),
            sample: std::time::Duration::from_secs(args.soak_sample_secs.max(1)),
            rest: std::time::Duration::from_secs(args.soak_rest_secs),
            ceiling_mb: args.ceiling_mb,
        };
        failed = !soak::run(api, server, &options).await;
    }
    drop(apis);
    drop(servers);
    if let (Some(db), Ok(admin)) = (db, std::env::var("DATABASE_URL")) {
        server::drop_database(&admin, &db).await;
    }
    if failed {
        std::process::exit(1);
    }
}
