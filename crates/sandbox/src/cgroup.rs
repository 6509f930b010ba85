//! Cgroups for built-in tool commands: all running commands of one session share one memory
//! limit and one process limit, and every process a command starts can be counted, found and
//! killed. Works with cgroup v1 (the `memory` and `pids` hierarchies) and v2, always below the
//! server's own cgroup so sandboxes stay inside whatever limits the container or service has:
//!
//! ```text
//! <server's cgroup>/mast/p<server pid>/<session id>/<command>
//!                                      ^ memory and pids limits   ^ one per bash call
//! ```
//!
//! The server puts each command's first process in its cgroup itself (as root it may; the
//! sandbox's own user could not move itself on v2), before that process starts anything.
//! Where cgroups cannot be written (an unprivileged container), [`host`] says why and commands
//! fall back to per-process `ulimit`s.

use std::collections::HashMap;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

/// Which cgroup version provides a controller here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Version {
    /// One hierarchy per controller (`/sys/fs/cgroup/memory`, `/sys/fs/cgroup/pids`).
    V1,
    /// The unified hierarchy.
    V2,
}

impl std::fmt::Display for Version {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Version::V1 => "cgroup v1",
            Version::V2 => "cgroup v2",
        })
    }
}

/// One cgroup hierarchy this process may create cgroups in.
#[derive(Debug)]
struct Hierarchy {
    /// `<server's cgroup>/mast/p<pid>`: this process's sessions live below.
    dir: PathBuf,
    version: Version,
    memory: bool,
    pids: bool,
}

/// The cgroups this process can give its commands, found once per process (the server's own
/// cgroup is a property of the process, and so is the registry of sessions' cgroups).
pub struct Cgroups {
    hierarchies: Vec<Hierarchy>,
    /// Why a controller (`memory`, `pids`) is missing, for the start-up report.
    problems: Vec<(&'static str, String)>,
    /// Sessions with running commands; a session's cgroup is removed with its last command.
    sessions: Mutex<HashMap<String, Weak<SessionCgroup>>>,
}

/// This process's cgroups, detected on first use.
pub fn host() -> &'static Cgroups {
    static HOST: OnceLock<Cgroups> = OnceLock::new();
    HOST.get_or_init(Cgroups::detect)
}

impl Cgroups {
    /// The cgroup version limiting a session's memory, if any.
    pub fn memory(&self) -> Option<Version> {
        self.hierarchies
            .iter()
            .find(|h| h.memory)
            .map(|h| h.version)
    }

    /// The cgroup version limiting a session's processes, if any.
    pub fn pids(&self) -> Option<Version> {
        self.hierarchies.iter().find(|h| h.pids).map(|h| h.version)
    }

    /// Why `controller` (`memory` or `pids`) cannot be used here, if it cannot.
    pub fn problem(&self, controller: &str) -> Option<&str> {
        self.problems
            .iter()
            .find(|(c, _)| *c == controller)
            .map(|(_, why)| why.as_str())
    }

