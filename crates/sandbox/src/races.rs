//! Races a sandboxed command can run against the server's own file work: while a tool works in
//! the workspace, the sandbox (running in parallel in another thread of the session) swaps
//! directories for symbolic links to the host. Nothing the server does there may then land on
//! the host. These tests need root, to hand files to a session's user as the server does.

use std::os::fd::OwnedFd;
use std::os::unix::fs::{MetadataExt, symlink};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rustix::fs::{AtFlags, Mode, OFlags, RenameFlags};
use serde_json::json;

use super::egress::EgressPolicy;
use super::netguard::NetGuard;
use super::sandbox::{Isolation, Limits};
use super::{SessionTools, Toolbox, ToolsConfig, identity};
use mast_domain::environment::EnvironmentConfig;

/// How long a race runs. Before writes gave what they created away through handles, the first
/// host entry was given away within 250 write calls (a few tens of milliseconds); this is
/// tens of thousands.
const RACE_FOR: Duration = Duration::from_secs(2);
/// Names the writers cycle through (each made and removed again), and the host directory holds.
const NAMES: usize = 50;

/// The tools of a session whose sandbox runs as its own user, as on a server running as root.
fn session_tools(workspace: &Path, state: &Path, session_id: &str) -> SessionTools {
    SessionTools {
        session_id: session_id.into(),
        workspace: workspace.to_path_buf(),
        state_dir: state.to_path_buf(),
        isolation: Isolation::Bubblewrap,
        limits: Limits::default(),
        helper: PathBuf::from("mast"),
        egress: EgressPolicy::Limited(vec![]),
        user: Some(identity::session_uid(session_id)),
        accounts: state.to_path_buf(),
        netguard: NetGuard::default(),
        mounts: Default::default(),
        packages: None,
        configs: vec![],
        search_url: None,
        calls: Default::default(),
    }
}

/// The host's entries under `dir` (itself included) that no longer belong to root, or that
/// were not there before (`expected`).
fn tampered(dir: &Path, expected: usize) -> Vec<String> {
    let mut bad = Vec::new();
    let mut seen = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(p) = stack.pop() {
        let meta = std::fs::symlink_metadata(&p).unwrap();
        seen += 1;
        if meta.uid() != 0 || meta.gid() != 0 {
            bad.push(format!("{} is now owned by {}", p.display(), meta.uid()));
        }
        if meta.is_dir() {
            stack.extend(std::fs::read_dir(&p).unwrap().map(|e| e.unwrap().path()));
        }
    }
    if seen != expected {
        bad.push(format!("{expected} host entries became {seen}"));
    }
    bad
}

/// Swaps `ws/d` between a real directory and a link to `host` until told to stop; returns how
/// many swaps it made. Each swap is one atomic exchange, so `d` is always there.
fn swap_in_a_loop(ws: PathBuf, host: PathBuf, stop: Arc<AtomicBool>) -> usize {
    let dir = rustix::fs::open(&ws, OFlags::DIRECTORY, Mode::empty()).unwrap();
    symlink(&host, ws.join("link")).unwrap();
    let mut swaps = 0;
    while !stop.load(Ordering::Relaxed) {
        rustix::fs::renameat_with(&dir, "d", &dir, "link", RenameFlags::EXCHANGE).unwrap();
        swaps += 1;
    }
    swaps
}

/// What one writer did: write calls made, calls that wrote, and the first host entry it gave
/// away (the writer stops there).
#[derive(Debug)]
struct Writes {
    calls: usize,
    written: usize,
    gave_away: Option<String>,
}

