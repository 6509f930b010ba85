//! `github_repository` session resources: a git repository cloned into the
//! session's workspace. Any git host over HTTP(S) works; the URL decides. The token is
//! write-only: it is checked here, sealed by the engine and never part of a wire object.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::fields::{Obj, must_be, tag};
use super::invalid::{Invalid, Valid, check_len};
use crate::type_tag;

type_tag!(
    /// `"type": "github_repository"`.
    RepositoryResourceTag = "github_repository"
);

/// Where repositories are cloned: the session's workspace, which the agent's tools edit.
pub const WORKSPACE: &str = "/workspace";
/// Longest repository URL, in characters.
const MAX_URL: usize = 2048;
/// Longest token; a GitHub token is under 300 characters, other hosts' JWTs can be longer.
const MAX_TOKEN: usize = 8192;
/// Longest `mount_path`, in bytes.
const MAX_MOUNT_PATH: usize = 1024;

/// What a repository is checked out at.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Checkout {
    /// The tip of a branch.
    Branch { name: String },
    /// One commit (full or abbreviated hexadecimal id).
    Commit { sha: String },
}

/// A `github_repository` resource as the API shows it (`BetaManagedAgentsGitHubRepositoryResource`);
/// the token is never part of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct RepositoryResource {
    #[serde(rename = "type")]
    pub tag: RepositoryResourceTag,
    /// `sesrsc_…`.
    pub id: String,
    /// The repository's clone URL.
    pub url: String,
    /// The working copy's directory in the session's workspace.
    pub mount_path: String,
    /// What is checked out; `null` for the remote's default branch.
    pub checkout: Option<Checkout>,
    pub created_at: String,
    pub updated_at: String,
}

/// A token given for a repository: kept out of `Debug` output so it never reaches a log.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(pub String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// A repository a request asks for, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepositoryParams {
    pub url: String,
    pub token: Option<Token>,
    pub checkout: Option<Checkout>,
    /// The path asked for, or `/workspace/<repo-name>`.
    pub mount_path: String,
}

/// Reads a `github_repository` resource (its `type` already read).
pub fn parse(at: &str, v: &Value) -> Valid<RepositoryParams> {
    let o = Obj::new(
        at,
        v,
        "a github_repository resource",
        &[
            "type",
            "url",
            "authorization_token",
            "checkout",
            "mount_path",
        ],
    )?;
    let url = parse_url(&o.path("url"), o.req_str("url")?)?;
    let token = match o.str("authorization_token")? {
        None => None,
        Some(t) => Some(parse_token(&o.path("authorization_token"), t)?),
    };
    let checkout = match o.get("checkout") {
        None => None,
        Some(c) => Some(parse_checkout(&o.path("checkout"), c)?),
    };
    let mount_path = match o.str("mount_path")? {
        Some(p) => check_mount_path(&o.path("mount_path"), p)?,
        None => {
            let name = repo_name(&url).ok_or_else(|| {
                Invalid::new(format!(
                    "`{}` has no repository name to mount it under; give `{}`",
                    o.path("url"),
                    o.path("mount_path")
                ))
            })?;
            check_mount_path(&o.path("url"), &format!("{WORKSPACE}/{name}"))?
        }
    };
    Ok(RepositoryParams {
        url,
        token,
        checkout,
        mount_path,
    })
}

/// A token: what the host checks, sent in an HTTP header, so no control characters.
pub fn parse_token(at: &str, t: &str) -> Valid<Token> {
    if t.is_empty() {
        return Err(Invalid::new(format!("`{at}` must not be empty")));
    }
    if t.chars().count() > MAX_TOKEN {
        return Err(Invalid::new(format!(
            "`{at}` must be at most {MAX_TOKEN} characters"
        )));
    }
    if t.chars().any(char::is_control) {
        return Err(Invalid::new(format!(
            "`{at}` must not contain control characters (line breaks included)"
        )));
    }
    Ok(Token(t.to_string()))
}