    fn detect() -> Cgroups {
        let mut problems = Vec::new();
        let (Ok(own), Ok(mounts)) = (
            std::fs::read_to_string("/proc/self/cgroup"),
            std::fs::read_to_string("/proc/self/mountinfo"),
        ) else {
            return Cgroups::none("/proc/self/cgroup is not readable");
        };
        let mounts = parse_mounts(&mounts);
        let memberships = parse_memberships(&own);
        let mut hierarchies: Vec<Hierarchy> = Vec::new();
        for controller in ["memory", "pids"] {
            // Each controller is used where it is mounted: on v1 hosts both have hierarchies
            // of their own; hybrid hosts keep them on v1 beside an empty v2 tree.
            let Some(base) = v1_dir(&mounts, &memberships, controller) else {
                continue;
            };
            match prepare(&base, Version::V1, &[controller]) {
                Ok(dir) => hierarchies.push(Hierarchy {
                    dir,
                    version: Version::V1,
                    memory: controller == "memory",
                    pids: controller == "pids",
                }),
                Err(e) => problems.push((controller, format!("cgroup v1: {e}"))),
            }
        }
        let missing: Vec<&str> = ["memory", "pids"]
            .into_iter()
            .filter(|c| {
                !hierarchies
                    .iter()
                    .any(|h| (*c == "memory" && h.memory) || (*c == "pids" && h.pids))
                    && v1_dir(&mounts, &memberships, c).is_none()
            })
            .collect();
        if !missing.is_empty() {
            match v2_dir(&mounts, &memberships) {
                Some(base) => {
                    let available = std::fs::read_to_string(base.join("cgroup.controllers"))
                        .unwrap_or_default();
                    let usable: Vec<&str> = missing
                        .iter()
                        .copied()
                        .filter(|c| available.split_whitespace().any(|a| a == *c))
                        .collect();
                    for c in missing.iter().filter(|c| !usable.contains(c)) {
                        problems.push((
                            c,
                            format!(
                                "cgroup v2: not delegated to the server's cgroup {} (its cgroup.controllers lacks it)",
                                base.display()
                            ),
                        ));
                    }
                    if !usable.is_empty() {
                        match prepare(&base, Version::V2, &usable) {
                            Ok(dir) => hierarchies.push(Hierarchy {
                                dir,
                                version: Version::V2,
                                memory: usable.contains(&"memory"),
                                pids: usable.contains(&"pids"),
                            }),
                            Err(e) => problems
                                .extend(usable.iter().map(|c| (*c, format!("cgroup v2: {e}")))),
                        }
                    }
                }
                None => problems.extend(
                    missing
                        .iter()
                        .map(|c| (*c, "no cgroup hierarchy has this controller".to_string())),
                ),
            }
        }
        Cgroups {
            hierarchies,
            problems,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    fn none(why: &str) -> Cgroups {
        Cgroups {
            hierarchies: Vec::new(),
            problems: vec![("memory", why.to_string()), ("pids", why.to_string())],
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// A cgroup for one command of `session`, inside the session's (created with these limits
    /// when it has no running command); None where this host has no usable cgroups.
    pub fn command(
        &'static self,
        session: &str,
        memory_bytes: u64,
        max_processes: u64,
    ) -> Option<CommandCgroup> {
        if self.hierarchies.is_empty() {
            return None;
        }
        let session = match self.session(session, memory_bytes, max_processes) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "a session's cgroup could not be made; its command runs with per-process limits");
                return None;
            }
        };
        let name = format!("c{}", mast_domain::ids::new_secret(8));
        let mut dirs = Vec::new();
        for (h, dir) in self.hierarchies.iter().zip(&session.dirs) {
            let dir = dir.join(&name);
            if let Err(e) = std::fs::create_dir(&dir) {
                tracing::warn!(cgroup = %dir.display(), error = %e, "a command's cgroup could not be made");
                for (_, d) in &dirs {
                    let _ = std::fs::remove_dir(d);
                }
                return None;
            }
            dirs.push((h.version, dir));
        }
        let mut cg = CommandCgroup {
            session,
            dirs,
            memory_limited: self.memory().is_some(),
            pids_limited: self.pids().is_some(),
            baseline: Events::default(),
            closed: false,
        };
        cg.baseline = cg.read_events();
        Some(cg)
    }

    fn session(
        &'static self,
        id: &str,
        memory_bytes: u64,
        max_processes: u64,
    ) -> io::Result<Arc<SessionCgroup>> {
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = sessions.get(id).and_then(Weak::upgrade) {
            return Ok(s);
        }
        let mut dirs = Vec::new();
        for h in &self.hierarchies {
            let dir = h.dir.join(id);
            match std::fs::create_dir(&dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => {
                    remove_dirs(&dirs);
                    return Err(e);
                }
            }
            dirs.push(dir.clone());
            if let Err(e) = limit_session(h, &dir, memory_bytes, max_processes) {
                remove_dirs(&dirs);
                return Err(e);
            }
        }
        let s = Arc::new(SessionCgroup {
            id: id.to_string(),
            dirs,
            registry: &self.sessions,
        });
        sessions.insert(id.to_string(), Arc::downgrade(&s));
        Ok(s)
    }
}

fn remove_dirs(dirs: &[PathBuf]) {
    for d in dirs {
        let _ = std::fs::remove_dir(d);
    }
}

/// Sets a session cgroup's limits in one hierarchy.
fn limit_session(
    h: &Hierarchy,
    dir: &Path,
    memory_bytes: u64,
    max_processes: u64,
) -> io::Result<()> {
    match h.version {
        Version::V1 => {
            if h.memory {
                // Older kernels only apply a parent's limit to children with this set.
                let _ = std::fs::write(dir.join("memory.use_hierarchy"), "1");
                set_v1_memory(dir, memory_bytes)?;
            }
        }
        Version::V2 => {
            if h.memory {
                std::fs::write(dir.join("memory.max"), memory_bytes.to_string())?;
                // No swap: a limit that spills to swap still takes the host's memory.
                let _ = std::fs::write(dir.join("memory.swap.max"), "0");
            }
            // Commands' own cgroups get the controllers' event counters, so a kill is told
            // to the command it hit.
            let _ = std::fs::write(
                dir.join("cgroup.subtree_control"),
                controllers_line(h.memory, h.pids),
            );
        }
    }
    if h.pids {
        std::fs::write(dir.join("pids.max"), max_processes.to_string())?;
    }
    Ok(())
}

/// Sets a v1 memory limit, and the same for memory plus swap where the kernel accounts swap.
fn set_v1_memory(dir: &Path, bytes: u64) -> io::Result<()> {
    let memsw = dir.join("memory.memsw.limit_in_bytes");
    let limit = dir.join("memory.limit_in_bytes");
    // memsw may never be below the memory limit: raise or lower them in an order that keeps it.
    if std::fs::write(&limit, bytes.to_string()).is_err() {
        if memsw.exists() {
            std::fs::write(&memsw, bytes.to_string())?;
        }
        std::fs::write(&limit, bytes.to_string())?;
    }
    if memsw.exists() {
        std::fs::write(&memsw, bytes.to_string())?;
    }
    Ok(())
}

fn controllers_line(memory: bool, pids: bool) -> String {
    let mut line = Vec::new();
    if memory {
        line.push("+memory");
    }
    if pids {
        line.push("+pids");
    }
    line.join(" ")
}

/// Creates `<base>/mast/p<pid>` (cleaning up after dead servers) and checks that limits can
/// be set below it.
fn prepare(base: &Path, version: Version, controllers: &[&str]) -> Result<PathBuf, String> {
    let memory = controllers.contains(&"memory");
    let pids = controllers.contains(&"pids");
    let line = controllers_line(memory, pids);
    if version == Version::V2 {
        delegate_v2(base, &line)?;
    }
    let parent = base.join("mast");
    std::fs::create_dir_all(&parent)
        .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    if version == Version::V2 {
        std::fs::write(parent.join("cgroup.subtree_control"), &line)
            .map_err(|e| format!("cannot delegate {line} to {}: {e}", parent.display()))?;
    }
    remove_stale(&parent);
    let dir = parent.join(format!("p{}", std::process::id()));
    match std::fs::create_dir(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create {}: {e}", dir.display())),
    }
    if version == Version::V2 {
        std::fs::write(dir.join("cgroup.subtree_control"), &line)
            .map_err(|e| format!("cannot delegate {line} to {}: {e}", dir.display()))?;
    }
    // A trial session proves the limits can be written.
    let probe = dir.join("probe");
    let _ = std::fs::create_dir(&probe);
    let tried = (|| -> io::Result<()> {
        match version {
            Version::V1 if memory => set_v1_memory(&probe, 64 << 20),
            Version::V2 if memory => {
                std::fs::write(probe.join("memory.max"), (64u64 << 20).to_string())
            }
            _ => Ok(()),
        }?;
        if pids {
            std::fs::write(probe.join("pids.max"), "64")?;
        }
        Ok(())
    })();
    let _ = std::fs::remove_dir(&probe);
    tried.map_err(|e| format!("cannot set limits in {}: {e}", dir.display()))?;
    Ok(dir)
}

/// Makes `base` hand `line`'s controllers to its children. cgroup v2 lets a cgroup do that
/// only while it holds no processes itself: when the server is alone in its cgroup it moves
/// into a leaf of its own (`mast-server`), as container runtimes do with their init.
fn delegate_v2(base: &Path, line: &str) -> Result<(), String> {
    let control = base.join("cgroup.subtree_control");
    let first = match std::fs::write(&control, line) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    let me = std::process::id().to_string();
    let procs = std::fs::read_to_string(base.join("cgroup.procs")).unwrap_or_default();
    let others: Vec<&str> = procs.split_whitespace().filter(|p| *p != me).collect();
    if !procs.split_whitespace().any(|p| p == me) || !others.is_empty() {
        return Err(format!(
            "cannot delegate {line} to its children ({first}); cgroup v2 only lets a cgroup without processes do that, \
             and {} also holds {} other process(es): run the server in a cgroup of its own (systemd `Delegate=yes`, \
             or as its container's only process)",
            base.display(),
            others.len()
        ));
    }
    let leaf = base.join("mast-server");
    let _ = std::fs::create_dir(&leaf);
    std::fs::write(leaf.join("cgroup.procs"), &me)
        .map_err(|e| format!("cannot move the server into {}: {e}", leaf.display()))?;
    std::fs::write(&control, line).map_err(|e| {
        format!(
            "cannot delegate {line} to the children of {}: {e}",
            base.display()
        )
    })
}

/// Removes what servers that are gone left below `parent` (their sandboxes died with them,
/// but unsandboxed commands may not have, and empty cgroups stay until removed).
fn remove_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = name.strip_prefix('p').and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if pid == std::process::id() || Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        remove_tree(&entry.path());
    }
}