/// Writes `d/tK` (or, with `dirs`, `d/sK/f`) for K cycling through [`NAMES`] for
/// [`RACE_FOR`], removing each again through `real` (a handle on the real `d`, wherever the
/// racer has moved it) so the next round creates it anew.
async fn write_in_a_loop(
    tools: Arc<SessionTools>,
    real: Arc<OwnedFd>,
    host: PathBuf,
    dirs: bool,
) -> Writes {
    let mut w = Writes {
        calls: 0,
        written: 0,
        gave_away: None,
    };
    let started = Instant::now();
    while started.elapsed() < RACE_FOR {
        let name = match dirs {
            true => format!("s{}", w.calls % NAMES),
            false => format!("t{}", w.calls % NAMES),
        };
        let file_path = match dirs {
            true => format!("d/{name}/f"),
            false => format!("d/{name}"),
        };
        let out = tools
            .run(
                "write",
                &json!({"file_path": file_path, "content": "x"}),
                super::Approval::Granted,
            )
            .await;
        w.calls += 1;
        w.written += usize::from(!out.is_error);
        if std::fs::symlink_metadata(host.join(&name)).unwrap().uid() != 0 {
            w.gave_away = Some(name);
            break;
        }
        if dirs {
            let _ = rustix::fs::unlinkat(&*real, format!("{name}/f"), AtFlags::empty());
        }
        let flags = if dirs {
            AtFlags::REMOVEDIR
        } else {
            AtFlags::empty()
        };
        let _ = rustix::fs::unlinkat(&*real, name, flags);
    }
    w
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_link_never_gives_host_files_away() {
    if !identity::running_as_root() {
        crate::test_env::cannot_run_here("handing files to a session's user needs root");
        return;
    }
    let (ws, state, host) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    // The host directory holds what the writes name: files `tK` and directories `sK`.
    for k in 0..NAMES {
        std::fs::write(host.path().join(format!("t{k}")), "host").unwrap();
        std::fs::create_dir(host.path().join(format!("s{k}"))).unwrap();
    }
    let expected = 1 + 2 * NAMES;
    std::fs::create_dir(ws.path().join("d")).unwrap();
    let real =
        Arc::new(rustix::fs::open(ws.path().join("d"), OFlags::DIRECTORY, Mode::empty()).unwrap());
    let tools = Arc::new(session_tools(ws.path(), state.path(), "sesn_race"));
    let stop = Arc::new(AtomicBool::new(false));
    let racer = std::thread::spawn({
        let (ws, host, stop) = (ws.path().into(), host.path().into(), stop.clone());
        move || swap_in_a_loop(ws, host, stop)
    });
    // Two writers, as two threads of one session: new files, and files in new directories.
    let writer = |dirs| {
        tokio::spawn(write_in_a_loop(
            tools.clone(),
            real.clone(),
            host.path().into(),
            dirs,
        ))
    };
    let (files, dirs) = (writer(false), writer(true));
    let (files, dirs) = (files.await.unwrap(), dirs.await.unwrap());
    stop.store(true, Ordering::Relaxed);
    let swaps = racer.join().unwrap();
    eprintln!("{files:?} {dirs:?}; {swaps} swaps");
    let bad = tampered(host.path(), expected);
    assert!(bad.is_empty(), "{files:?} {dirs:?}: {bad:?}");
    // The race was run: writes got through while the directory was real.
    assert!(files.written > 0 && dirs.written > 0, "{files:?} {dirs:?}");
}

/// A server of sandboxes with users of their own, keeping its data in `data`.
fn toolbox(data: &Path) -> Toolbox {
    let config = ToolsConfig::default();
    let protections = super::protections::Protections::assess(&super::protections::Setup {
        isolation: &Isolation::Bubblewrap,
        unreachable: None,
        session_users: true,
        limits: &config.limits,
        cgroups: super::cgroup::host(),
        seccomp: Err("not under test".into()),
        allow_private_network: false,
    });
    Toolbox {
        isolation: Isolation::Bubblewrap,
        checkpoints: super::checkpoints::Checkpoints::new(
            data,
            config.workspace_checkpoints,
            super::checkpoints::Checkpoints::cap_of(&config.limits),
        ),
        data_dir: data.to_path_buf(),
        config,
        session_users: true,
        unreachable: None,
        protections,
        private_allow: &[],
        layers: Arc::new(super::packages::Layers::new(
            data.join("package-layers"),
            super::packages::PackagesConfig::default(),
            super::packages::InstallSandbox {
                isolation: Isolation::Bubblewrap,
                helper: "mast".into(),
                accounts: data.join("sandbox-etc"),
                netguard: NetGuard::default(),
                limits: Limits::default(),
            },
        )),
        session_calls: Default::default(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handing_over_a_workspace_never_gives_host_files_away() {
    if !identity::running_as_root() {
        crate::test_env::cannot_run_here("handing files to a session's user needs root");
        return;
    }
    let (data, host) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let sid = "sesn_legacy";
    let ws = data.path().join("workspaces").join(sid);
    // A workspace from before sandboxes had users of their own, naming what the host holds.
    std::fs::create_dir_all(ws.join("d/sub")).unwrap();
    std::fs::create_dir(host.path().join("sub")).unwrap();
    for k in 0..NAMES {
        std::fs::write(ws.join(format!("d/t{k}")), "old").unwrap();
        std::fs::write(host.path().join(format!("t{k}")), "host").unwrap();
    }
    let expected = 2 + NAMES;
    let tools = toolbox(data.path());
    let env = EnvironmentConfig::default_cloud();
    let stop = Arc::new(AtomicBool::new(false));
    let racer = std::thread::spawn({
        let (ws, host, stop) = (ws.clone(), host.path().into(), stop.clone());
        move || swap_in_a_loop(ws, host, stop)
    });
    let started = Instant::now();
    let (mut rounds, mut prepared) = (0, 0);
    while started.elapsed() < RACE_FOR && tampered(host.path(), expected).is_empty() {
        rounds += 1;
        prepared += usize::from(
            tools
                .for_session(sid, &env, &[], Default::default())
                .is_ok(),
        );
        // Back to the server, so the next round hands the whole tree over again.
        std::os::unix::fs::chown(&ws, Some(0), Some(0)).unwrap();
    }
    stop.store(true, Ordering::Relaxed);
    let swaps = racer.join().unwrap();
    eprintln!("{rounds} hand-overs ({prepared} completed) against {swaps} swaps");
    let bad = tampered(host.path(), expected);
    assert!(bad.is_empty(), "after {rounds} hand-overs: {bad:?}");
    assert!(prepared > 0);
    // Without a racer, the whole workspace is handed over, the link itself included.
    tools
        .for_session(sid, &env, &[], Default::default())
        .unwrap();
    let owner = |rel: &str| std::fs::symlink_metadata(ws.join(rel)).unwrap().uid();
    let real = if std::fs::symlink_metadata(ws.join("d")).unwrap().is_dir() {
        "d"
    } else {
        "link"
    };
    let uid = identity::session_uid(sid);
    for rel in [
        "",
        "d",
        "link",
        real,
        &format!("{real}/sub"),
        &format!("{real}/t0"),
    ] {
        assert_eq!(owner(rel), uid, "{rel}");
    }
}
