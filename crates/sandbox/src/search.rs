//! `glob` and `grep` over the workspace. Trees are walked from directory handles one entry at
//! a time without following links (see `files`), so neither a link nor a FIFO nor a huge file
//! planted by a sandboxed command can take a search outside the workspace, hang it or exhaust
//! the server's memory. Matching uses the ripgrep crates (`globset`, `grep-searcher`, and
//! `ignore`'s gitignore rules).

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use globset::GlobMatcher;
use grep_regex::RegexMatcher;
use grep_searcher::sinks::UTF8;
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder};
use ignore::gitignore::{Gitignore, GitignoreBuilder};
use rustix::fs::{AtFlags, FileType, OFlags};
use serde::Deserialize;
use serde_json::Value;

use super::ToolOutput;
use super::files::{
    FileError, MAX_FILE_BYTES, Missing, Workspace, entries, open_dir_at, open_regular_at,
    read_capped, shown,
};
use super::masks::{self, Masks};
use super::sandbox::WORKSPACE;

/// What a search under `auto` passes over: the workspace's protected entries (see `masks`),
/// or why they could not be found (then it does not search).
fn hidden_from(host: &Path, hide: bool) -> Result<Masks, ToolOutput> {
    if !hide {
        return Ok(Masks::default());
    }
    let root = masks::Root {
        host: host.to_path_buf(),
        sandbox: WORKSPACE.into(),
    };
    masks::find(&[root], 0).map_err(|why| {
        ToolOutput::error(format!(
            "The workspace could not be checked for protected files, which the `auto` permission policy keeps \
             from the calls it approves: {why}. Nothing was searched."
        ))
    })
}

/// The refusal of a search `auto` approved whose path leads into what `hidden` hides.
fn hidden_path(hidden: &Masks, rel: &Path, path: &str) -> Option<ToolOutput> {
    hidden.hides(&label(rel)).then(|| {
        ToolOutput::error(format!(
            "`{path}` leads to {}, which is protected (keys and credentials): the `auto` permission policy keeps it \
             from the calls it approves. Tell the user if the task needs it.",
            shown(rel)
        ))
    })
}

/// Most paths `glob` and matching lines `grep` return.
pub const MAX_RESULTS: usize = 500;
/// Directory levels below the searched path that glob and grep enter: each level keeps a
/// descriptor open, and a sandboxed command can nest directories without limit.
const MAX_DEPTH: usize = 64;
/// Longest line grep buffers; a file with a longer one (say, gigabytes without a newline) is
/// skipped rather than held in memory.
const MAX_LINE_BYTES: usize = 8 << 20;
/// Largest `.gitignore` or `.ignore` file grep reads.
const MAX_RULES_BYTES: u64 = 1 << 20;

#[derive(Deserialize)]
struct GlobInput {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
}

#[derive(Deserialize)]
struct GrepInput {
    pattern: String,
    #[serde(default)]
    path: Option<String>,
}

/// What a walk does at each directory and entry.
trait Visitor {
    /// Entering a directory (`rel` from the workspace root), before its entries.
    fn enter(&mut self, _dir: BorrowedFd<'_>, _rel: &Path) {}
    /// Leaving the directory last entered.
    fn leave(&mut self) {}
    /// An entry of the current directory; for a directory, returns whether to enter it.
    fn visit(&mut self, dir: BorrowedFd<'_>, name: &OsStr, kind: FileType, rel: &Path) -> bool;
}

/// Walks the tree under `dir` (at `rel` from the workspace root) depth-first in name order,
/// never following a link, and passing over what `hidden` hides. Returns whether a directory
/// was too deep to enter.
fn walk(dir: &OwnedFd, rel: &Path, depth: usize, hidden: &Masks, v: &mut impl Visitor) -> bool {
    v.enter(dir.as_fd(), rel);
    let mut too_deep = false;
    for (name, kind) in entries(dir.as_fd()) {
        let child = rel.join(&name);
        if hidden.hides(&label(&child)) {
            continue;
        }
        if !v.visit(dir.as_fd(), &name, kind, &child) || kind != FileType::Directory {
            continue;
        }
        if depth >= MAX_DEPTH {
            too_deep = true;
        } else if let Ok(sub) = open_dir_at(dir.as_fd(), &name) {
            too_deep |= walk(&sub, &child, depth + 1, hidden, v);
        }
    }
    v.leave();
    too_deep
}

/// Collects the regular files whose path below `base` matches a glob, with their mtimes.
struct GlobFiles<'a> {
    base: PathBuf,
    matcher: &'a GlobMatcher,
    found: Vec<((i128, i128), PathBuf)>,
}

impl Visitor for GlobFiles<'_> {
    fn visit(&mut self, dir: BorrowedFd<'_>, name: &OsStr, kind: FileType, rel: &Path) -> bool {
        if name == ".git" {
            return false;
        }
        if kind == FileType::RegularFile
            && self
                .matcher
                .is_match(rel.strip_prefix(&self.base).unwrap_or(rel))
        {
            // Widened: the stat fields' types differ between targets.
            let modified = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
                .map(|st| (i128::from(st.st_mtime), i128::from(st.st_mtime_nsec)))
                .unwrap_or_default();
            self.found.push((modified, rel.to_path_buf()));
        }
        kind == FileType::Directory
    }
}

