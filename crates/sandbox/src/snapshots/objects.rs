//! Where snapshot objects are kept: the [`Objects`] trait and its directory implementation.
//!
//! An object is immutable and named by the SHA-256 of what it holds, so writing one that
//! exists is a no-op and two writers of the same key never disagree. The trait is blocking:
//! a snapshot walks a tree on a blocking thread, and a store over the network answers it
//! from the runtime it was made on.

use std::io;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

/// A content-addressed store of immutable objects, keyed by lowercase hex SHA-256 (optionally
/// behind a short prefix of letters `g`–`z`, which cannot be taken for digits).
pub trait Objects: Send + Sync {
    /// Whether `key` is stored.
    fn has(&self, key: &str) -> io::Result<bool>;
    /// Stores `bytes` under `key`, all or nothing (a reader never sees part of an object).
    fn put(&self, key: &str, bytes: &[u8]) -> io::Result<()>;
    /// The bytes under `key` ([`io::ErrorKind::NotFound`] when there are none).
    fn get(&self, key: &str) -> io::Result<Vec<u8>>;
    /// Removes `key`; a missing one is not an error.
    fn delete(&self, key: &str) -> io::Result<()>;
    /// Every stored key with when it was last written or reused.
    fn list(&self) -> io::Result<Vec<(String, SystemTime)>>;
    /// Marks `key` as just reused, so a sweep that began before this snapshot is recorded
    /// spares it (see [`super::sweep`]).
    fn touch(&self, key: &str) -> io::Result<()>;
    /// When `key` was last written or reused (None when it is not stored).
    fn modified(&self, key: &str) -> io::Result<Option<SystemTime>>;
    /// How many transfers a snapshot should keep in flight (a directory is bound by the
    /// CPU, a remote store by round trips).
    fn parallelism(&self) -> usize {
        std::thread::available_parallelism().map_or(2, |n| n.get().min(4))
    }
}

/// Whether `key` names an object: an optional prefix of letters `g`–`z`, then 64 hex digits.
pub fn valid_key(key: &str) -> bool {
    let digits = key.trim_start_matches(|c: char| matches!(c, 'g'..='z'));
    key.len() <= 80
        && digits.len() == 64
        && digits
            .bytes()
            .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Objects as files under one directory, fanned out by the first two digits of their hash
/// (`<root>/<xy>/<key>`), private to the server (0700 directories, 0600 files).
#[derive(Debug, Clone)]
pub struct LocalObjects {
    root: PathBuf,
}

impl LocalObjects {
    /// Objects under `root` (created on the first write).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        LocalObjects { root: root.into() }
    }

    /// The directory the objects are under.
    pub fn root(&self) -> &Path {
        &self.root
    }

    fn path(&self, key: &str) -> io::Result<PathBuf> {
        if !valid_key(key) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("`{key}` is not an object key"),
            ));
        }
        let digits = &key[key.len() - 64..];
        Ok(self.root.join(&digits[..2]).join(key))
    }
}

impl Objects for LocalObjects {
    fn has(&self, key: &str) -> io::Result<bool> {
        match std::fs::symlink_metadata(self.path(key)?) {
            Ok(_) => Ok(true),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(e),
        }
    }

    fn put(&self, key: &str, bytes: &[u8]) -> io::Result<()> {
        let path = self.path(key)?;
        let dir = path.parent().expect("an object path has a parent");
        if !dir.is_dir() {
            mast_domain::private_fs::dir(dir)?;
        }
        // Written beside and renamed: a crash leaves a `.partial` file, never a torn object.
        let tmp = dir.join(format!(
            ".{key}.{}.partial",
            mast_domain::ids::new_id("tmp")
        ));
        mast_domain::private_fs::write(&tmp, bytes)?;
        std::fs::rename(&tmp, &path).inspect_err(|_| {
            let _ = std::fs::remove_file(&tmp);
        })
    }

    fn get(&self, key: &str) -> io::Result<Vec<u8>> {
        std::fs::read(self.path(key)?)
    }

    fn touch(&self, key: &str) -> io::Result<()> {
        let now = std::fs::FileTimes::new().set_modified(SystemTime::now());
        std::fs::File::options()
            .write(true)
            .open(self.path(key)?)?
            .set_times(now)
    }

    fn modified(&self, key: &str) -> io::Result<Option<SystemTime>> {
        let path = match leftover_of(key) {
            Some(object) => self.path(object)?.with_file_name(key),
            None => self.path(key)?,
        };
        match std::fs::symlink_metadata(path) {
            Ok(m) => Ok(Some(m.modified()?)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(e),
        }
    }

    fn delete(&self, key: &str) -> io::Result<()> {
        let path = match leftover_of(key) {
            Some(object) => self.path(object)?.with_file_name(key),
            None => self.path(key)?,
        };
        match std::fs::remove_file(path) {
            Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
            _ => Ok(()),
        }
    }

    fn list(&self) -> io::Result<Vec<(String, SystemTime)>> {
        let mut out = Vec::new();
        let fans = match std::fs::read_dir(&self.root) {
            Ok(d) => d,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(e),
        };
        for fan in fans {
            let fan = fan?;
            if !fan.file_type()?.is_dir() {
                continue;
            }
            for entry in std::fs::read_dir(fan.path())? {
                let entry = entry?;
                let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                    continue;
                };
                // Leftovers of writes cut short are listed too (by their own name), so a
                // sweep removes them once old.
                // Renamed into place (or removed) since the directory was read: the next
                // listing sees it.
                match entry.metadata() {
                    Ok(meta) => out.push((name, meta.modified()?)),
                    Err(e) if e.kind() == io::ErrorKind::NotFound => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(out)
    }
}

/// Whether `name` (as [`Objects::list`] gives it) is the leftover of a write cut short.
pub fn is_leftover(name: &str) -> bool {
    leftover_of(name).is_some()
}

/// The object a leftover of a write cut short (`.<key>.<id>.partial`) was to be.
fn leftover_of(name: &str) -> Option<&str> {
    let inner = name.strip_prefix('.')?.strip_suffix(".partial")?;
    let (key, id) = inner.split_once('.')?;
    (valid_key(key) && !id.contains(['/', '.'])).then_some(key)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_hex_hashes_behind_an_optional_prefix() {
        let hex = "ab".repeat(32);
        assert!(valid_key(&hex));
        assert!(valid_key(&format!("m{hex}")));
        assert!(!valid_key(&format!("{hex}0")));
        assert!(!valid_key(&"AB".repeat(32)));
        assert!(!valid_key(&format!("../{hex}")));
        assert!(!valid_key(""));
    }

    #[test]
    fn a_directory_stores_lists_and_deletes() {
        let dir = tempfile::tempdir().unwrap();
        let objects = LocalObjects::new(dir.path().join("objects"));
        let key = "cd".repeat(32);
        assert!(!objects.has(&key).unwrap());
        assert_eq!(objects.list().unwrap().len(), 0);
        objects.put(&key, b"bytes").unwrap();
        objects.put(&key, b"bytes").unwrap();
        assert!(objects.has(&key).unwrap());
        assert_eq!(objects.get(&key).unwrap(), b"bytes");
        let listed: Vec<_> = objects
            .list()
            .unwrap()
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert_eq!(listed, std::slice::from_ref(&key));
        objects.delete(&key).unwrap();
        objects.delete(&key).unwrap();
        assert_eq!(
            objects.get(&key).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        assert!(objects.put("../x", b"").is_err());
    }
}
