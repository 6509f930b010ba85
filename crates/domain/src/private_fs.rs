//! Paths on the host only the server may read: directories of mode 0700 and files of mode
//! 0600. When sandboxes run as users of their own the data directory is passable by everyone
//! (0711, so they can reach their workspaces), so these modes are what keeps other local users
//! out of uploaded bytes, outputs and checkpoints.

use std::fs::Permissions;
use std::io;
use std::os::unix::fs::{DirBuilderExt as _, OpenOptionsExt as _, PermissionsExt as _};
use std::path::Path;

/// Mode of a server-private directory.
pub const DIR_MODE: u32 = 0o700;
/// Mode of a server-private file.
pub const FILE_MODE: u32 = 0o600;

/// Creates `dir` (and any missing parents) at 0700, and tightens `dir` to 0700 when it was
/// there already: an install from before these modes is closed when the server starts.
pub fn dir(dir: &Path) -> io::Result<()> {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(DIR_MODE)
        .create(dir)?;
    std::fs::set_permissions(dir, Permissions::from_mode(DIR_MODE))
}

/// Options that create a file at 0600 (truncating one that exists), never wider in between.
pub fn file_options() -> std::fs::OpenOptions {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true).mode(FILE_MODE);
    o
}

/// Writes `bytes` to `path` at 0600. A file left there before (with a wider mode) is
/// tightened through its handle before anything is written to it.
pub fn write(path: &Path, bytes: &[u8]) -> io::Result<()> {
    use std::io::Write as _;
    let mut f = file_options().open(path)?;
    f.set_permissions(Permissions::from_mode(FILE_MODE))?;
    f.write_all(bytes)
}

/// [`write`] off the async threads.
pub async fn write_async(path: &Path, bytes: Vec<u8>) -> io::Result<()> {
    let path = path.to_path_buf();
    tokio::task::spawn_blocking(move || write(&path, &bytes))
        .await
        .map_err(io::Error::other)?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn creates_and_tightens() {
        let d = tempfile::tempdir().unwrap();
        let deep = d.path().join("a/b");
        dir(&deep).unwrap();
        assert_eq!((mode(&d.path().join("a")), mode(&deep)), (0o700, 0o700));
        std::fs::set_permissions(&deep, Permissions::from_mode(0o755)).unwrap();
        dir(&deep).unwrap();
        assert_eq!(mode(&deep), 0o700);
        let f = deep.join("f");
        std::fs::write(&f, "old").unwrap();
        std::fs::set_permissions(&f, Permissions::from_mode(0o644)).unwrap();
        write(&f, b"new").unwrap();
        assert_eq!(mode(&f), 0o600);
        assert_eq!(std::fs::read(&f).unwrap(), b"new");
    }
}
