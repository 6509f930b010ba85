//! `read`, `write` and `edit`, confined to the session's workspace.
//!
//! The workspace is written by sandboxed commands, so it may hold symbolic links to anywhere on
//! the host, FIFOs and huge files. Paths are therefore never handed to the kernel whole: they
//! are walked one component at a time from an open handle on the workspace directory, each step
//! with `O_NOFOLLOW`. A link is followed only by reading it and continuing the walk inside the
//! workspace, the way the sandbox sees it (relative targets, or absolute ones under
//! `/workspace`); one that leads anywhere else is refused. Only regular files are opened, never
//! blocking, and never read past a size cap. What the server creates there is handed to the
//! sandbox's user through the handles the walk holds, never by path: a path is resolved again
//! when used, and a directory on the way may have been swapped for a link by then.

use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Component, Path, PathBuf};

use base64::Engine as _;
use rustix::fs::{AtFlags, FileType, Mode, OFlags};
use rustix::io::Errno;
use serde::Deserialize;
use serde_json::{Value, json};

use super::mounts::MountTable;
use super::sandbox::WORKSPACE;
use super::{ToolOutput, identity};

/// Lines `read` returns when no range is given.
pub const DEFAULT_LINES: usize = 2000;
/// The longest line `read` shows whole.
pub const MAX_LINE_CHARS: usize = 2000;
/// Images up to this size are returned as image blocks.
const MAX_IMAGE_BYTES: u64 = 5 << 20;
/// Largest file `read` or `edit` loads, and the largest file `edit` may produce: both hold
/// the whole text in server memory.
pub const MAX_FILE_BYTES: u64 = 50 << 20;
/// Symbolic links one path may go through, as on Linux (beyond it, `ELOOP`).
const MAX_LINKS: usize = 40;

/// Why a path cannot be used, before any tool-specific wording.
#[derive(Debug)]
pub(crate) enum FileError {
    /// The entry, or a directory on the way to it, does not exist.
    Missing,
    /// The entry is a directory.
    Directory,
    /// The entry is a FIFO, socket or device: opening or reading it could block forever.
    Special(&'static str),
    /// Anything else, already worded for the model.
    Refused(String),
    /// A system call failed; the text follows the path in the message.
    Io(String),
}

impl FileError {
    /// The model-facing explanation for `file_path`, for the cases a tool does not word itself.
    pub(crate) fn message(&self, file_path: &str) -> String {
        match self {
            FileError::Missing => format!("`{file_path}` does not exist."),
            FileError::Directory => format!("`{file_path}` is a directory."),
            FileError::Special(kind) => format!(
                "`{file_path}` is a {kind}, not a regular file; file tools only open regular files (use bash for others)."
            ),
            FileError::Refused(m) => m.clone(),
            FileError::Io(m) => format!("`{file_path}` {m}"),
        }
    }
}

/// An open handle on the session's workspace directory: the root every path is walked from.
pub(crate) struct Workspace {
    root: OwnedFd,
}

/// What [`Workspace::locate`] does about a directory missing on the way.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Missing {
    /// The path does not exist: [`FileError::Missing`].
    Fail,
    /// Make it, and give it to the sandbox's user (`owner`) when the sandbox has its own.
    Create { owner: Option<u32> },
}

/// Where a path inside the workspace leads, with every symbolic link on the way resolved.
pub(crate) struct Located {
    /// The directory holding the entry, reached through real directories only.
    dir: OwnedFd,
    /// The entry's name in `dir`; `None` when the path names `dir` itself.
    name: Option<OsString>,
    /// The entry's path from the workspace root, free of links and `..`.
    pub(crate) rel: PathBuf,
}

impl Located {
    /// The directory holding the entry and the entry's name in it (`None`: the path names
    /// that directory itself), for callers that act on the entry through the handle.
    pub(crate) fn parent(&self) -> (BorrowedFd<'_>, Option<&OsStr>) {
        (self.dir.as_fd(), self.name.as_deref())
    }
}

/// One step of a walk: into a named entry, or up to the parent.
enum Step {
    Name(OsString),
    Up,
}

impl Workspace {
    /// Opens the workspace at `host` (the session's directory on this machine).
    pub(crate) fn open(host: &Path) -> Result<Self, FileError> {
        let root = rustix::fs::open(
            host,
            OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .map_err(|e| FileError::Refused(format!("the workspace is unavailable: {e}")))?;
        Ok(Workspace { root })
    }

    /// The workspace root's own handle.
    pub(crate) fn root(&self) -> BorrowedFd<'_> {
        self.root.as_fd()
    }

    /// Follows a model-facing path (`/workspace/a/b`, or `a/b` relative to it), doing what
    /// `missing` says about missing directories on the way. The final entry need not exist.
    pub(crate) fn locate(&self, file_path: &str, missing: Missing) -> Result<Located, FileError> {
        let pending = lexical_steps(file_path)?;
        Walk {
            ws: self,
            file_path,
            pending,
            dirs: Vec::new(),
            rel: PathBuf::new(),
            links: 0,
            missing,
        }
        .run()
    }
}

/// The components of a model-facing path, with `.` and `..` resolved lexically as before
/// (a `..` that climbs above the workspace is refused here).
fn lexical_steps(file_path: &str) -> Result<VecDeque<Step>, FileError> {
    let p = Path::new(file_path.trim());
    let rel = if p.is_absolute() {
        p.strip_prefix(WORKSPACE).map_err(|_| {
            FileError::Refused(format!("`{file_path}` is outside {WORKSPACE}: file tools work inside the workspace (use bash to look elsewhere)"))
        })?
    } else {
        p
    };
    let mut parts: Vec<OsString> = Vec::new();
    for c in rel.components() {
        match c {
            Component::Normal(part) => parts.push(part.to_os_string()),
            Component::CurDir => {}
            Component::ParentDir => {
                if parts.pop().is_none() {
                    return Err(FileError::Refused(format!(
                        "`{file_path}` leads outside {WORKSPACE}"
                    )));
                }
            }
            _ => {
                return Err(FileError::Refused(format!(
                    "`{file_path}` is not a valid path"
                )));
            }
        }
    }
    Ok(parts.into_iter().map(Step::Name).collect())
}

