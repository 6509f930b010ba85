//! The mount table of a session's sandbox: host paths that appear at other paths inside it
//! (session resources today; memory stores and skills later). Both halves of the built-in
//! tools read it — bubblewrap binds each entry for `bash`, and the server-side file tools
//! (`read`, `write`, `edit`) translate a sandbox path on a mount to its host path and refuse
//! writes to read-only entries — so the two never disagree about what a path holds.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// One entry: `host` appears at `sandbox` (a file or a directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// Absolute, normalised path inside the sandbox (no trailing `/`).
    pub sandbox: String,
    /// The host path shown there.
    pub host: PathBuf,
    /// Whether the sandbox may only read it.
    pub read_only: bool,
}

/// A path inside the sandbox that lies on a mount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OnMount<'a> {
    pub mount: &'a Mount,
    /// The host path the sandbox path stands for.
    pub host: PathBuf,
}

/// The mounts of one session, in the order they are bound.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MountTable(Vec<Mount>);

impl MountTable {
    /// A table of these entries.
    pub fn new(mounts: Vec<Mount>) -> Self {
        MountTable(mounts)
    }

    /// The entries.
    pub fn entries(&self) -> &[Mount] {
        &self.0
    }

    /// The mount `path` (a model-facing absolute path) lies on, and the host path it stands
    /// for; `None` for paths on no mount. Paths with `.`/`..` segments are never on a mount
    /// (they could climb out of it), so the caller's own checks refuse them.
    pub fn locate(&self, path: &str) -> Option<OnMount<'_>> {
        let path = path.trim_end_matches('/');
        if path
            .split('/')
            .skip(1)
            .any(|s| s.is_empty() || s == "." || s == "..")
        {
            return None;
        }
        self.0.iter().find_map(|m| {
            let rest = if path == m.sandbox {
                ""
            } else {
                path.strip_prefix(&m.sandbox)?.strip_prefix('/')?
            };
            let host = if rest.is_empty() {
                m.host.clone()
            } else {
                m.host.join(rest)
            };
            Some(OnMount { mount: m, host })
        })
    }

    /// bubblewrap arguments binding every entry (after the root is set up, before it is made
    /// read-only: bubblewrap creates the mount points).
    pub fn bwrap_args(&self) -> Vec<OsString> {
        let mut a = Vec::with_capacity(self.0.len() * 3);
        for m in &self.0 {
            a.push(if m.read_only { "--ro-bind" } else { "--bind" }.into());
            a.push(m.host.clone().into_os_string());
            a.push(OsString::from(&m.sandbox));
        }
        a
    }
}

/// The message of a write refused on a read-only mount.
pub fn read_only_message(file_path: &str) -> String {
    format!(
        "`{file_path}` is on a read-only mount (a session resource); write your changes under /workspace or /mnt/session/outputs instead."
    )
}

/// Whether `host` exists as a regular file (a materialised file resource).
pub fn is_file(host: &Path) -> bool {
    std::fs::symlink_metadata(host).is_ok_and(|m| m.is_file())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> MountTable {
        MountTable::new(vec![
            Mount {
                sandbox: "/mnt/session/uploads/file_1".into(),
                host: "/data/m/rsc_1".into(),
                read_only: true,
            },
            Mount {
                sandbox: "/mnt/session/outputs".into(),
                host: "/data/out".into(),
                read_only: false,
            },
        ])
    }

    #[test]
    fn paths_on_a_mount_translate_to_its_host_path() {
        let t = table();
        let on = t.locate("/mnt/session/uploads/file_1").unwrap();
        assert_eq!(on.host, Path::new("/data/m/rsc_1"));
        assert!(on.mount.read_only);
        let on = t.locate("/mnt/session/outputs/a/b.txt").unwrap();
        assert_eq!(on.host, Path::new("/data/out/a/b.txt"));
        assert!(!on.mount.read_only);
        assert!(t.locate("/mnt/session/uploads/file_10").is_none());
        assert!(t.locate("/mnt/session/outputs/../uploads/x").is_none());
        assert!(t.locate("/workspace/a").is_none());
    }

    #[test]
    fn bwrap_binds_read_only_entries_read_only() {
        let args: Vec<String> = table()
            .bwrap_args()
            .into_iter()
            .map(|a| a.into_string().unwrap())
            .collect();
        assert_eq!(
            args,
            [
                "--ro-bind",
                "/data/m/rsc_1",
                "/mnt/session/uploads/file_1",
                "--bind",
                "/data/out",
                "/mnt/session/outputs"
            ]
        );
    }
}