/// An `http` or `https` URL with a host and no credentials in it (those go in
/// `authorization_token`, which is never shown back).
fn parse_url(at: &str, raw: &str) -> Valid<String> {
    check_len(at, raw, 1, MAX_URL)?;
    let bad = |why: &str| Invalid::new(format!("`{at}` {why}"));
    if let Some(why) = ambiguous_url(raw) {
        return Err(bad(why));
    }
    let url = reqwest::Url::parse(raw).map_err(|e| bad(&format!("is not a URL: {e}")))?;
    if !matches!(url.scheme(), "https" | "http") {
        return Err(bad(&format!(
            "must be an `https://` (or `http://`) clone URL; `{}` URLs are not supported",
            url.scheme()
        )));
    }
    if url.host_str().is_none_or(str::is_empty) {
        return Err(bad("has no host"));
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err(bad(
            "must not carry credentials; give the token as `authorization_token`",
        ));
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(bad("must not have a query or a fragment"));
    }
    Ok(raw.to_string())
}

/// Why `raw` could be read differently by git (curl) than by the WHATWG parser the address
/// check uses, if it could: `http://1.1.1.1\@127.0.0.1/r.git` is host `1.1.1.1` to one and
/// `127.0.0.1` to the other. Backslashes, whitespace and control characters, and any `@` before
/// the path (userinfo, which tokens never travel in), are refused outright.
pub fn ambiguous_url(raw: &str) -> Option<&'static str> {
    if raw.contains('\\') {
        return Some("must not contain backslashes");
    }
    if raw.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some("must not contain whitespace or control characters");
    }
    let after_scheme = raw.split_once("://").map_or(raw, |(_, rest)| rest);
    let authority = after_scheme
        .split(['/', '?', '#'])
        .next()
        .unwrap_or_default();
    if authority.contains('@') {
        return Some("must not carry credentials; give the token as `authorization_token`");
    }
    // `host.` and `host` are one name to DNS but two to the pinning of the checked addresses,
    // which git (curl) may look up under either spelling.
    let host = match authority.split_once(']') {
        Some((v6, _)) => v6,
        None => authority.split(':').next().unwrap_or_default(),
    };
    if host.ends_with('.') {
        return Some("must name its host without a trailing dot");
    }
    None
}

/// The last segment of the URL's path without `.git`: `https://h/o/r.git` → `r`.
fn repo_name(url: &str) -> Option<String> {
    let u = reqwest::Url::parse(url).ok()?;
    let last = u.path_segments()?.rev().find(|s| !s.is_empty())?;
    let name = last.strip_suffix(".git").unwrap_or(last);
    let name = percent_decoded(name)?;
    (!name.is_empty() && name != "." && name != "..").then_some(name)
}

