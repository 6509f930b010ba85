//! `read`, `write` and `edit`, confined to the session's workspace: paths are resolved
//! against `/workspace` and refused when they (or a symlink on the way) lead outside it.

use std::path::{Component, Path, PathBuf};

use base64::Engine as _;
use serde::Deserialize;
use serde_json::{Value, json};

use super::ToolOutput;
use super::sandbox::WORKSPACE;

/// Lines `read` returns when no range is given, and the longest line it shows whole.
pub const DEFAULT_LINES: usize = 2000;
pub const MAX_LINE_CHARS: usize = 2000;
/// Images up to this size are returned as image blocks.
const MAX_IMAGE_BYTES: u64 = 5 << 20;
/// Largest file `read` or `edit` loads.
const MAX_FILE_BYTES: u64 = 50 << 20;

/// Maps a model-facing path (`/workspace/a/b`, or `a/b` relative to it) onto the host and
/// checks it stays inside the workspace once symlinks are followed.
pub fn resolve(workspace: &Path, file_path: &str) -> Result<PathBuf, String> {
    let p = Path::new(file_path.trim());
    let rel = if p.is_absolute() {
        p.strip_prefix(WORKSPACE).map_err(|_| {
            format!("`{file_path}` is outside {WORKSPACE}: file tools work inside the workspace (use bash to look elsewhere)")
        })?
    } else {
        p
    };
    let mut clean = PathBuf::new();
    for c in rel.components() {
        match c {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            Component::ParentDir => {
                if !clean.pop() {
                    return Err(format!("`{file_path}` leads outside {WORKSPACE}"));
                }
            }
            _ => return Err(format!("`{file_path}` is not a valid path")),
        }
    }
    let root = workspace
        .canonicalize()
        .map_err(|e| format!("the workspace is unavailable: {e}"))?;
    let full = root.join(&clean);
    // The deepest existing ancestor, with symlinks resolved, must still be in the workspace.
    let mut probe = full.clone();
    loop {
        if let Ok(real) = probe.canonicalize() {
            if !real.starts_with(&root) {
                return Err(format!(
                    "`{file_path}` leads outside {WORKSPACE} through a symbolic link"
                ));
            }
            break;
        }
        if !probe.pop() {
            break;
        }
    }
    Ok(full)
}