/// `glob`: paths under `path` (default the workspace) matching a doublestar pattern, newest
/// first.
///
/// `hide`: the call was approved by `auto`, and the protected paths are kept from it.
pub async fn glob(workspace: &Path, input: &Value, hide: bool) -> ToolOutput {
    let input: GlobInput = match serde_json::from_value(input.clone()) {
        Ok(i) => i,
        Err(e) => {
            return ToolOutput::error(format!(
                "Invalid glob input ({e}). Send {{\"pattern\": \"**/*.rs\", \"path\": \"/workspace\"}}."
            ));
        }
    };
    let matcher = match globset::GlobBuilder::new(&input.pattern)
        .literal_separator(true)
        .build()
    {
        Ok(g) => g.compile_matcher(),
        Err(e) => return ToolOutput::error(format!("`pattern` is not a valid glob: {e}")),
    };
    let host = workspace.to_path_buf();
    tokio::task::spawn_blocking(move || glob_files(&host, &input, &matcher, hide))
        .await
        .unwrap_or_else(|_| ToolOutput::error("glob failed unexpectedly"))
}

fn glob_files(host: &Path, input: &GlobInput, matcher: &GlobMatcher, hide: bool) -> ToolOutput {
    let path = input.path.as_deref().unwrap_or(WORKSPACE);
    let hidden = match hidden_from(host, hide) {
        Ok(h) => h,
        Err(refused) => return refused,
    };
    let none = || ToolOutput::text(format!("No files match `{}`.", input.pattern));
    let located = match Workspace::open(host).and_then(|ws| ws.locate(path, Missing::Fail)) {
        Ok(l) => l,
        Err(FileError::Missing) => return none(),
        Err(e) => return ToolOutput::error(e.message(path)),
    };
    if let Some(refused) = hidden_path(&hidden, &located.rel, path) {
        return refused;
    }
    // A missing path or a file lists nothing, as before.
    let Ok(dir) = located.open_dir() else {
        return none();
    };
    let mut files = GlobFiles {
        base: located.rel.clone(),
        matcher,
        found: Vec::new(),
    };
    let too_deep = walk(&dir, &located.rel, 0, &hidden, &mut files);
    let mut found = files.found;
    found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
    if found.is_empty() {
        return none();
    }
    let total = found.len();
    let lines: Vec<String> = found
        .iter()
        .take(MAX_RESULTS)
        .map(|(_, rel)| shown(rel))
        .collect();
    let mut out = lines.join("\n");
    if total > lines.len() {
        out.push_str(&format!(
            "\n[{total} files match; showing the newest {}. Narrow the pattern or path.]",
            lines.len()
        ));
    }
    if too_deep {
        out.push_str(&too_deep_note());
    }
    ToolOutput::text(out)
}

fn too_deep_note() -> String {
    format!("\n[directories more than {MAX_DEPTH} levels below the path were not searched.]")
}

/// The model-facing path that gitignore rules are matched against.
fn label(rel: &Path) -> PathBuf {
    Path::new(WORKSPACE).join(rel)
}

/// One directory's ignore rules, applied the way ripgrep's walker applies them.
struct Rules {
    ignore: Option<Gitignore>,
    gitignore: Option<Gitignore>,
    /// The directory holds `.git`: `.gitignore` files apply in it and below, not above.
    repo_root: bool,
}