/// The state of one [`Workspace::locate`]: the directories entered so far (each opened from
/// the previous one without following links) and the steps still to take.
struct Walk<'a> {
    ws: &'a Workspace,
    file_path: &'a str,
    pending: VecDeque<Step>,
    dirs: Vec<OwnedFd>,
    rel: PathBuf,
    links: usize,
    missing: Missing,
}

impl Walk<'_> {
    fn run(mut self) -> Result<Located, FileError> {
        while let Some(step) = self.pending.pop_front() {
            let name = match step {
                Step::Up => {
                    self.up()?;
                    continue;
                }
                Step::Name(name) => name,
            };
            let last = self.pending.is_empty();
            match rustix::fs::statat(self.current(), &name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) if is_kind(&st, FileType::Symlink) => self.follow_link(&name)?,
                Ok(_) | Err(Errno::NOENT) if last => return self.finish(Some(name)),
                Ok(st) if is_kind(&st, FileType::Directory) => self.enter(&name)?,
                Ok(_) => {
                    return Err(FileError::Refused(format!(
                        "`{}` goes through {}, which is not a directory.",
                        self.file_path,
                        shown(&self.rel.join(&name))
                    )));
                }
                Err(Errno::NOENT) => match self.missing {
                    Missing::Create { owner } => self.make_dir(&name, owner)?,
                    Missing::Fail => return Err(FileError::Missing),
                },
                Err(e) => return Err(self.failed(e)),
            }
        }
        self.finish(None)
    }

    fn current(&self) -> BorrowedFd<'_> {
        self.dirs.last().unwrap_or(&self.ws.root).as_fd()
    }

    fn failed(&self, e: impl std::fmt::Display) -> FileError {
        FileError::Refused(format!("`{}` could not be followed: {e}", self.file_path))
    }

    fn outside(&self) -> FileError {
        FileError::Refused(format!(
            "`{}` leads outside {WORKSPACE} through a symbolic link; file tools only follow links that stay inside it.",
            self.file_path
        ))
    }

    fn up(&mut self) -> Result<(), FileError> {
        // Lexical `..` in the given path is already gone, so this one came from a link target.
        if self.dirs.pop().is_none() {
            return Err(self.outside());
        }
        self.rel.pop();
        Ok(())
    }

    /// Opens a subdirectory of the current one; `O_NOFOLLOW` makes a link swapped in since the
    /// `statat` fail instead of being followed.
    fn enter(&mut self, name: &OsStr) -> Result<(), FileError> {
        let dir = open_dir_at(self.current(), name).map_err(|e| self.failed(e))?;
        self.dirs.push(dir);
        self.rel.push(name);
        Ok(())
    }

    /// Makes a missing directory and enters it; one made here is given to `owner` through the
    /// handle `enter` opened (another writer may have made it first: that one is left as is).
    fn make_dir(&mut self, name: &OsStr, owner: Option<u32>) -> Result<(), FileError> {
        let made = match rustix::fs::mkdirat(self.current(), name, Mode::from_bits_truncate(0o777))
        {
            Ok(()) => true,
            Err(Errno::EXIST) => false,
            Err(e) => {
                return Err(FileError::Refused(format!(
                    "could not create the directory for `{}`: {e}",
                    self.file_path
                )));
            }
        };
        self.enter(name)?;
        if made && let Some(uid) = owner {
            adopt(self.current(), uid, &self.rel);
        }
        Ok(())
    }

    /// Continues the walk at a link's target, as the sandbox would resolve it.
    fn follow_link(&mut self, name: &OsStr) -> Result<(), FileError> {
        self.links += 1;
        if self.links > MAX_LINKS {
            return Err(FileError::Refused(format!(
                "`{}` goes through too many symbolic links.",
                self.file_path
            )));
        }
        let target =
            rustix::fs::readlinkat(self.current(), name, Vec::new()).map_err(|e| self.failed(e))?;
        let target = PathBuf::from(OsString::from_vec(target.into_bytes()));
        let target = if target.is_absolute() {
            // Inside the sandbox the workspace is mounted at /workspace, so such links are
            // ordinary; any other absolute target is outside.
            let inside = target
                .strip_prefix(WORKSPACE)
                .map_err(|_| self.outside())?
                .to_path_buf();
            self.dirs.clear();
            self.rel.clear();
            inside
        } else {
            target
        };
        for c in target.components().rev() {
            match c {
                Component::Normal(part) => self.pending.push_front(Step::Name(part.into())),
                Component::ParentDir => self.pending.push_front(Step::Up),
                _ => {}
            }
        }
        Ok(())
    }

    fn finish(mut self, name: Option<OsString>) -> Result<Located, FileError> {
        let dir = match self.dirs.pop() {
            Some(d) => d,
            None => self.ws.root.try_clone().map_err(|e| self.failed(e))?,
        };
        // Without a name, the path ended on a directory reached by `..` or a link: `dir`.
        let rel = match &name {
            Some(name) => self.rel.join(name),
            None => self.rel,
        };
        Ok(Located { dir, name, rel })
    }
}

/// Gives an entry the server just created (open as `fd`) to the sandbox's user, so commands in
/// the sandbox can change it too. A failure leaves it the server's, as it was before sandboxes
/// had users of their own: worth a warning, not a failed call.
fn adopt(fd: impl AsFd, uid: u32, rel: &Path) {
    if let Err(e) = identity::give(fd, uid) {
        tracing::warn!(path = %shown(rel), error = %e, "could not hand a workspace entry to the sandbox user");
    }
}

fn is_kind(st: &rustix::fs::Stat, kind: FileType) -> bool {
    FileType::from_raw_mode(st.st_mode) == kind
}