/// Kills the processes of a cgroup tree and removes it, deepest first.
fn remove_tree(dir: &Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                remove_tree(&entry.path());
            }
        }
    }
    for _ in 0..50 {
        if std::fs::remove_dir(dir).is_ok() || !dir.exists() {
            return;
        }
        kill_members(dir);
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Sends SIGKILL to every process in one cgroup; true when it had none.
fn kill_members(dir: &Path) -> bool {
    let procs = std::fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
    let mut none = true;
    for pid in procs
        .split_whitespace()
        .filter_map(|p| p.parse::<i32>().ok())
    {
        none = false;
        if let Some(pid) = rustix::process::Pid::from_raw(pid) {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::KILL);
        }
    }
    none
}

/// A mounted filesystem: its root within the filesystem, where it is mounted, its type and
/// its super options (a cgroup v1 mount lists its controllers there).
#[derive(Debug, PartialEq)]
struct Mount {
    root: String,
    point: String,
    fstype: String,
    options: String,
}

fn parse_mounts(mountinfo: &str) -> Vec<Mount> {
    mountinfo
        .lines()
        .filter_map(|line| {
            let (left, right) = line.split_once(" - ")?;
            let left: Vec<&str> = left.split(' ').collect();
            let right: Vec<&str> = right.split(' ').collect();
            Some(Mount {
                root: unescape(left.get(3)?),
                point: unescape(left.get(4)?),
                fstype: right.first()?.to_string(),
                options: right.get(2).copied().unwrap_or("").to_string(),
            })
        })
        .collect()
}