impl Rules {
    fn load(dir: BorrowedFd<'_>, rel: &Path) -> Self {
        Rules {
            ignore: rules_file(dir, ".ignore", rel),
            gitignore: rules_file(dir, ".gitignore", rel),
            repo_root: rustix::fs::statat(dir, ".git", AtFlags::SYMLINK_NOFOLLOW).is_ok(),
        }
    }
}

/// Reads an ignore file like any file tool would: regular files only, not through a link,
/// and not past [`MAX_RULES_BYTES`].
fn rules_file(dir: BorrowedFd<'_>, name: &str, rel: &Path) -> Option<Gitignore> {
    let (file, _) = open_regular_at(dir, OsStr::new(name), OFlags::RDONLY).ok()?;
    let bytes = read_capped(&file, MAX_RULES_BYTES).ok()??;
    let mut builder = GitignoreBuilder::new(label(rel));
    for line in String::from_utf8_lossy(&bytes).lines() {
        let _ = builder.add_line(None, line);
    }
    builder.build().ok()
}

/// Whether rules ignore (`Some(true)`) or re-include (`Some(false)`) a path: `.ignore` rules
/// come before `.gitignore` ones, deeper directories before shallower, and `.gitignore` only
/// counts inside a git repository.
fn ignored(levels: &[Rules], path: &Path, is_dir: bool) -> Option<bool> {
    let decide = |g: &Option<Gitignore>| {
        let m = g.as_ref()?.matched(path, is_dir);
        (!m.is_none()).then(|| m.is_ignore())
    };
    if let Some(v) = levels.iter().rev().find_map(|r| decide(&r.ignore)) {
        return Some(v);
    }
    if !levels.iter().any(|r| r.repo_root) {
        return None;
    }
    for r in levels.iter().rev() {
        if let Some(v) = decide(&r.gitignore) {
            return Some(v);
        }
        if r.repo_root {
            break;
        }
    }
    None
}

/// Searches files for matching lines, keeping the first [`MAX_RESULTS`] and counting the
/// rest and the files it had to skip.
struct Grep<'a> {
    matcher: &'a RegexMatcher,
    searcher: Searcher,
    levels: Vec<Rules>,
    lines: Vec<String>,
    total: usize,
    too_large: usize,
    failed: usize,
}

impl<'a> Grep<'a> {
    fn new(matcher: &'a RegexMatcher) -> Self {
        Grep {
            matcher,
            searcher: SearcherBuilder::new()
                .binary_detection(BinaryDetection::quit(0))
                .line_number(true)
                .heap_limit(Some(MAX_LINE_BYTES))
                .build(),
            levels: Vec::new(),
            lines: Vec::new(),
            total: 0,
            too_large: 0,
            failed: 0,
        }
    }

    fn search(&mut self, file: &File, len: u64, rel: &Path) {
        if len > MAX_FILE_BYTES {
            self.too_large += 1;
            return;
        }
        let shown = shown(rel);
        let (lines, total) = (&mut self.lines, &mut self.total);
        let sink = UTF8(|n, line| {
            *total += 1;
            if lines.len() < MAX_RESULTS {
                let line: String = line.trim_end().chars().take(500).collect();
                lines.push(format!("{shown}:{n}:{line}"));
            }
            Ok(true)
        });
        if self.searcher.search_file(self.matcher, file, sink).is_err() {
            self.failed += 1;
        }
    }

    /// The notes about what was left out, one per line.
    fn notes(&self, too_deep: bool) -> String {
        let mut out = String::new();
        if self.total > self.lines.len() {
            out.push_str(&format!(
                "\n[{} matching lines; showing the first {}. Narrow the pattern or path.]",
                self.total,
                self.lines.len()
            ));
        }
        if self.too_large > 0 {
            out.push_str(&format!(
                "\n[skipped {} file(s) over {MAX_FILE_BYTES} bytes; use bash grep on them.]",
                self.too_large
            ));
        }
        if self.failed > 0 {
            out.push_str(&format!(
                "\n[skipped {} file(s) that could not be searched (a line over {MAX_LINE_BYTES} bytes, or a match that is not UTF-8); use bash grep on them.]",
                self.failed
            ));
        }
        if too_deep {
            out.push_str(&too_deep_note());
        }
        out
    }
}

