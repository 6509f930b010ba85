//! Taking a snapshot: a walk of the tree from directory handles opened with `O_NOFOLLOW` (a
//! link swapped in by a process still running cannot lead it out of the tree), each file cut
//! into chunks that are hashed, compressed and stored by a few threads while the walk reads
//! on. A chunk already stored is not stored again, and a file whose status is unchanged since
//! the previous snapshot of the same tree is not even read: its chunks are taken from there.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::{self, Read as _};
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Instant, SystemTime};

use rustix::fs::{AtFlags, FileType, Mode, OFlags};

use super::codec;
use super::manifest::{CHUNK_SIZE, Kind, Manifest, Node, Stat};
use super::objects::Objects;
use crate::tree_copy::{self, Budget};

/// A file whose status changed less than this before the previous snapshot began is read
/// again: file times come from a coarse clock, so a write just after that snapshot read it
/// could leave the same times behind.
pub const RACY_NS: i64 = 1_000_000_000;

/// What a snapshot did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TakeStats {
    /// Regular files in the tree.
    pub files: u64,
    /// Directories and links.
    pub others: u64,
    /// Bytes in the files.
    pub bytes: u64,
    /// Files taken from the previous snapshot without being read.
    pub unchanged_files: u64,
    /// Bytes read and hashed.
    pub read_bytes: u64,
    /// Objects stored (chunks not stored before, and the manifest).
    pub new_objects: u64,
    /// Bytes those objects took (compressed).
    pub new_bytes: u64,
    pub micros: u64,
}

impl TakeStats {
    /// Files, directories and links.
    pub fn entries(&self) -> u64 {
        self.files + self.others
    }
}

/// A stored snapshot.
#[derive(Debug, Clone)]
pub struct Taken {
    /// The manifest's object key.
    pub key: String,
    pub manifest: Manifest,
    pub stats: TakeStats,
}

/// One chunk on its way to the store.
struct Job {
    node: usize,
    index: usize,
    bytes: Vec<u8>,
}

/// A stored chunk.
struct Done {
    node: usize,
    index: usize,
    key: String,
    /// Bytes it took when it was new.
    stored: Option<u64>,
}

/// Snapshots the tree at `root` into `objects`, reusing what `previous` (an earlier snapshot
/// of this same tree) says of unchanged files. A tree past `budget` (bytes in its files,
/// entries) fails with [`io::ErrorKind::QuotaExceeded`]; chunks it stored before stopping stay
/// until a sweep finds them unreferenced.
pub fn take(
    root: &Path,
    objects: &dyn Objects,
    previous: Option<&Manifest>,
    budget: Budget,
) -> io::Result<Taken> {
    let started = Instant::now();
    let now_ns = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64);
    let root_fd = tree_copy::open_dir(root)?;
    let mut manifest = Manifest::new(now_ns);
    let st = rustix::fs::fstat(&root_fd)?;
    manifest.root_id = Some((st.st_dev, st.st_ino));
    manifest.root_mode = tree_copy::safe_mode(st.st_mode).bits();
    manifest.root_mtime_ns = ns(st.st_mtime as i64, st.st_mtime_nsec as i64);
    let manifest_root = manifest.root_id;
    let mut walk = Walk {
        manifest,
        known: previous
            .filter(|p| p.root_id.is_some() && p.root_id == manifest_root)
            .map(known_files)
            .unwrap_or_default(),
        failed: Arc::new(AtomicBool::new(false)),
        stats: TakeStats::default(),
        budget,
        jobs: None,
    };
    let workers = objects.parallelism().max(1);
    let (done_tx, done_rx) = mpsc::channel::<io::Result<Done>>();
    let walked = std::thread::scope(|scope| {
        let (job_tx, job_rx) = mpsc::sync_channel::<Job>(workers * 2);
        // Only the workers hold the queue's end: should they all stop, the walk's next send
        // fails instead of waiting on a full queue.
        let job_rx = Arc::new(Mutex::new(job_rx));
        for _ in 0..workers {
            let (job_rx, done_tx, failed) = (job_rx.clone(), done_tx.clone(), walk.failed.clone());
            scope.spawn(move || {
                loop {
                    let next = job_rx.lock().map(|rx| rx.recv());
                    let Ok(Ok(job)) = next else { return };
                    let done = store_chunk(objects, job);
                    if done.is_err() {
                        failed.store(true, Ordering::Relaxed);
                    }
                    if done_tx.send(done).is_err() {
                        return;
                    }
                }
            });
        }
        drop(job_rx);
        walk.jobs = Some(job_tx);
        let result = walk.dir(root_fd.as_fd(), Vec::new(), 0);
        // Closing the queue lets the workers finish what is in it and stop.
        walk.jobs = None;
        result
    });
    drop(done_tx);
    // A store's failure is what stopped the walk, if one did: it is the error to report.
    let done: Vec<Done> = done_rx.into_iter().collect::<io::Result<_>>()?;
    walked?;
    for done in done {
        if let Kind::File { chunks, .. } = &mut walk.manifest.nodes[done.node].kind {
            chunks[done.index] = done.key;
        }
        if let Some(stored) = done.stored {
            walk.stats.new_objects += 1;
            walk.stats.new_bytes += stored;
        }
    }
    let (key, sealed) = walk.manifest.seal()?;
    if objects.has(&key)? {
        objects.touch(&key)?;
    } else {
        objects.put(&key, &sealed)?;
        walk.stats.new_objects += 1;
        walk.stats.new_bytes += sealed.len() as u64;
    }
    walk.stats.micros = started.elapsed().as_micros() as u64;
    Ok(Taken {
        key,
        manifest: walk.manifest,
        stats: walk.stats,
    })
}