/// Opens directory `name` in `dir`, refusing a symbolic link.
pub(crate) fn open_dir_at(dir: BorrowedFd<'_>, name: &OsStr) -> std::io::Result<OwnedFd> {
    Ok(rustix::fs::openat(
        dir,
        name,
        OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// A directory's entries with their types (links as links), sorted by name so results are
/// stable.
pub(crate) fn entries(dir: BorrowedFd<'_>) -> Vec<(OsString, FileType)> {
    let Ok(reader) = rustix::fs::Dir::read_from(dir) else {
        return vec![];
    };
    let mut out = Vec::new();
    for entry in reader.flatten() {
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if name == "." || name == ".." {
            continue;
        }
        // Some filesystems do not report types in directory entries.
        let kind = match entry.file_type() {
            FileType::Unknown => match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => FileType::from_raw_mode(st.st_mode),
                Err(_) => continue,
            },
            kind => kind,
        };
        out.push((name.to_os_string(), kind));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// The words for a file type that is not a regular file.
fn kind_name(kind: FileType) -> &'static str {
    match kind {
        FileType::Fifo => "named pipe (FIFO)",
        FileType::Socket => "socket",
        FileType::CharacterDevice => "character device",
        FileType::BlockDevice => "block device",
        FileType::Symlink => "symbolic link",
        _ => "special file",
    }
}

/// Checks a file type before it is opened (and again after, against a swap in between).
fn regular(kind: FileType) -> Result<(), FileError> {
    match kind {
        FileType::RegularFile => Ok(()),
        FileType::Directory => Err(FileError::Directory),
        other => Err(FileError::Special(kind_name(other))),
    }
}

impl Located {
    /// The workspace root, or the directory this path names, opened without following links.
    pub(crate) fn open_dir(&self) -> Result<OwnedFd, FileError> {
        match &self.name {
            None => self.dir.try_clone(),
            Some(name) => open_dir_at(self.dir.as_fd(), name),
        }
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => FileError::Missing,
            _ => FileError::Io(format!("could not be opened as a directory: {e}")),
        })
    }

    /// Opens the existing regular file this path names, with its size.
    pub(crate) fn open_regular(&self, access: OFlags) -> Result<(File, u64), FileError> {
        let Some(name) = &self.name else {
            return Err(FileError::Directory);
        };
        open_regular_at(self.dir.as_fd(), name, access)
    }

    /// Creates the regular file this path names (it must not exist yet), given to `owner`.
    pub(crate) fn create_regular(&self, owner: Option<u32>) -> Result<File, FileError> {
        let file = self.create_file()?;
        if let Some(uid) = owner {
            adopt(&file, uid, &self.rel);
        }
        Ok(file)
    }

    /// Unlinks the non-directory entry this path names (a link itself, never its target).
    pub(crate) fn remove_entry(&self) -> std::io::Result<()> {
        let Some(name) = &self.name else {
            return Err(std::io::Error::other("is a directory"));
        };
        Ok(rustix::fs::unlinkat(
            self.dir.as_fd(),
            name,
            AtFlags::empty(),
        )?)
    }

    /// Whether this path names a directory with nothing in it.
    pub(crate) fn is_empty_dir(&self) -> bool {
        self.open_dir().is_ok_and(|d| entries(d.as_fd()).is_empty())
    }

    /// Removes the (empty) directory this path names.
    pub(crate) fn remove_dir(&self) -> std::io::Result<()> {
        let Some(name) = &self.name else {
            return Err(std::io::Error::other("is the root"));
        };
        Ok(rustix::fs::unlinkat(
            self.dir.as_fd(),
            name,
            AtFlags::REMOVEDIR,
        )?)
    }

    /// Creates the file this path names; it must not exist yet.
    fn create_file(&self) -> Result<File, FileError> {
        let Some(name) = &self.name else {
            return Err(FileError::Directory);
        };
        let fd = rustix::fs::openat(
            self.dir.as_fd(),
            name,
            OFlags::WRONLY | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::from_bits_truncate(0o666),
        )
        .map_err(|e| FileError::Io(format!("could not be created: {e}")))?;
        Ok(File::from(fd))
    }
}

/// Opens regular file `name` in `dir` without following a link, and without blocking: a FIFO
/// or device is refused before it is opened, and `O_NONBLOCK` covers one swapped in between.
pub(crate) fn open_regular_at(
    dir: BorrowedFd<'_>,
    name: &OsStr,
    access: OFlags,
) -> Result<(File, u64), FileError> {
    let io = |e: Errno| FileError::Io(format!("could not be opened: {e}"));
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(st) => regular(FileType::from_raw_mode(st.st_mode))?,
        Err(Errno::NOENT) => return Err(FileError::Missing),
        Err(e) => return Err(io(e)),
    }
    let flags = access | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
    let fd = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => fd,
        Err(Errno::NOENT) => return Err(FileError::Missing),
        Err(Errno::LOOP) => return Err(FileError::Special(kind_name(FileType::Symlink))),
        Err(e) => return Err(io(e)),
    };
    let st = rustix::fs::fstat(&fd).map_err(io)?;
    regular(FileType::from_raw_mode(st.st_mode))?;
    Ok((File::from(fd), u64::try_from(st.st_size).unwrap_or(0)))
}

/// Reads a file from its current position, up to `limit` bytes; `None` if there is more (the
/// size seen before opening does not bind a file that is still growing).
pub(crate) fn read_capped(file: &File, limit: u64) -> std::io::Result<Option<Vec<u8>>> {
    let mut bytes = Vec::new();
    file.take(limit + 1).read_to_end(&mut bytes)?;
    Ok((bytes.len() as u64 <= limit).then_some(bytes))
}

/// The model-facing form of a path relative to the workspace root.
pub(crate) fn shown(rel: &Path) -> String {
    if rel.as_os_str().is_empty() {
        WORKSPACE.to_string()
    } else {
        format!("{WORKSPACE}/{}", rel.display())
    }
}