impl Visitor for Grep<'_> {
    fn enter(&mut self, dir: BorrowedFd<'_>, rel: &Path) {
        self.levels.push(Rules::load(dir, rel));
    }

    fn leave(&mut self) {
        self.levels.pop();
    }

    fn visit(&mut self, dir: BorrowedFd<'_>, name: &OsStr, kind: FileType, rel: &Path) -> bool {
        let is_dir = kind == FileType::Directory;
        match ignored(&self.levels, &label(rel), is_dir) {
            Some(true) => return false,
            Some(false) => {}
            None if name.as_bytes().starts_with(b".") => return false,
            None => {}
        }
        if kind == FileType::RegularFile
            && let Ok((file, len)) = open_regular_at(dir, name, OFlags::RDONLY)
        {
            self.search(&file, len, rel);
        }
        is_dir
    }
}

/// `grep`: lines matching a regular expression in files under `path` (default the
/// workspace; `.gitignore`d, `.ignore`d and hidden files skipped, binary files ignored).
///
/// `hide`: the call was approved by `auto`, and the protected paths are kept from it.
pub async fn grep(workspace: &Path, input: &Value, hide: bool) -> ToolOutput {
    let input: GrepInput = match serde_json::from_value(input.clone()) {
        Ok(i) => i,
        Err(e) => {
            return ToolOutput::error(format!(
                "Invalid grep input ({e}). Send {{\"pattern\": \"regex\", \"path\": \"/workspace\"}}."
            ));
        }
    };
    let matcher = match RegexMatcher::new_line_matcher(&input.pattern) {
        Ok(m) => m,
        Err(e) => {
            return ToolOutput::error(format!("`pattern` is not a valid regular expression: {e}"));
        }
    };
    let host = workspace.to_path_buf();
    tokio::task::spawn_blocking(move || grep_files(&host, &input, &matcher, hide))
        .await
        .unwrap_or_else(|_| ToolOutput::error("grep failed unexpectedly"))
}

fn grep_files(host: &Path, input: &GrepInput, matcher: &RegexMatcher, hide: bool) -> ToolOutput {
    let path = input.path.as_deref().unwrap_or(WORKSPACE);
    let hidden = match hidden_from(host, hide) {
        Ok(h) => h,
        Err(refused) => return refused,
    };
    let ws = match Workspace::open(host) {
        Ok(ws) => ws,
        Err(e) => return ToolOutput::error(e.message(path)),
    };
    let located = match ws.locate(path, Missing::Fail) {
        Ok(l) => l,
        Err(FileError::Missing) => return no_lines(input, ""),
        Err(e) => return ToolOutput::error(e.message(path)),
    };
    if let Some(refused) = hidden_path(&hidden, &located.rel, path) {
        return refused;
    }
    let mut grep = Grep::new(matcher);
    let too_deep = match located.open_regular(OFlags::RDONLY) {
        // A file given as the path is searched whatever the ignore rules say.
        Ok((file, len)) => {
            grep.search(&file, len, &located.rel);
            false
        }
        Err(FileError::Directory) => match ancestors(&ws, &located.rel) {
            Some((dir, levels)) => {
                grep.levels = levels;
                walk(&dir, &located.rel, 0, &hidden, &mut grep)
            }
            None => false,
        },
        Err(FileError::Missing) => false,
        Err(e) => return ToolOutput::error(e.message(path)),
    };
    let notes = grep.notes(too_deep);
    if grep.lines.is_empty() {
        return no_lines(input, &notes);
    }
    ToolOutput::text(grep.lines.join("\n") + &notes)
}

fn no_lines(input: &GrepInput, notes: &str) -> ToolOutput {
    ToolOutput::text(format!("No lines match `{}`.{notes}", input.pattern))
}

