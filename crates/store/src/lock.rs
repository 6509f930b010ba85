//! The embedded SQLite store belongs to one server at a time. Two `mast serve` processes on
//! one data directory would both run sessions from the same file, and neither's streams would
//! see the other's events (signals between replicas travel over Postgres only), so the second
//! refuses to start. The lock is an advisory `flock` on `<data dir>/mast.lock`, released by
//! the kernel when the process ends, however it ends.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, Write};
use std::path::Path;

/// Name of the lock file inside the data directory.
const LOCK_FILE: &str = "mast.lock";

/// How long a lock held by someone else is waited for: a server that just stopped may still be
/// exiting, and a child process forked at that moment holds a copy of the descriptor until it
/// execs.
const HOLDER_GRACE: std::time::Duration = std::time::Duration::from_secs(2);

/// Tries to take the lock until `grace` runs out.
fn lock_within(file: &File, grace: std::time::Duration) -> Result<(), TryLockError> {
    let deadline = std::time::Instant::now() + grace;
    loop {
        match file.try_lock() {
            Err(TryLockError::WouldBlock) if std::time::Instant::now() < deadline => {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            other => return other,
        }
    }
}

/// Held for as long as this process serves from the data directory.
#[derive(Debug)]
pub struct DataDirLock {
    _file: File,
}

impl DataDirLock {
    /// Takes the data directory, or says which process holds it.
    pub fn acquire(data_dir: &Path) -> anyhow::Result<Self> {
        std::fs::create_dir_all(data_dir)?;
        let path = data_dir.join(LOCK_FILE);
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)?;
        match lock_within(&file, HOLDER_GRACE) {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                let who = if holder.is_empty() {
                    "another `mast serve`".to_string()
                } else {
                    format!("another `mast serve` (pid {holder})")
                };
                anyhow::bail!(
                    "{who} is already serving from {}: one server per SQLite data directory. Stop it, \
                     pick another --data-dir, or run several replicas on Postgres (DATABASE_URL)",
                    std::path::absolute(data_dir)
                        .unwrap_or_else(|_| data_dir.to_path_buf())
                        .display()
                );
            }
            Err(TryLockError::Error(e)) => {
                anyhow::bail!("cannot lock {}: {e}", path.display())
            }
        }
        file.set_len(0)?;
        file.rewind()?;
        writeln!(file, "{}", std::process::id())?;
        Ok(DataDirLock { _file: file })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_holder_is_refused_until_the_first_lets_go() {
        let dir = tempfile::tempdir().unwrap();
        let first = DataDirLock::acquire(dir.path()).unwrap();
        let err = DataDirLock::acquire(dir.path()).unwrap_err().to_string();
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        drop(first);
        DataDirLock::acquire(dir.path()).unwrap();
    }
}