/// mountinfo escapes spaces and a few other bytes as `\ooo`.
fn unescape(s: &str) -> String {
    let mut out = Vec::new();
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && let Some(v) = std::str::from_utf8(&b[i + 1..i + 4])
                .ok()
                .and_then(|o| u8::from_str_radix(o, 8).ok())
        {
            out.push(v);
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// `/proc/self/cgroup` as (controllers, path) pairs; v2's line has no controllers.
fn parse_memberships(text: &str) -> Vec<(Vec<String>, String)> {
    text.lines()
        .filter_map(|line| {
            let mut parts = line.splitn(3, ':');
            let _id = parts.next()?;
            let controllers = parts.next()?;
            let path = parts.next()?;
            Some((
                controllers
                    .split(',')
                    .filter(|c| !c.is_empty())
                    .map(str::to_string)
                    .collect(),
                path.to_string(),
            ))
        })
        .collect()
}

/// Where `path` (a cgroup path as /proc/self/cgroup shows it) is under `mount`.
fn under(mount: &Mount, path: &str) -> Option<PathBuf> {
    let rel = if mount.root == "/" {
        path
    } else {
        path.strip_prefix(mount.root.as_str())?
    };
    let rel = rel.trim_start_matches('/');
    // A path outside the mount's root (cgroup namespaces show those as `/..`) is unreachable.
    if rel.split('/').any(|c| c == "..") {
        return None;
    }
    if rel.is_empty() {
        return Some(PathBuf::from(&mount.point));
    }
    Some(Path::new(&mount.point).join(rel))
}

/// This process's cgroup directory in the v1 hierarchy of `controller`.
fn v1_dir(
    mounts: &[Mount],
    memberships: &[(Vec<String>, String)],
    controller: &str,
) -> Option<PathBuf> {
    let mount = mounts
        .iter()
        .find(|m| m.fstype == "cgroup" && m.options.split(',').any(|o| o == controller))?;
    let (_, path) = memberships
        .iter()
        .find(|(cs, _)| cs.iter().any(|c| c == controller))?;
    under(mount, path)
}

/// This process's cgroup directory in the v2 hierarchy.
fn v2_dir(mounts: &[Mount], memberships: &[(Vec<String>, String)]) -> Option<PathBuf> {
    let mount = mounts.iter().find(|m| m.fstype == "cgroup2")?;
    let (_, path) = memberships.iter().find(|(cs, _)| cs.is_empty())?;
    under(mount, path)
}

/// The cgroup of a session with running commands; removed when the last one ends.
struct SessionCgroup {
    id: String,
    /// One per hierarchy, in [`Cgroups::hierarchies`] order.
    dirs: Vec<PathBuf>,
    registry: &'static Mutex<HashMap<String, Weak<SessionCgroup>>>,
}

impl Drop for SessionCgroup {
    fn drop(&mut self) {
        let mut sessions = self.registry.lock().unwrap_or_else(|e| e.into_inner());
        // A command that started meanwhile made a new entry for the same directories.
        if sessions.get(&self.id).is_some_and(|w| w.strong_count() > 0) {
            return;
        }
        sessions.remove(&self.id);
        for dir in &self.dirs {
            if let Err(e) = std::fs::remove_dir(dir) {
                tracing::warn!(cgroup = %dir.display(), error = %e, "a session's cgroup could not be removed");
            }
        }
    }
}

/// Counters of limits a command ran into.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Events {
    /// Processes the OOM killer ended because the memory limit was reached.
    pub oom_kills: u64,
    /// Times starting a process or thread failed at the process limit.
    pub pids_max: u64,
}

/// One command's cgroup: every process the command starts is in it. [`CommandCgroup::close`]
/// kills what is left and removes it.
pub struct CommandCgroup {
    session: Arc<SessionCgroup>,
    dirs: Vec<(Version, PathBuf)>,
    memory_limited: bool,
    pids_limited: bool,
    baseline: Events,
    closed: bool,
}

/// The counter `key` in a flat-keyed cgroup file (`memory.events`, `pids.events`,
/// `memory.oom_control`).
fn counter(file: &Path, key: &str) -> u64 {
    std::fs::read_to_string(file)
        .ok()
        .and_then(|text| {
            text.lines().find_map(|l| {
                let (k, v) = l.split_once(' ')?;
                (k == key).then(|| v.trim().parse().ok()).flatten()
            })
        })
        .unwrap_or(0)
}

impl CommandCgroup {
    /// Whether the session's memory is limited by this cgroup (else `ulimit -v` must do).
    pub fn limits_memory(&self) -> bool {
        self.memory_limited
    }

    /// Whether the session's processes are limited by this cgroup (else `ulimit -u` must do).
    pub fn limits_processes(&self) -> bool {
        self.pids_limited
    }

    /// Moves process `pid` (not yet started anything) into the command's cgroups.
    pub fn join(&self, pid: u32) -> io::Result<()> {
        for (_, dir) in &self.dirs {
            std::fs::write(dir.join("cgroup.procs"), pid.to_string())?;
        }
        Ok(())
    }

    /// Counts of kills by the memory limit in this command, and of failures at the
    /// session's process limit, since the command started. The pids event is counted in the
    /// forking process's cgroup on v1 (and older v2 kernels) and in the limiting one on newer
    /// v2 kernels, so both are read; with concurrent commands a session-wide count may come
    /// from a sibling, which hit the same shared limit.
    pub fn events(&self) -> Events {
        let now = self.read_events();
        Events {
            oom_kills: now.oom_kills.saturating_sub(self.baseline.oom_kills),
            pids_max: now.pids_max.saturating_sub(self.baseline.pids_max),
        }
    }

    fn read_events(&self) -> Events {
        let mut e = Events::default();
        for ((version, dir), session) in self.dirs.iter().zip(&self.session.dirs) {
            match version {
                Version::V1 => {
                    e.oom_kills += counter(&dir.join("memory.oom_control"), "oom_kill");
                }
                Version::V2 => {
                    e.oom_kills += counter(&dir.join("memory.events"), "oom_kill");
                }
            }
            e.pids_max += counter(&dir.join("pids.events"), "max")
                + counter(&session.join("pids.events"), "max");
        }
        e
    }

    /// Kills every process of the command.
    pub fn kill_all(&self) {
        for (version, dir) in &self.dirs {
            if *version == Version::V2 && std::fs::write(dir.join("cgroup.kill"), "1").is_ok() {
                continue;
            }
            kill_members(dir);
        }
    }

    fn is_empty(&self) -> bool {
        self.dirs.iter().all(|(_, dir)| {
            std::fs::read_to_string(dir.join("cgroup.procs")).is_ok_and(|p| p.trim().is_empty())
        })
    }

    /// Kills whatever the command left running, waits (briefly) for the cgroup to empty and
    /// removes it: a cgroup cannot be removed while it still has members.
    pub async fn close(mut self) {
        for _ in 0..100 {
            if self.is_empty() {
                break;
            }
            self.kill_all();
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for (_, dir) in &self.dirs {
            if std::fs::remove_dir(dir).is_err() {
                tracing::warn!(cgroup = %dir.display(), "a command's cgroup could not be removed");
            }
        }
        self.closed = true;
    }
}

impl Drop for CommandCgroup {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        // Best effort when `close` was not reached (a cancelled call).
        self.kill_all();
        for (_, dir) in &self.dirs {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1_MOUNTS: &str = "\
30 25 0:26 / /sys/fs/cgroup ro,nosuid,nodev,noexec - tmpfs tmpfs ro,mode=755
35 30 0:31 / /sys/fs/cgroup/memory rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,memory
36 30 0:32 / /sys/fs/cgroup/pids rw,nosuid,nodev,noexec,relatime - cgroup cgroup rw,pids
37 30 0:33 / /sys/fs/cgroup/cpu,cpuacct rw - cgroup cgroup rw,cpu,cpuacct
38 30 0:34 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw
";

    #[test]
    fn finds_its_own_cgroups_on_v1_hybrid_and_v2_hosts() {
        let mounts = parse_mounts(V1_MOUNTS);
        let own = parse_memberships("9:pids:/\n4:memory:/process_api/abc\n1:cpu,cpuacct:/\n0::/\n");
        assert_eq!(
            v1_dir(&mounts, &own, "memory").unwrap(),
            Path::new("/sys/fs/cgroup/memory/process_api/abc")
        );
        assert_eq!(
            v1_dir(&mounts, &own, "pids").unwrap(),
            Path::new("/sys/fs/cgroup/pids")
        );
        assert_eq!(v1_dir(&mounts, &own, "blkio"), None);
        assert_eq!(
            v2_dir(&mounts, &own).unwrap(),
            Path::new("/sys/fs/cgroup/unified")
        );

        // A container that sees only its own subtree, mounted at the hierarchy's root.
        let mounts = parse_mounts(
            "40 30 0:31 /docker/abc /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n",
        );
        let own = parse_memberships("4:memory:/docker/abc/sub\n");
        assert_eq!(
            v1_dir(&mounts, &own, "memory").unwrap(),
            Path::new("/sys/fs/cgroup/memory/sub")
        );
        let own = parse_memberships("4:memory:/elsewhere\n");
        assert_eq!(v1_dir(&mounts, &own, "memory"), None);

        let mounts = parse_mounts(
            "29 23 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime - cgroup2 cgroup2 rw,nsdelegate\n",
        );
        let own = parse_memberships("0::/system.slice/mast.service\n");
        assert_eq!(
            v2_dir(&mounts, &own).unwrap(),
            Path::new("/sys/fs/cgroup/system.slice/mast.service")
        );
        let own = parse_memberships("0::/../outside\n");
        assert_eq!(v2_dir(&mounts, &own), None);
    }

    #[test]
    fn reads_counters_and_escaped_mount_points() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("memory.events");
        std::fs::write(&file, "low 0\nhigh 0\nmax 12\noom 2\noom_kill 1\n").unwrap();
        assert_eq!(counter(&file, "oom_kill"), 1);
        assert_eq!(counter(&file, "max"), 12);
        assert_eq!(counter(&file, "absent"), 0);
        assert_eq!(counter(&dir.path().join("missing"), "max"), 0);
        assert_eq!(unescape(r"/mnt/with\040space"), "/mnt/with space");
    }

    /// On a host where this process may make cgroups (CI runs as root), a command's cgroup
    /// holds what it starts, reports limits it hit, and leaves nothing behind.
    #[tokio::test]
    async fn a_command_cgroup_limits_counts_and_cleans_up() {
        let host = host();
        let session = format!("sesn_unit{}", mast_domain::ids::new_secret(6));
        let Some(cg) = host.command(&session, 64 << 20, 8) else {
            crate::test_env::cannot_run_here(&format!(
                "no writable cgroups here ({:?})",
                host.problems
            ));
            return;
        };
        let mut child = tokio::process::Command::new("sh")
            .arg("-c")
            .arg("read _; for i in 1 2 3 4 5 6 7 8 9 10; do sleep 5 & done; sleep 5")
            .stdin(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        cg.join(child.id().unwrap()).unwrap();
        use tokio::io::AsyncWriteExt;
        child
            .stdin
            .take()
            .unwrap()
            .write_all(b"go\n")
            .await
            .unwrap();
        tokio::time::sleep(Duration::from_millis(300)).await;
        if cg.limits_processes() {
            assert!(cg.events().pids_max > 0, "{:?}", cg.events());
        }
        assert_eq!(cg.events().oom_kills, 0);
        let dirs: Vec<PathBuf> = cg.dirs.iter().map(|(_, d)| d.clone()).collect();
        let session_dirs = cg.session.dirs.clone();
        cg.close().await;
        let _ = child.wait().await;
        for d in dirs.iter().chain(&session_dirs) {
            assert!(!d.exists(), "{} was left behind", d.display());
        }
    }
}
