//! `glob` and `grep` over the workspace, with the ripgrep crates (`globset`, `ignore`,
//! `grep-searcher`).

use std::path::Path;
use std::time::SystemTime;

use grep_regex::RegexMatcher;
use grep_searcher::sinks::UTF8;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use serde::Deserialize;
use serde_json::Value;

use super::ToolOutput;
use super::files::{display, resolve};

/// Most paths `glob` and matching lines `grep` return.
pub const MAX_RESULTS: usize = 500;

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

/// `glob`: paths under `path` (default the workspace) matching a doublestar pattern, newest
/// first.
pub async fn glob(workspace: &Path, input: &Value) -> ToolOutput {
    let input: GlobInput = match serde_json::from_value(input.clone()) {
        Ok(i) => i,
        Err(e) => {
            return ToolOutput::error(format!(
                "Invalid glob input ({e}). Send {{\"pattern\": \"**/*.rs\", \"path\": \"/workspace\"}}."
            ));
        }
    };
    let root = match resolve(workspace, input.path.as_deref().unwrap_or("/workspace")) {
        Ok(r) => r,
        Err(e) => return ToolOutput::error(e),
    };
    let matcher = match globset::GlobBuilder::new(&input.pattern)
        .literal_separator(true)
        .build()
    {
        Ok(g) => g.compile_matcher(),
        Err(e) => return ToolOutput::error(format!("`pattern` is not a valid glob: {e}")),
    };
    let workspace = workspace.to_path_buf();
    let found = tokio::task::spawn_blocking(move || {
        let mut found: Vec<(SystemTime, std::path::PathBuf)> = Vec::new();
        for entry in ignore::WalkBuilder::new(&root)
            .standard_filters(false)
            .hidden(false)
            .build()
            .flatten()
        {
            let path = entry.path();
            if path.components().any(|c| c.as_os_str() == ".git")
                || !entry.file_type().is_some_and(|t| t.is_file())
            {
                continue;
            }
            let rel = path.strip_prefix(&root).unwrap_or(path);
            if matcher.is_match(rel) {
                let modified = entry
                    .metadata()
                    .ok()
                    .and_then(|m| m.modified().ok())
                    .unwrap_or(SystemTime::UNIX_EPOCH);
                found.push((modified, path.to_path_buf()));
            }
        }
        found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        let total = found.len();
        let lines: Vec<String> = found
            .into_iter()
            .take(MAX_RESULTS)
            .map(|(_, p)| display(&workspace, &p))
            .collect();
        (lines, total)
    })
    .await;
    let Ok((lines, total)) = found else {
        return ToolOutput::error("glob failed unexpectedly");
    };
    if lines.is_empty() {
        return ToolOutput::text(format!("No files match `{}`.", input.pattern));
    }
    let mut out = lines.join("\n");
    if total > lines.len() {
        out.push_str(&format!(
            "\n[{total} files match; showing the newest {}. Narrow the pattern or path.]",
            lines.len()
        ));
    }
    ToolOutput::text(out)
}

/// `grep`: lines matching a regular expression in files under `path` (default the
/// workspace; `.gitignore` and hidden files skipped, binary files ignored).
pub async fn grep(workspace: &Path, input: &Value) -> ToolOutput {
    let input: GrepInput = match serde_json::from_value(input.clone()) {
        Ok(i) => i,
        Err(e) => {
            return ToolOutput::error(format!(
                "Invalid grep input ({e}). Send {{\"pattern\": \"regex\", \"path\": \"/workspace\"}}."
            ));
        }
    };
    let root = match resolve(workspace, input.path.as_deref().unwrap_or("/workspace")) {
        Ok(r) => r,
        Err(e) => return ToolOutput::error(e),
    };
    let matcher = match RegexMatcher::new_line_matcher(&input.pattern) {
        Ok(m) => m,
        Err(e) => {
            return ToolOutput::error(format!("`pattern` is not a valid regular expression: {e}"));
        }
    };
    let workspace = workspace.to_path_buf();
    let result = tokio::task::spawn_blocking(move || {
        let mut searcher = SearcherBuilder::new()
            .binary_detection(BinaryDetection::quit(0))
            .line_number(true)
            .build();
        let mut lines = Vec::new();
        let mut total = 0usize;
        for entry in ignore::WalkBuilder::new(&root).build().flatten() {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let shown = display(&workspace, entry.path());
            let _ = searcher.search_path(
                &matcher,
                entry.path(),
                UTF8(|n, line| {
                    total += 1;
                    if lines.len() < MAX_RESULTS {
                        let line: String = line.trim_end().chars().take(500).collect();
                        lines.push(format!("{shown}:{n}:{line}"));
                    }
                    Ok(true)
                }),
            );
        }
        (lines, total)
    })
    .await;
    let Ok((lines, total)) = result else {
        return ToolOutput::error("grep failed unexpectedly");
    };
    if lines.is_empty() {
        return ToolOutput::text(format!("No lines match `{}`.", input.pattern));
    }
    let mut out = lines.join("\n");
    if total > lines.len() {
        out.push_str(&format!(
            "\n[{total} matching lines; showing the first {}. Narrow the pattern or path.]",
            lines.len()
        ));
    }
    ToolOutput::text(out)
}