fn parse<T: serde::de::DeserializeOwned>(
    input: &Value,
    tool: &str,
    form: &str,
) -> Result<T, ToolOutput> {
    serde_json::from_value(input.clone())
        .map_err(|e| ToolOutput::error(format!("Invalid {tool} input ({e}). Send {form}.")))
}

/// Runs a tool's file work off the async workers (opens and reads block).
async fn blocking<F>(tool: &str, work: F) -> ToolOutput
where
    F: FnOnce() -> ToolOutput + Send + 'static,
{
    tokio::task::spawn_blocking(work)
        .await
        .unwrap_or_else(|_| ToolOutput::error(format!("{tool} failed unexpectedly")))
}

#[derive(Deserialize)]
struct ReadInput {
    file_path: String,
    #[serde(default)]
    view_range: Option<Vec<i64>>,
}

fn image_type(path: &Path) -> Option<&'static str> {
    match path.extension()?.to_str()?.to_ascii_lowercase().as_str() {
        "png" => Some("image/png"),
        "jpg" | "jpeg" => Some("image/jpeg"),
        "gif" => Some("image/gif"),
        "webp" => Some("image/webp"),
        _ => None,
    }
}

/// `read`: numbered lines, an optional 1-based inclusive `view_range` (end ≤ 0 means to the
/// end), images as image blocks, binary files refused.
///
/// `hide`: the call was approved by `auto`, and the protected paths are kept from it.
pub async fn read(workspace: &Path, mounts: &MountTable, input: &Value, hide: bool) -> ToolOutput {
    let input: ReadInput = match parse(
        input,
        "read",
        r#"{"file_path": "/workspace/...", "view_range": [start, end]}"#,
    ) {
        Ok(i) => i,
        Err(e) => return e,
    };
    if let Some(on) = mounts.locate(&input.file_path) {
        if !on.mount.read_only {
            let (root, shown_as, mut input) =
                (on.mount.host.clone(), input.file_path.clone(), input);
            input.file_path = on_writable(&on, &shown_as);
            let rel = input.file_path.clone();
            let hide = hide.then(|| on.mount.sandbox.clone());
            let out = blocking("read", move || read_file(&root, &input, hide)).await;
            return renamed(out, &rel, &shown_as);
        }
        // Server-written, opened without following a link: the path is the entry's own.
        if hide && let Some(refused) = protected(&input.file_path, Some(&input.file_path)) {
            return refused;
        }
        let host = on.host;
        return blocking("read", move || read_mounted(&host, &input)).await;
    }
    let host = workspace.to_path_buf();
    let hide = hide.then(|| WORKSPACE.to_string());
    blocking("read", move || read_file(&host, &input, hide)).await
}

/// `read` of a path on a read-only mount: what the server put there, opened without
/// following a link.
fn read_mounted(host: &Path, input: &ReadInput) -> ToolOutput {
    use std::os::unix::fs::OpenOptionsExt as _;
    let p = &input.file_path;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc_nofollow())
        .open(host)
        .and_then(|f| {
            let meta = f.metadata()?;
            Ok((f, meta))
        });
    match opened {
        Ok((_, meta)) if meta.is_dir() => {
            ToolOutput::error(format!("`{p}` is a directory; use bash `ls` to list it."))
        }
        Ok((f, meta)) if meta.is_file() => render(p, f, meta.len(), Path::new(p), input),
        Ok(_) => ToolOutput::error(format!("`{p}` is not a regular file.")),
        Err(e) => ToolOutput::error(format!("`{p}` could not be read: {e}")),
    }
}

/// `O_NOFOLLOW`, so a mount's last path component is never a link.
fn libc_nofollow() -> i32 {
    OFlags::NOFOLLOW.bits() as i32
}

/// The refusal of a call `auto` approved whose path (`file_path` as given) leads to a protected
/// entry (`entry`, the sandbox path it resolves to; `None` when it is not protected).
fn protected(file_path: &str, entry: Option<&str>) -> Option<ToolOutput> {
    let entry = entry.filter(|e| super::protected::is_protected(e, false))?;
    let via = if entry == file_path {
        String::new()
    } else {
        format!(" (it leads to `{entry}`)")
    };
    Some(ToolOutput::error(format!(
        "`{file_path}`{via} is a protected file (keys and credentials): the `auto` permission policy keeps it \
         from the calls it approves. Tell the user if the task needs it."
    )))
}

/// The refusal of a call `auto` approved on `loc`, in the tree at `host` shown at `hide`
/// (`None`: the call sees everything).
fn protected_at(
    host: &Path,
    hide: Option<&str>,
    loc: &Located,
    file_path: &str,
) -> Option<ToolOutput> {
    let base = hide?;
    let entry = if loc.rel.as_os_str().is_empty() {
        base.to_string()
    } else {
        format!("{base}/{}", loc.rel.to_string_lossy())
    };
    if let Some(refused) = protected(file_path, Some(&entry)) {
        return Some(refused);
    }
    // A file with other names may be a protected one's hard link: only the tree can tell.
    let linked = loc.parent().1.is_some_and(|name| {
        rustix::fs::statat(loc.parent().0, name, AtFlags::SYMLINK_NOFOLLOW)
            .is_ok_and(|st| st.st_nlink > 1 && is_kind(&st, FileType::RegularFile))
    });
    if !linked {
        return None;
    }
    let root = super::masks::Root {
        host: host.to_path_buf(),
        sandbox: base.into(),
    };
    match super::masks::find(&[root], 0) {
        Ok(hidden) if !hidden.hides(Path::new(&entry)) => None,
        Ok(_) => Some(ToolOutput::error(format!(
            "`{file_path}` is a hard link to a protected file (keys and credentials): the `auto` permission policy \
             keeps it from the calls it approves. Tell the user if the task needs it."
        ))),
        Err(why) => Some(ToolOutput::error(format!(
            "`{file_path}` has other names, and the files could not be checked for protected ones: {why}."
        ))),
    }
}