/// Opens the directory at `rel` (a path of real directories from [`Workspace::locate`]) from
/// the workspace root, loading the ignore rules of every directory above it on the way.
fn ancestors(ws: &Workspace, rel: &Path) -> Option<(OwnedFd, Vec<Rules>)> {
    let mut dir = ws.root().try_clone_to_owned().ok()?;
    let mut at = PathBuf::new();
    let mut levels = Vec::new();
    for part in rel.iter() {
        levels.push(Rules::load(dir.as_fd(), &at));
        dir = open_dir_at(dir.as_fd(), part).ok()?;
        at.push(part);
    }
    Some((dir, levels))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;
    use std::time::Duration;

    use rustix::fs::Mode;
    use serde_json::json;

    use super::*;

    async fn run(call: impl std::future::Future<Output = ToolOutput>) -> (String, bool) {
        let out = tokio::time::timeout(Duration::from_secs(20), call)
            .await
            .expect("the search blocked");
        (
            out.content[0]["text"].as_str().unwrap().to_string(),
            out.is_error,
        )
    }

    fn mkfifo(dir: &Path, name: &str) {
        let root = rustix::fs::open(dir, OFlags::DIRECTORY, Mode::empty()).unwrap();
        let mode = Mode::from_bits_truncate(0o666);
        rustix::fs::mknodat(&root, name, FileType::Fifo, mode, 0).unwrap();
    }

    #[tokio::test]
    async fn searches_never_leave_the_workspace() {
        let (ws, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        std::fs::write(out.path().join("secret.rs"), "needle").unwrap();
        std::fs::write(ws.path().join("mine.rs"), "needle").unwrap();
        symlink(out.path(), ws.path().join("out")).unwrap();
        symlink(out.path().join("secret.rs"), ws.path().join("linked.rs")).unwrap();
        let (t, err) = run(glob(ws.path(), &json!({"pattern": "**/*.rs"}), false)).await;
        assert!(!err && t == "/workspace/mine.rs", "{t}");
        let (t, err) = run(grep(ws.path(), &json!({"pattern": "needle"}), false)).await;
        assert!(!err && t == "/workspace/mine.rs:1:needle", "{t}");
        for path in ["out", "/workspace/out/secret.rs", "linked.rs"] {
            let (t, err) = run(grep(
                ws.path(),
                &json!({"pattern": "needle", "path": path}),
                false,
            ))
            .await;
            assert!(err && t.contains("outside"), "{path}: {t}");
        }
        let (t, err) = run(glob(
            ws.path(),
            &json!({"pattern": "*", "path": "out"}),
            false,
        ))
        .await;
        assert!(err && t.contains("outside"), "{t}");
    }

    #[tokio::test]
    async fn grep_honours_ignore_files_but_only_real_ones() {
        let (ws, out) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let dir = ws.path();
        std::fs::create_dir_all(dir.join(".git")).unwrap();
        std::fs::create_dir_all(dir.join("src")).unwrap();
        std::fs::write(dir.join(".gitignore"), "target/\n*.log\n!keep.log\n").unwrap();
        std::fs::create_dir_all(dir.join("target")).unwrap();
        for f in [
            "target/out.rs",
            "a.log",
            "keep.log",
            ".hidden",
            "src/b.rs",
            "src/by-link",
        ] {
            std::fs::write(dir.join(f), "needle").unwrap();
        }
        // Rules read through a link would come from the host, and a FIFO would hang the read.
        std::fs::write(out.path().join("rules"), "by-link\n").unwrap();
        symlink(out.path().join("rules"), dir.join("src/.gitignore")).unwrap();
        mkfifo(&dir.join("src"), ".ignore");
        let (t, err) = run(grep(dir, &json!({"pattern": "needle"}), false)).await;
        assert!(!err, "{t}");
        assert_eq!(
            t,
            "/workspace/keep.log:1:needle\n/workspace/src/b.rs:1:needle\n/workspace/src/by-link:1:needle"
        );
        // A path given explicitly is searched whatever the rules say.
        let (t, _) = run(grep(
            dir,
            &json!({"pattern": "needle", "path": "a.log"}),
            false,
        ))
        .await;
        assert_eq!(t, "/workspace/a.log:1:needle");
    }

    #[tokio::test]
    async fn grep_skips_what_it_cannot_hold_and_says_so() {
        let ws = tempfile::tempdir().unwrap();
        let dir = ws.path();
        mkfifo(dir, "pipe");
        std::fs::write(dir.join("long.txt"), "a".repeat(MAX_LINE_BYTES + 1)).unwrap();
        let big = File::create(dir.join("big.txt")).unwrap();
        big.set_len(MAX_FILE_BYTES + 1).unwrap();
        std::fs::write(dir.join("small.txt"), "a\n").unwrap();
        let (t, err) = run(grep(dir, &json!({"pattern": "a"}), false)).await;
        assert!(!err, "{t}");
        assert!(t.starts_with("/workspace/small.txt:1:a\n"), "{t}");
        assert!(t.contains("skipped 1 file(s) over"), "{t}");
        assert!(
            t.contains("skipped 1 file(s) that could not be searched"),
            "{t}"
        );
    }
}
