//! A per-command process-count limit through the cgroup v1 `pids` controller or cgroup v2,
//! where the host lets this process create cgroups.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// One command's cgroup: every process the command starts joins it and counts against
/// `pids.max`. [`PidsCgroup::close`] kills what is left and removes it.
pub struct PidsCgroup {
    dir: PathBuf,
    v2: bool,
    closed: bool,
}

impl PidsCgroup {
    /// Creates `mast/<name>` with `pids.max`, writable by `owner` (the sandbox's host user,
    /// which joins it itself), or None where cgroups are not writable here.
    pub fn create(name: &str, max: u64, owner: Option<u32>) -> Option<Self> {
        for (root, v2) in [
            (Path::new("/sys/fs/cgroup/pids"), false),
            (Path::new("/sys/fs/cgroup"), true),
        ] {
            let marker = if v2 { "cgroup.controllers" } else { "tasks" };
            if !root.join("cgroup.procs").exists() || !root.join(marker).exists() {
                continue;
            }
            let parent = root.join("mast");
            if std::fs::create_dir_all(&parent).is_err() {
                continue;
            }
            if v2 {
                // Children only get `pids.max` when the parent delegates the controller.
                let _ = std::fs::write(root.join("cgroup.subtree_control"), "+pids");
                let _ = std::fs::write(parent.join("cgroup.subtree_control"), "+pids");
            }
            let dir = parent.join(name);
            if std::fs::create_dir(&dir).is_ok()
                && std::fs::write(dir.join("pids.max"), max.to_string()).is_ok()
                && owner.is_none_or(|uid| {
                    std::os::unix::fs::chown(dir.join("cgroup.procs"), Some(uid), Some(uid)).is_ok()
                })
            {
                return Some(PidsCgroup {
                    dir,
                    v2,
                    closed: false,
                });
            }
            let _ = std::fs::remove_dir(&dir);
        }
        None
    }

    /// The file a process writes its pid to in order to join.
    pub fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    fn kill_all(&self) -> bool {
        if self.v2 && std::fs::write(self.dir.join("cgroup.kill"), "1").is_ok() {
            return true;
        }
        let Ok(procs) = std::fs::read_to_string(self.procs_file()) else {
            return true;
        };
        let pids: Vec<&str> = procs.split_whitespace().collect();
        if pids.is_empty() {
            return true;
        }
        // No libc here (unsafe is forbidden): kill(1) takes every pid at once.
        std::process::Command::new("kill")
            .arg("-KILL")
            .args(&pids)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok()
    }

    fn is_empty(&self) -> bool {
        std::fs::read_to_string(self.procs_file()).is_ok_and(|p| p.trim().is_empty())
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
        if std::fs::remove_dir(&self.dir).is_err() {
            tracing::warn!(cgroup = %self.dir.display(), "a command's cgroup could not be removed");
        }
        self.closed = true;
    }
}

impl Drop for PidsCgroup {
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        // Best effort when `close` was not reached (a cancelled call).
        self.kill_all();
        let _ = std::fs::remove_dir(&self.dir);
    }
}