/// The files of a previous snapshot that may be taken over unread, by path.
fn known_files(previous: &Manifest) -> HashMap<Vec<u8>, Node> {
    previous
        .nodes
        .iter()
        .filter(|n| match &n.kind {
            Kind::File {
                stat: Some(stat), ..
            } => stat.ctime_ns.saturating_add(RACY_NS) <= previous.taken_at_ns,
            _ => false,
        })
        .map(|n| (n.path.clone(), n.clone()))
        .collect()
}

fn store_chunk(objects: &dyn Objects, job: Job) -> io::Result<Done> {
    let key = codec::hash(&job.bytes);
    let mut stored = None;
    if objects.has(&key)? {
        // Reused: touched, so a sweep running meanwhile spares it (see `super::sweep`).
        objects.touch(&key)?;
    } else {
        let sealed = codec::seal(&job.bytes)?;
        objects.put(&key, &sealed)?;
        stored = Some(sealed.len() as u64);
    }
    Ok(Done {
        node: job.node,
        index: job.index,
        key,
        stored,
    })
}

struct Walk {
    manifest: Manifest,
    known: HashMap<Vec<u8>, Node>,
    stats: TakeStats,
    budget: Budget,
    jobs: Option<mpsc::SyncSender<Job>>,
    /// Set by a worker that failed to store a chunk: the walk stops at its next chunk.
    failed: Arc<AtomicBool>,
}

fn ns(sec: i64, nsec: i64) -> i64 {
    sec.saturating_mul(1_000_000_000).saturating_add(nsec)
}

fn is_gone(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::NotFound
}

impl Walk {
    fn check_budget(&self) -> io::Result<()> {
        if self.stats.bytes > self.budget.disk_bytes || self.stats.entries() > self.budget.entries {
            return Err(io::Error::new(
                io::ErrorKind::QuotaExceeded,
                "the tree is larger than its snapshot may be",
            ));
        }
        Ok(())
    }

    fn dir(&mut self, dir: BorrowedFd<'_>, prefix: Vec<u8>, depth: usize) -> io::Result<()> {
        if depth > tree_copy::MAX_DEPTH {
            return Err(io::Error::other(format!(
                "the tree nests deeper than {} directories",
                tree_copy::MAX_DEPTH
            )));
        }
        let mut names = tree_copy::entries(dir)?;
        // Sorted, so two snapshots of one tree give one manifest (and one key).
        names.sort_by(|a, b| a.0.cmp(&b.0));
        for (name, kind) in names {
            let mut path = prefix.clone();
            if !path.is_empty() {
                path.push(b'/');
            }
            path.extend_from_slice(name.as_bytes());
            let listed = self.manifest.nodes.len();
            let found = match kind {
                FileType::Directory => self.subdir(dir, &name, path, depth),
                FileType::RegularFile => self.file(dir, &name, path),
                FileType::Symlink => self.link(dir, &name, path),
                _ => Ok(()),
            };
            // An entry removed since the directory was read (a process in the sandbox still
            // runs) is simply not in the snapshot; once it is listed, any error is the
            // snapshot's.
            match found {
                Err(e) if is_gone(&e) && self.manifest.nodes.len() == listed => {}
                other => other?,
            }
        }
        Ok(())
    }

    fn subdir(
        &mut self,
        parent: BorrowedFd<'_>,
        name: &OsStr,
        path: Vec<u8>,
        depth: usize,
    ) -> io::Result<()> {
        let fd = tree_copy::open_dir_at(parent, name)?;
        let st = rustix::fs::fstat(&fd)?;
        self.manifest.nodes.push(Node {
            path: path.clone(),
            mode: tree_copy::safe_mode(st.st_mode).bits(),
            mtime_ns: ns(st.st_mtime as i64, st.st_mtime_nsec as i64),
            kind: Kind::Dir,
        });
        self.stats.others += 1;
        self.check_budget()?;
        self.dir(fd.as_fd(), path, depth + 1)
    }