/// The model-facing form of a host path inside the workspace.
pub fn display(workspace: &Path, path: &Path) -> String {
    let root = workspace
        .canonicalize()
        .unwrap_or_else(|_| workspace.to_path_buf());
    match path
        .strip_prefix(&root)
        .or_else(|_| path.strip_prefix(workspace))
    {
        Ok(rel) if rel.as_os_str().is_empty() => WORKSPACE.to_string(),
        Ok(rel) => format!("{WORKSPACE}/{}", rel.display()),
        Err(_) => path.display().to_string(),
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
pub async fn read(workspace: &Path, input: &Value) -> ToolOutput {
    let input: ReadInput = match parse(
        input,
        "read",
        r#"{"file_path": "/workspace/...", "view_range": [start, end]}"#,
    ) {
        Ok(i) => i,
        Err(e) => return e,
    };
    let path = match resolve(workspace, &input.file_path) {
        Ok(p) => p,
        Err(e) => return ToolOutput::error(e),
    };
    let meta = match tokio::fs::metadata(&path).await {
        Ok(m) => m,
        Err(_) => return ToolOutput::error(format!("`{}` does not exist.", input.file_path)),
    };
    if meta.is_dir() {
        return ToolOutput::error(format!(
            "`{}` is a directory; use glob or bash `ls` to list it.",
            input.file_path
        ));
    }
    if let Some(media) = image_type(&path)
        && meta.len() <= MAX_IMAGE_BYTES
        && let Ok(bytes) = tokio::fs::read(&path).await
    {
        let data = base64::engine::general_purpose::STANDARD.encode(bytes);
        return ToolOutput {
            content: vec![
                json!({"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}),
            ],
            is_error: false,
        };
    }
    if meta.len() > MAX_FILE_BYTES {
        return ToolOutput::error(format!(
            "`{}` is {} bytes, too large to read; use bash (head, sed -n, grep) to look at parts.",
            input.file_path,
            meta.len()
        ));
    }
    let bytes = match tokio::fs::read(&path).await {
        Ok(b) => b,
        Err(e) => {
            return ToolOutput::error(format!("`{}` could not be read: {e}", input.file_path));
        }
    };
    let Ok(text) = String::from_utf8(bytes) else {
        return ToolOutput::error(format!(
            "`{}` looks binary ({} bytes); read shows text files only. Use bash (`file`, `xxd | head`) to inspect it.",
            input.file_path,
            meta.len()
        ));
    };
    if text.contains('\0') {
        return ToolOutput::error(format!(
            "`{}` looks binary; use bash (`xxd | head`) to inspect it.",
            input.file_path
        ));
    }
    let lines: Vec<&str> = text.lines().collect();
    let total = lines.len();
    let (start, end) = match input.view_range.as_deref() {
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
        return ToolOutput::text(format!("`{}` is empty.", input.file_path));
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

/// `write`: creates or overwrites a file (and its parent directories).
pub async fn write(workspace: &Path, input: &Value) -> ToolOutput {
    let input: WriteInput = match parse(
        input,
        "write",
        r#"{"file_path": "/workspace/...", "content": "..."}"#,
    ) {
        Ok(i) => i,
        Err(e) => return e,
    };
    let path = match resolve(workspace, &input.file_path) {
        Ok(p) => p,
        Err(e) => return ToolOutput::error(e),
    };
    if path.is_dir() {
        return ToolOutput::error(format!("`{}` is a directory.", input.file_path));
    }
    if let Some(parent) = path.parent()
        && let Err(e) = tokio::fs::create_dir_all(parent).await
    {
        return ToolOutput::error(format!(
            "could not create the directory for `{}`: {e}",
            input.file_path
        ));
    }
    match tokio::fs::write(&path, input.content.as_bytes()).await {
        Ok(()) => ToolOutput::text(format!(
            "Wrote {} bytes to {}.",
            input.content.len(),
            display(workspace, &path)
        )),
        Err(e) => ToolOutput::error(format!("`{}` could not be written: {e}", input.file_path)),
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

/// `edit`: replaces `old_string`, which must occur exactly once unless `replace_all`.
pub async fn edit(workspace: &Path, input: &Value) -> ToolOutput {
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
    let path = match resolve(workspace, &input.file_path) {
        Ok(p) => p,
        Err(e) => return ToolOutput::error(e),
    };
    let text = match tokio::fs::read_to_string(&path).await {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return ToolOutput::error(format!(
                "`{}` does not exist; create it with write.",
                input.file_path
            ));
        }
        Err(e) => {
            return ToolOutput::error(format!(
                "`{}` could not be read as text: {e}",
                input.file_path
            ));
        }
    };
    let count = text.matches(&input.old_string).count();
    let replace_all = input.replace_all.unwrap_or(false);
    if count == 0 {
        return ToolOutput::error(format!(
            "`old_string` was not found in {}; read the file and copy the text exactly, including whitespace.",
            input.file_path
        ));
    }
    if count > 1 && !replace_all {
        return ToolOutput::error(format!(
            "`old_string` occurs {count} times in {}; include more surrounding text to make it unique, or set \"replace_all\": true.",
            input.file_path
        ));
    }
    let updated = if replace_all {
        text.replace(&input.old_string, &input.new_string)
    } else {
        text.replacen(&input.old_string, &input.new_string, 1)
    };
    match tokio::fs::write(&path, updated).await {
        Ok(()) => ToolOutput::text(format!(
            "Replaced {} occurrence{} in {}.",
            count,
            if count == 1 { "" } else { "s" },
            display(workspace, &path)
        )),
        Err(e) => ToolOutput::error(format!("`{}` could not be written: {e}", input.file_path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolution_stays_inside() {
        let dir = std::env::temp_dir().join(format!("mast-resolve-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        let root = dir.canonicalize().unwrap();
        assert_eq!(
            resolve(&dir, "/workspace/sub/a.txt").unwrap(),
            root.join("sub/a.txt")
        );
        assert_eq!(resolve(&dir, "sub/../b.txt").unwrap(), root.join("b.txt"));
        assert!(resolve(&dir, "/etc/passwd").is_err());
        assert!(resolve(&dir, "../x").is_err());
        assert!(resolve(&dir, "/workspace/../etc").is_err());
        #[cfg(unix)]
        {
            let _ = std::os::unix::fs::symlink("/etc", dir.join("link"));
            assert!(resolve(&dir, "link/passwd").is_err());
            assert!(resolve(&dir, "link/new-file").is_err());
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