fn read_file(host: &Path, input: &ReadInput, hide: Option<String>) -> ToolOutput {
    let p = &input.file_path;
    let located = Workspace::open(host).and_then(|ws| ws.locate(p, Missing::Fail));
    if let Ok(loc) = &located
        && let Some(refused) = protected_at(host, hide.as_deref(), loc, p)
    {
        return refused;
    }
    let opened = located.and_then(|loc| Ok((loc.open_regular(OFlags::RDONLY)?, loc.rel)));
    let ((file, len), rel) = match opened {
        Ok(o) => o,
        Err(FileError::Directory) => {
            return ToolOutput::error(format!(
                "`{p}` is a directory; use glob or bash `ls` to list it."
            ));
        }
        Err(e) => return ToolOutput::error(e.message(p)),
    };
    render(p, file, len, &rel, input)
}

/// What `read` shows of an open regular file of `len` bytes named `rel`.
fn render(p: &str, mut file: File, len: u64, rel: &Path, input: &ReadInput) -> ToolOutput {
    if let Some(media) = image_type(rel)
        && len <= MAX_IMAGE_BYTES
        && let Ok(Some(bytes)) = read_capped(&file, MAX_IMAGE_BYTES)
    {
        let data = base64::engine::general_purpose::STANDARD.encode(bytes);
        return ToolOutput {
            content: vec![
                json!({"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}),
            ],
            is_error: false,
        };
    }
    let too_large = || {
        ToolOutput::error(format!(
            "`{p}` is {len} bytes, too large to read; use bash (head, sed -n, grep) to look at parts."
        ))
    };
    if len > MAX_FILE_BYTES {
        return too_large();
    }
    let bytes = match file
        .rewind()
        .and_then(|()| read_capped(&file, MAX_FILE_BYTES))
    {
        Ok(Some(b)) => b,
        Ok(None) => return too_large(),
        Err(e) => return ToolOutput::error(format!("`{p}` could not be read: {e}")),
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return ToolOutput::error(format!(
            "`{p}` looks binary ({len} bytes); read shows text files only. Use bash (`file`, `xxd | head`) to inspect it."
        ));
    };
    if text.contains('\0') {
        return ToolOutput::error(format!(
            "`{p}` looks binary; use bash (`xxd | head`) to inspect it."
        ));
    }
    numbered(p, &text, input.view_range.as_deref())
}

/// The lines of `text` in `view_range`, numbered, long lines cut.
fn numbered(file_path: &str, text: &str, view_range: Option<&[i64]>) -> ToolOutput {
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    let (start, end) = match view_range {
        None => (1, total.min(DEFAULT_LINES)),
        Some([s, e]) if *s >= 1 => {
            let end = if *e <= 0 {
                total
            } else {
                (*e as usize).min(total)
            };
            (*s as usize, end)
        }
        Some(_) => {
            return ToolOutput::error(
                "`view_range` must be [start_line, end_line] with start_line >= 1 (end_line <= 0 reads to the end).",
            );
        }
    };
    if total == 0 {
        return ToolOutput::text(format!("`{file_path}` is empty."));
    }
    if start > total {
        return ToolOutput::error(format!(
            "`view_range` starts at line {start} but the file has {total} lines."
        ));
    }
    let mut out = String::new();
    for (i, line) in lines.iter().enumerate().take(end).skip(start - 1) {
        let shown: String = line.chars().take(MAX_LINE_CHARS).collect();
        let cut = if shown.len() < line.len() {
            " [line truncated]"
        } else {
            ""
        };
        out.push_str(&format!("{:>6}\t{shown}{cut}\n", i + 1));
    }
    if end < total {
        out.push_str(&format!(
            "[showing lines {start}-{end} of {total}; pass view_range to read more]\n"
        ));
    }
    ToolOutput::text(out)
}

#[derive(Deserialize)]
struct WriteInput {
    file_path: String,
    content: String,
}

/// `write`: creates or overwrites a file (and its parent directories). What it creates is given
/// to `owner`, the sandbox's own user if it has one.
pub async fn write(
    workspace: &Path,
    mounts: &MountTable,
    input: &Value,
    owner: Option<u32>,
    hide: bool,
) -> ToolOutput {
    let input: WriteInput = match parse(
        input,
        "write",
        r#"{"file_path": "/workspace/...", "content": "..."}"#,
    ) {
        Ok(i) => i,
        Err(e) => return e,
    };
    let mut input = input;
    let (host, shown_as) = match mount_target(mounts, &mut input.file_path) {
        Err(refused) => return refused,
        Ok(None) => (workspace.to_path_buf(), None),
        Ok(Some(t)) => (t.0, Some(t.1)),
    };
    let hide = hide.then(|| sandbox_base(mounts, shown_as.as_deref()));
    let rel = input.file_path.clone();
    let out = blocking("write", move || write_file(&host, &input, owner, hide)).await;
    match shown_as {
        Some(s) => renamed(out, &rel, &s),
        None => out,
    }
}

fn write_file(
    host: &Path,
    input: &WriteInput,
    owner: Option<u32>,
    hide: Option<String>,
) -> ToolOutput {
    let p = &input.file_path;
    let loc = match Workspace::open(host).and_then(|ws| ws.locate(p, Missing::Create { owner })) {
        Ok(l) => l,
        Err(e) => return ToolOutput::error(e.message(p)),
    };
    if let Some(refused) = protected_at(host, hide.as_deref(), &loc, p) {
        return refused;
    }
    // Overwrite in place (keeping the file's owner and mode), or create it exclusively so a
    // link or FIFO appearing in between is an error rather than followed.
    let file = match loc.open_regular(OFlags::WRONLY) {
        Ok((file, _)) => file.set_len(0).map(|()| file).map_err(|e| e.to_string()),
        Err(FileError::Missing) => loc.create_file().map_err(|e| e.message(p)).inspect(|file| {
            if let Some(uid) = owner {
                adopt(file, uid, &loc.rel);
            }
        }),
        Err(e) => Err(e.message(p)),
    };
    let written = file.and_then(|mut f| {
        f.write_all(input.content.as_bytes())
            .map_err(|e| format!("`{p}` could not be written: {e}"))
    });
    match written {
        Ok(()) => ToolOutput::text(format!(
            "Wrote {} bytes to {}.",
            input.content.len(),
            shown(&loc.rel)
        )),
        Err(e) => ToolOutput::error(e),
    }
}

#[derive(Deserialize)]
struct EditInput {
    file_path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: Option<bool>,
}

/// `edit`: replaces `old_string`, which must occur exactly once unless `replace_all`. Files
/// over [`MAX_FILE_BYTES`], before or after the edit, are refused.
pub async fn edit(workspace: &Path, mounts: &MountTable, input: &Value, hide: bool) -> ToolOutput {
    let form = r#"{"file_path": "/workspace/...", "old_string": "...", "new_string": "...", "replace_all": false}"#;
    let input: EditInput = match parse(input, "edit", form) {
        Ok(i) => i,
        Err(e) => return e,
    };
    if input.old_string.is_empty() {
        return ToolOutput::error("`old_string` must not be empty; to create a file use write.");
    }
    if input.old_string == input.new_string {
        return ToolOutput::error("`old_string` and `new_string` are the same; nothing to change.");
    }
    let mut input = input;
    let (host, shown_as) = match mount_target(mounts, &mut input.file_path) {
        Err(refused) => return refused,
        Ok(None) => (workspace.to_path_buf(), None),
        Ok(Some(t)) => (t.0, Some(t.1)),
    };
    let hide = hide.then(|| sandbox_base(mounts, shown_as.as_deref()));
    let rel = input.file_path.clone();
    let out = blocking("edit", move || edit_file(&host, &input, hide)).await;
    match shown_as {
        Some(s) => renamed(out, &rel, &s),
        None => out,
    }
}

/// Where a write to `file_path` goes when it is on a mount: refused on a read-only one; on a
/// writable one (a memory store) the mount's host directory becomes the root the path is
/// walked from, so links there are held to the mount as they are to the workspace.
/// `file_path` is rewritten relative to that root; the original is returned for messages.
/// Where the tree a write or edit works in appears in the sandbox: the writable mount the
/// model's path `on_mount` lies on, else the workspace.
fn sandbox_base(mounts: &MountTable, on_mount: Option<&str>) -> String {
    on_mount
        .and_then(|p| mounts.locate(p))
        .map_or_else(|| WORKSPACE.to_string(), |on| on.mount.sandbox.clone())
}

fn mount_target(
    mounts: &MountTable,
    file_path: &mut String,
) -> Result<Option<(std::path::PathBuf, String)>, ToolOutput> {
    let Some(on) = mounts.locate(file_path) else {
        return Ok(None);
    };
    if on.mount.read_only {
        return Err(ToolOutput::error(super::mounts::read_only_message(
            file_path,
        )));
    }
    let original = file_path.clone();
    let root = on.mount.host.clone();
    *file_path = on_writable(&on, &original);
    Ok(Some((root, original)))
}

/// The path of `file_path` relative to the writable mount it is on.
fn on_writable(on: &super::mounts::OnMount<'_>, file_path: &str) -> String {
    file_path
        .trim_end_matches('/')
        .strip_prefix(&on.mount.sandbox)
        .unwrap_or("")
        .trim_start_matches('/')
        .to_string()
}

/// A result about `rel` (walked from a mount's root) worded with the path the model used.
fn renamed(mut out: ToolOutput, rel: &str, shown_as: &str) -> ToolOutput {
    let workspace_form = shown(Path::new(rel));
    for block in &mut out.content {
        if let Some(Value::String(t)) = block.get_mut("text") {
            *t = t
                .replace(&workspace_form, shown_as)
                .replace(&format!("`{rel}`"), &format!("`{shown_as}`"));
        }
    }
    out
}

fn edit_file(host: &Path, input: &EditInput, hide: Option<String>) -> ToolOutput {
    let p = &input.file_path;
    let located = Workspace::open(host).and_then(|ws| ws.locate(p, Missing::Fail));
    if let Ok(loc) = &located
        && let Some(refused) = protected_at(host, hide.as_deref(), loc, p)
    {
        return refused;
    }
    let opened = located.and_then(|loc| Ok((loc.open_regular(OFlags::RDWR)?, loc.rel)));
    let ((mut file, len), rel) = match opened {
        Ok(o) => o,
        Err(FileError::Missing) => {
            return ToolOutput::error(format!("`{p}` does not exist; create it with write."));
        }
        Err(e) => return ToolOutput::error(e.message(p)),
    };
    let too_large = |len: u64| {
        ToolOutput::error(format!(
            "`{p}` is {len} bytes; edit works on files up to {MAX_FILE_BYTES} bytes. Use bash (sed -i, or a script) for larger ones."
        ))
    };
    if len > MAX_FILE_BYTES {
        return too_large(len);
    }
    let text = match read_capped(&file, MAX_FILE_BYTES) {
        Ok(Some(bytes)) => match String::from_utf8(bytes) {
            Ok(t) => t,
            Err(_) => {
                return ToolOutput::error(format!(
                    "`{p}` could not be read as text: stream did not contain valid UTF-8"
                ));
            }
        },
        Ok(None) => return too_large(MAX_FILE_BYTES + 1),
        Err(e) => return ToolOutput::error(format!("`{p}` could not be read as text: {e}")),
    };
    let (updated, count) = match replaced(input, &text) {
        Ok(r) => r,
        Err(e) => return e,
    };
    let saved = file
        .rewind()
        .and_then(|()| file.write_all(updated.as_bytes()))
        .and_then(|()| file.set_len(updated.len() as u64));
    match saved {
        Ok(()) => ToolOutput::text(format!(
            "Replaced {} occurrence{} in {}.",
            count,
            if count == 1 { "" } else { "s" },
            shown(&rel)
        )),
        Err(e) => ToolOutput::error(format!("`{p}` could not be written: {e}")),
    }
}

/// `text` with the edit applied, and how many occurrences it replaced; refused when
/// `old_string` is missing or ambiguous, or the result would exceed [`MAX_FILE_BYTES`] (many
/// replacements can multiply the size).
fn replaced(input: &EditInput, text: &str) -> Result<(String, usize), ToolOutput> {
    let p = &input.file_path;
    let count = text.matches(&input.old_string).count();
    let replace_all = input.replace_all.unwrap_or(false);
    if count == 0 {
        return Err(ToolOutput::error(format!(
            "`old_string` was not found in {p}; read the file and copy the text exactly, including whitespace."
        )));
    }
    if count > 1 && !replace_all {
        return Err(ToolOutput::error(format!(
            "`old_string` occurs {count} times in {p}; include more surrounding text to make it unique, or set \"replace_all\": true."
        )));
    }
    let n = if replace_all { count } else { 1 };
    let size = (text.len() - n * input.old_string.len()) as u64
        + (n as u64).saturating_mul(input.new_string.len() as u64);
    if size > MAX_FILE_BYTES {
        return Err(ToolOutput::error(format!(
            "the edit would make `{p}` {size} bytes, over edit's limit of {MAX_FILE_BYTES} bytes; use bash for this change."
        )));
    }
    let updated = if replace_all {
        text.replace(&input.old_string, &input.new_string)
    } else {
        text.replacen(&input.old_string, &input.new_string, 1)
    };
    Ok((updated, count))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::{MetadataExt, symlink};
    use std::time::Duration;

    use super::*;

    /// A workspace and a directory outside it, standing for the rest of the host.
    fn dirs() -> (tempfile::TempDir, tempfile::TempDir) {
        (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap())
    }

    fn rel(ws: &Path, file_path: &str) -> Result<PathBuf, String> {
        Workspace::open(ws)
            .and_then(|w| w.locate(file_path, Missing::Fail))
            .map(|l| l.rel)
            .map_err(|e| e.message(file_path))
    }

    fn text(out: &ToolOutput) -> &str {
        out.content[0]["text"].as_str().unwrap()
    }

    /// Runs a tool call, failing the test instead of hanging if it blocks.
    async fn bounded(call: impl std::future::Future<Output = ToolOutput>) -> ToolOutput {
        tokio::time::timeout(Duration::from_secs(10), call)
            .await
            .expect("the tool call blocked")
    }

    /// The sandbox user writes hand what they create to: a session's own when the tests run as
    /// root (as the server does), else none.
    fn sandbox_user() -> Option<u32> {
        identity::running_as_root().then(|| identity::session_uid("sesn_files_test"))
    }

    /// Who owns `path` (not following a link).
    fn owner_of(path: &Path) -> u32 {
        std::fs::symlink_metadata(path).unwrap().uid()
    }

    /// The owner of what the tests create themselves.
    fn own_uid() -> u32 {
        owner_of(Path::new("/proc/self"))
    }

    /// Who write's new entries should belong to.
    fn adopter() -> u32 {
        sandbox_user().unwrap_or_else(own_uid)
    }

    async fn write_to(ws: &Path, file_path: &str, content: &str) -> ToolOutput {
        let input = json!({"file_path": file_path, "content": content});
        bounded(write(
            ws,
            &MountTable::default(),
            &input,
            sandbox_user(),
            false,
        ))
        .await
    }

    async fn edit_in(ws: &Path, file_path: &str, old: &str, new: &str) -> ToolOutput {
        let input = json!({"file_path": file_path, "old_string": old, "new_string": new, "replace_all": true});
        bounded(edit(ws, &MountTable::default(), &input, false)).await
    }

    async fn read_at(ws: &Path, file_path: &str) -> ToolOutput {
        bounded(read(
            ws,
            &MountTable::default(),
            &json!({"file_path": file_path}),
            false,
        ))
        .await
    }

    #[test]
    fn resolution_stays_inside() {
        let (ws, _) = dirs();
        let dir = ws.path();
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        assert_eq!(
            rel(dir, "/workspace/sub/a.txt").unwrap(),
            Path::new("sub/a.txt")
        );
        assert_eq!(rel(dir, "sub/../b.txt").unwrap(), Path::new("b.txt"));
        assert_eq!(rel(dir, "/workspace").unwrap(), Path::new(""));
        assert!(rel(dir, "/etc/passwd").unwrap_err().contains("outside"));
        assert!(rel(dir, "../x").unwrap_err().contains("outside"));
        assert!(
            rel(dir, "/workspace/../etc")
                .unwrap_err()
                .contains("outside")
        );
        symlink("/etc", dir.join("link")).unwrap();
        assert!(
            rel(dir, "link/passwd")
                .unwrap_err()
                .contains("symbolic link")
        );
        assert!(
            rel(dir, "link/new-file")
                .unwrap_err()
                .contains("symbolic link")
        );
        symlink("sub/../../..", dir.join("up")).unwrap();
        assert!(rel(dir, "up/x").unwrap_err().contains("symbolic link"));
        symlink("loop", dir.join("loop")).unwrap();
        assert!(rel(dir, "loop").unwrap_err().contains("too many"));
    }

    #[test]
    fn links_inside_are_resolved_as_the_sandbox_sees_them() {
        let (ws, _) = dirs();
        let dir = ws.path();
        std::fs::create_dir_all(dir.join("a/b")).unwrap();
        symlink("a/b", dir.join("rel")).unwrap();
        symlink("/workspace/a", dir.join("abs")).unwrap();
        symlink("../..", dir.join("a/b/top")).unwrap();
        assert_eq!(rel(dir, "rel/f").unwrap(), Path::new("a/b/f"));
        assert_eq!(rel(dir, "abs/b/f").unwrap(), Path::new("a/b/f"));
        assert_eq!(rel(dir, "rel/top/f").unwrap(), Path::new("f"));
        assert_eq!(rel(dir, "rel/top").unwrap(), Path::new(""));
    }

    #[tokio::test]
    async fn write_never_follows_a_dangling_link_out() {
        let (ws, out) = dirs();
        let escaped = out.path().join("ESCAPED");
        symlink(&escaped, ws.path().join("evil")).unwrap();
        let res = write_to(ws.path(), "/workspace/evil", "x").await;
        assert!(res.is_error && text(&res).contains("outside"), "{res:?}");
        assert!(!escaped.exists());
    }

    #[tokio::test]
    async fn write_never_creates_through_a_linked_directory() {
        let (ws, out) = dirs();
        symlink(out.path(), ws.path().join("d")).unwrap();
        symlink(out.path().join("missing"), ws.path().join("gone")).unwrap();
        for path in ["d/new.txt", "d/sub/new.txt", "gone/sub/new.txt"] {
            let res = write_to(ws.path(), path, "x").await;
            assert!(res.is_error && text(&res).contains("outside"), "{res:?}");
        }
        assert_eq!(std::fs::read_dir(out.path()).unwrap().count(), 0);
        assert_eq!(owner_of(out.path()), own_uid());
    }

    #[tokio::test]
    async fn read_and_edit_refuse_links_to_outside_files() {
        let (ws, out) = dirs();
        let secret = out.path().join("secret.txt");
        std::fs::write(&secret, "host secret").unwrap();
        symlink(&secret, ws.path().join("s")).unwrap();
        let res = read_at(ws.path(), "s").await;
        assert!(
            res.is_error && !text(&res).contains("host secret"),
            "{res:?}"
        );
        let res = edit_in(ws.path(), "s", "host", "pwned").await;
        assert!(res.is_error && text(&res).contains("outside"), "{res:?}");
        assert_eq!(std::fs::read_to_string(&secret).unwrap(), "host secret");
    }

    #[tokio::test]
    async fn writes_through_links_inside_land_inside_and_are_adopted() {
        let (ws, _) = dirs();
        let dir = ws.path();
        symlink("made/here.txt", dir.join("ahead")).unwrap();
        let res = write_to(dir, "ahead", "hi").await;
        assert!(!res.is_error && text(&res).contains("/workspace/made/here.txt"));
        assert_eq!(owner_of(&dir.join("made")), adopter());
        assert_eq!(owner_of(&dir.join("made/here.txt")), adopter());
        assert_eq!(
            owner_of(&dir.join("ahead")),
            own_uid(),
            "the link is not given"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("made/here.txt")).unwrap(),
            "hi"
        );
        let res = edit_in(dir, "ahead", "hi", "ho").await;
        assert!(!res.is_error, "{res:?}");
        assert_eq!(text(&read_at(dir, "ahead").await), "     1\tho\n");
    }

    #[tokio::test]
    async fn write_adopts_what_it_creates_and_only_that() {
        let (ws, _) = dirs();
        let dir = ws.path();
        std::fs::create_dir(dir.join("a")).unwrap();
        std::fs::write(dir.join("kept.txt"), "mine").unwrap();
        let res = write_to(dir, "/workspace/a/b/c.txt", "one").await;
        assert!(!res.is_error, "{res:?}");
        assert_eq!(owner_of(&dir.join("a")), own_uid(), "it existed already");
        assert_eq!(owner_of(&dir.join("a/b")), adopter());
        assert_eq!(owner_of(&dir.join("a/b/c.txt")), adopter());
        let res = write_to(dir, "kept.txt", "two").await;
        assert!(!res.is_error, "{res:?}");
        assert_eq!(
            std::fs::read_to_string(dir.join("kept.txt")).unwrap(),
            "two"
        );
        assert_eq!(
            owner_of(&dir.join("kept.txt")),
            own_uid(),
            "overwritten in place"
        );
        let res = write_to(dir, "a", "x").await;
        assert!(res.is_error && text(&res).contains("is a directory"));
    }

    #[tokio::test]
    async fn fifos_are_refused_without_blocking() {
        let (ws, _) = dirs();
        let root = rustix::fs::open(ws.path(), OFlags::DIRECTORY, Mode::empty()).unwrap();
        let mode = Mode::from_bits_truncate(0o666);
        rustix::fs::mknodat(&root, "pipe", FileType::Fifo, mode, 0).unwrap();
        let res = read_at(ws.path(), "pipe").await;
        assert!(res.is_error && text(&res).contains("named pipe"), "{res:?}");
        let res = write_to(ws.path(), "pipe", "x").await;
        assert!(res.is_error && text(&res).contains("named pipe"), "{res:?}");
        let res = edit_in(ws.path(), "pipe", "a", "b").await;
        assert!(res.is_error && text(&res).contains("named pipe"), "{res:?}");
    }

    #[tokio::test]
    async fn edit_refuses_files_over_the_cap() {
        let (ws, _) = dirs();
        let big = std::fs::File::create(ws.path().join("big.txt")).unwrap();
        big.set_len(MAX_FILE_BYTES + 1).unwrap();
        let res = edit_in(ws.path(), "big.txt", "a", "b").await;
        assert!(res.is_error && text(&res).contains("up to"), "{res:?}");
        // Nor may replacements grow a small file past it.
        std::fs::write(ws.path().join("small.txt"), "a".repeat(1000)).unwrap();
        let huge = "b".repeat(60_000);
        let res = edit_in(ws.path(), "small.txt", "a", &huge).await;
        assert!(
            res.is_error && text(&res).contains("over edit's limit"),
            "{res:?}"
        );
    }
}