    fn link(&mut self, parent: BorrowedFd<'_>, name: &OsStr, path: Vec<u8>) -> io::Result<()> {
        let st = rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW)?;
        let target = rustix::fs::readlinkat(parent, name, Vec::new())?;
        self.manifest.nodes.push(Node {
            path,
            mode: 0o777,
            mtime_ns: ns(st.st_mtime as i64, st.st_mtime_nsec as i64),
            kind: Kind::Link {
                target: target.into_bytes(),
            },
        });
        self.stats.others += 1;
        self.check_budget()
    }

    fn file(&mut self, parent: BorrowedFd<'_>, name: &OsStr, path: Vec<u8>) -> io::Result<()> {
        let st = rustix::fs::statat(parent, name, AtFlags::SYMLINK_NOFOLLOW)?;
        let size = u64::try_from(st.st_size).unwrap_or(0);
        let mtime_ns = ns(st.st_mtime as i64, st.st_mtime_nsec as i64);
        let stat = Stat {
            ino: st.st_ino,
            ctime_ns: ns(st.st_ctime as i64, st.st_ctime_nsec as i64),
        };
        let mode = tree_copy::safe_mode(st.st_mode).bits();
        if let Some(Node {
            mtime_ns: was_mtime,
            kind:
                Kind::File {
                    size: was_size,
                    chunks,
                    stat: Some(was),
                },
            ..
        }) = self.known.get(&path)
            && (*was_size, *was_mtime, *was) == (size, mtime_ns, stat)
        {
            self.stats.files += 1;
            self.stats.unchanged_files += 1;
            self.stats.bytes += size;
            self.check_budget()?;
            let chunks = chunks.clone();
            self.manifest.nodes.push(Node {
                path,
                mode,
                mtime_ns,
                kind: Kind::File {
                    size,
                    chunks,
                    stat: Some(stat),
                },
            });
            return Ok(());
        }
        // O_NONBLOCK: a FIFO swapped in after the directory was read is not waited on.
        let fd = rustix::fs::openat(
            parent,
            name,
            OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        let st = rustix::fs::fstat(&fd)?;
        if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile {
            return Ok(());
        }
        // The status read through the handle is what the chunks are of: a write after it
        // changes the status, so the next snapshot reads the file again.
        let stat = Stat {
            ino: st.st_ino,
            ctime_ns: ns(st.st_ctime as i64, st.st_ctime_nsec as i64),
        };
        let node = self.manifest.nodes.len();
        self.manifest.nodes.push(Node {
            path,
            mode: tree_copy::safe_mode(st.st_mode).bits(),
            mtime_ns: ns(st.st_mtime as i64, st.st_mtime_nsec as i64),
            kind: Kind::File {
                size: 0,
                chunks: Vec::new(),
                stat: Some(stat),
            },
        });
        self.stats.files += 1;
        self.check_budget()?;
        let mut file = std::fs::File::from(fd);
        let (mut size, mut index) = (0u64, 0usize);
        // Room for the file as its status gave it (and one byte more, to see the end), at
        // most a chunk: a small file does not take a chunk's memory.
        let expected = u64::try_from(st.st_size).unwrap_or(0);
        loop {
            let room = expected.saturating_sub(size).saturating_add(1);
            let mut chunk = Vec::with_capacity(room.min(CHUNK_SIZE as u64) as usize);
            (&mut file)
                .take(CHUNK_SIZE as u64)
                .read_to_end(&mut chunk)?;
            if chunk.is_empty() {
                break;
            }
            let n = chunk.len() as u64;
            size += n;
            self.stats.bytes += n;
            self.stats.read_bytes += n;
            self.check_budget()?;
            if let Kind::File { chunks, .. } = &mut self.manifest.nodes[node].kind {
                chunks.push(String::new());
            }
            self.send(Job {
                node,
                index,
                bytes: chunk,
            })?;
            index += 1;
            if n < CHUNK_SIZE as u64 {
                break;
            }
        }
        if let Kind::File { size: s, .. } = &mut self.manifest.nodes[node].kind {
            *s = size;
        }
        Ok(())
    }

    fn send(&self, job: Job) -> io::Result<()> {
        if self.failed.load(Ordering::Relaxed) {
            return Err(io::Error::other(
                "a chunk of the snapshot could not be stored",
            ));
        }
        self.jobs
            .as_ref()
            .and_then(|tx| tx.send(job).ok())
            .ok_or_else(|| io::Error::other("the snapshot's workers stopped"))
    }
}