fn percent_decoded(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// `{"type": "branch", "name"}` or `{"type": "commit", "sha"}`.
fn parse_checkout(at: &str, v: &Value) -> Valid<Checkout> {
    if !v.is_object() {
        return Err(must_be(at, "a checkout object", v));
    }
    match tag(at, v, &["branch", "commit"])? {
        "branch" => {
            let o = Obj::new(at, v, "a branch checkout", &["type", "name"])?;
            let name = o.req_str("name")?;
            check_branch(&o.path("name"), name)?;
            Ok(Checkout::Branch {
                name: name.to_string(),
            })
        }
        _ => {
            let o = Obj::new(at, v, "a commit checkout", &["type", "sha"])?;
            let sha = o.req_str("sha")?;
            if !(4..=64).contains(&sha.len()) || !sha.chars().all(|c| c.is_ascii_hexdigit()) {
                return Err(Invalid::new(format!(
                    "`{}` must be a commit id: 4 to 64 hexadecimal digits",
                    o.path("sha")
                )));
            }
            Ok(Checkout::Commit {
                sha: sha.to_ascii_lowercase(),
            })
        }
    }
}

/// The parts of git's branch-name rules (`git check-ref-format --branch`) that keep a name
/// from being read as an option or a revision expression.
fn check_branch(at: &str, name: &str) -> Valid<()> {
    check_len(at, name, 1, 255)?;
    let bad = name.starts_with('-')
        || name.starts_with('/')
        || name.ends_with('/')
        || name.ends_with('.')
        || name.ends_with(".lock")
        || name.contains("..")
        || name.contains("//")
        || name.contains("@{")
        || name.split('/').any(|s| s.starts_with('.'))
        || name
            .chars()
            .any(|c| c.is_control() || c.is_whitespace() || "~^:?*[\\".contains(c));
    if bad {
        return Err(Invalid::new(format!(
            "`{at}` `{name}` is not a valid branch name"
        )));
    }
    Ok(())
}

/// A working copy's path: a directory below `/workspace` (never the workspace itself), so
/// the agent's file tools and `bash` reach it like any other workspace file.
fn check_mount_path(at: &str, p: &str) -> Valid<String> {
    check_len(at, p, 2, MAX_MOUNT_PATH)?;
    let p = p.trim_end_matches('/');
    let bad = |why: &str| Invalid::new(format!("`{at}` `{p}` {why}"));
    let Some(rest) = p.strip_prefix(&format!("{WORKSPACE}/")) else {
        return Err(bad(&format!(
            "must be a directory below `{WORKSPACE}/`: repositories are cloned into the session's workspace"
        )));
    };
    if rest
        .split('/')
        .any(|s| s.is_empty() || s == "." || s == ".." || s.chars().any(char::is_control))
    {
        return Err(bad(
            "must be a normalised path (no empty, `.` or `..` segments, no control characters)",
        ));
    }
    Ok(p.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ok(v: Value) -> RepositoryParams {
        parse("r", &v).unwrap()
    }

    #[test]
    fn defaults_mount_under_the_workspace_by_repository_name() {
        let r = ok(json!({"type": "github_repository", "url": "https://github.com/o/r.git"}));
        assert_eq!(r.mount_path, "/workspace/r");
        assert_eq!(r.checkout, None);
        assert_eq!(r.token, None);
        let r = ok(
            json!({"type": "github_repository", "url": "http://127.0.0.1:9/git/my%20tool/",
            "authorization_token": "t", "checkout": {"type": "branch", "name": "feature/x"}}),
        );
        assert_eq!(r.mount_path, "/workspace/my tool");
        assert_eq!(r.token, Some(Token("t".into())));
        assert_eq!(
            r.checkout,
            Some(Checkout::Branch {
                name: "feature/x".into()
            })
        );
        let r = ok(json!({"type": "github_repository", "url": "https://h/o/r",
            "mount_path": "/workspace/src/r/", "checkout": {"type": "commit", "sha": "ABCdef12"}}));
        assert_eq!(r.mount_path, "/workspace/src/r");
        assert_eq!(
            r.checkout,
            Some(Checkout::Commit {
                sha: "abcdef12".into()
            })
        );
    }

    #[test]
    fn bad_repositories_are_refused_without_echoing_the_token() {
        for v in [
            json!({"type": "github_repository"}),
            json!({"type": "github_repository", "url": "git@github.com:o/r.git"}),
            json!({"type": "github_repository", "url": "file:///etc"}),
            json!({"type": "github_repository", "url": "ssh://github.com/o/r"}),
            json!({"type": "github_repository", "url": "https://u:sekrit@h/o/r"}),
            json!({"type": "github_repository", "url": "http://1.1.1.1\\@127.0.0.1:9/x.git"}),
            json!({"type": "github_repository", "url": "https://@h/o/r"}),
            json!({"type": "github_repository", "url": "https://github.com./o/r"}),
            json!({"type": "github_repository", "url": "https://github.com.:443/o/r"}),
            json!({"type": "github_repository", "url": "https://h/o r"}),
            json!({"type": "github_repository", "url": "https://h\t/o/r"}),
            json!({"type": "github_repository", "url": "https://h/"}),
            json!({"type": "github_repository", "url": "https://h/o/r", "mount_path": "/mnt/r"}),
            json!({"type": "github_repository", "url": "https://h/o/r", "mount_path": "/workspace"}),
            json!({"type": "github_repository", "url": "https://h/o/r", "mount_path": "/workspace/a/../b"}),
            json!({"type": "github_repository", "url": "https://h/o/r", "authorization_token": "sekrit\nX: y"}),
            json!({"type": "github_repository", "url": "https://h/o/r", "authorization_token": ""}),
            json!({"type": "github_repository", "url": "https://h/o/r", "checkout": {"type": "branch", "name": "-x"}}),
            json!({"type": "github_repository", "url": "https://h/o/r", "checkout": {"type": "branch", "name": "a..b"}}),
            json!({"type": "github_repository", "url": "https://h/o/r", "checkout": {"type": "commit", "sha": "xyz"}}),
            json!({"type": "github_repository", "url": "https://h/o/r", "checkout": {"type": "tag", "name": "v1"}}),
            json!({"type": "github_repository", "url": "https://h/o/r", "authorization_token": "sekrit", "token": "x"}),
        ] {
            let e = parse("r", &v).unwrap_err();
            assert!(!e.message.contains("sekrit"), "{v}: {}", e.message);
        }
    }
}
