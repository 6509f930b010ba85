//! Memory stores (beta `agent-memory-2026-07-22`): stores, the memories in them
//! (text documents at paths), and the immutable versions every change writes.

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use unicode_normalization::is_nfc;
use utoipa::ToSchema;

use super::invalid::{Invalid, Valid, check_len};
use super::metadata::{self, Metadata, MetadataPatch};
use super::patch::Patch;
use crate::type_tag;

/// Largest memory content, in UTF-8 bytes.
pub const MAX_CONTENT_BYTES: usize = 102_400;
/// Largest path, in UTF-8 bytes.
pub const MAX_PATH_BYTES: usize = 1024;
/// Most segments in a path.
pub const MAX_SEGMENTS: usize = 20;
/// Longest store description, in characters.
pub const MAX_DESCRIPTION: usize = 1024;
/// Largest page of a list with `view=full`.
pub const FULL_VIEW_PAGE: i64 = 20;

type_tag!(
    /// `"type": "memory_store"`.
    MemoryStoreTag = "memory_store"
);
type_tag!(
    /// `"type": "memory"`.
    MemoryTag = "memory"
);
type_tag!(
    /// `"type": "memory_prefix"`.
    MemoryPrefixTag = "memory_prefix"
);
type_tag!(
    /// `"type": "memory_version"`.
    MemoryVersionTag = "memory_version"
);

/// A `memory_store`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemoryStore {
    #[serde(rename = "type")]
    pub tag: MemoryStoreTag,
    pub id: String,
    pub name: String,
    /// `""` when unset.
    pub description: String,
    pub metadata: Metadata,
    pub created_at: String,
    pub updated_at: String,
    pub archived_at: Option<String>,
}

/// `POST /v1/memory_stores` body. Unknown keys are refused.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "a memory store object")]
pub struct MemoryStoreCreate {
    /// 1–255 characters, no control characters; not unique.
    pub name: String,
    /// At most 1,024 characters.
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub metadata: Option<Metadata>,
}

/// `POST /v1/memory_stores/{id}` body. Unknown keys are refused.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "a memory store update object")]
pub struct MemoryStoreUpdate {
    /// `null` keeps the stored name (a store always has one).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub name: Patch<String>,
    /// `""` or `null` clears it.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub description: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<MetadataPatch>,
}

/// A `memory`: a text document at a path in a store.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Memory {
    #[serde(rename = "type")]
    pub tag: MemoryTag,
    pub id: String,
    pub memory_store_id: String,
    pub path: String,
    /// `null` in the `basic` view.
    pub content: Option<String>,
    pub content_sha256: String,
    pub content_size_bytes: i64,
    /// The version holding the current content.
    pub memory_version_id: String,
    pub created_at: String,
    pub updated_at: String,
}

/// A `memory_prefix` list item: memories deeper than the asked `depth`, rolled up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemoryPrefix {
    #[serde(rename = "type")]
    pub tag: MemoryPrefixTag,
    /// Ends with `/`.
    pub path: String,
}

/// An item of `GET /v1/memory_stores/{id}/memories`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
#[serde(untagged)]
pub enum MemoryListItem {
    Memory(Box<Memory>),
    Prefix(MemoryPrefix),
}

/// Who made a change (`created_by`, `redacted_by`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Actor {
    /// A request made with an API key.
    ApiActor { api_key_id: String },
    /// An agent writing through a session's mount.
    SessionActor { session_id: String },
}

/// What a version records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum Operation {
    Created,
    Modified,
    Deleted,
}

impl Operation {
    /// The wire (and stored) name.
    pub fn as_str(self) -> &'static str {
        match self {
            Operation::Created => "created",
            Operation::Modified => "modified",
            Operation::Deleted => "deleted",
        }
    }

    /// Reads a wire name.
    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "created" => Some(Operation::Created),
            "modified" => Some(Operation::Modified),
            "deleted" => Some(Operation::Deleted),
            _ => None,
        }
    }
}

/// A `memory_version`: one immutable change of a memory (only redaction alters it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct MemoryVersion {
    #[serde(rename = "type")]
    pub tag: MemoryVersionTag,
    pub id: String,
    pub memory_id: String,
    pub memory_store_id: String,
    pub operation: Operation,
    pub created_at: String,
    /// `null` once redacted.
    pub path: Option<String>,
    /// `null` in the `basic` view, for a `deleted` operation, or once redacted.
    pub content: Option<String>,
    pub content_sha256: Option<String>,
    pub content_size_bytes: Option<i64>,
    pub created_by: Option<Actor>,
    pub redacted_at: Option<String>,
    pub redacted_by: Option<Actor>,
}

/// `view`: whether content is included.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum View {
    Basic,
    Full,
}

impl View {
    /// Reads the `view` query parameter, `default` when absent.
    pub fn parse(raw: Option<&str>, default: View) -> Valid<View> {
        match raw {
            None => Ok(default),
            Some("basic") => Ok(View::Basic),
            Some("full") => Ok(View::Full),
            Some(other) => Err(Invalid::new(format!(
                "`view` must be `basic` or `full` (got `{other}`)"
            ))),
        }
    }
}

/// `{"type":"content_sha256","content_sha256":"<64 hex>"}`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "a precondition object")]
pub struct Precondition {
    #[serde(rename = "type")]
    pub kind: PreconditionKind,
    pub content_sha256: String,
}

/// The one precondition kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum PreconditionKind {
    ContentSha256,
}

/// `POST /v1/memory_stores/{id}/memories` body.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "a memory object")]
pub struct MemoryCreate {
    pub path: String,
    /// `""` creates an empty memory; at most 102,400 bytes.
    pub content: Option<String>,
}

/// `POST /v1/memory_stores/{id}/memories/{mem_id}` body.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "a memory update object")]
pub struct MemoryUpdate {
    #[serde(default)]
    pub content: Option<String>,
    /// A new path renames the memory (its id stays).
    #[serde(default)]
    pub path: Option<String>,
    #[serde(default)]
    pub precondition: Option<Precondition>,
}

/// Lowercase hex SHA-256 of the UTF-8 bytes.
pub fn sha256_hex(content: &str) -> String {
    Sha256::digest(content.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn forbidden_char(c: char) -> bool {
    use unicode_general_category::{GeneralCategory, get_general_category};
    c.is_control()
        || c == '\u{2028}'
        || c == '\u{2029}'
        || matches!(get_general_category(c), GeneralCategory::Format)
}

fn path_error(message: String) -> Invalid {
    Invalid::new(message)
}

/// Checks a memory path: starts with `/`, 1–20 segments, none empty, `.` or `..`, no control
/// or format characters nor U+2028/U+2029, NFC, at most 1,024 bytes.
pub fn check_path(path: &str) -> Valid<()> {
    if !path.starts_with('/') {
        return Err(path_error(format!(
            "`path` must start with `/` (got `{path}`)"
        )));
    }
    if path.len() > MAX_PATH_BYTES {
        return Err(path_error(format!(
            "`path` must be at most {MAX_PATH_BYTES} bytes (got {})",
            path.len()
        )));
    }
    if let Some(c) = path.chars().find(|c| forbidden_char(*c)) {
        return Err(path_error(format!(
            "`path` must not contain control or format characters (found U+{:04X})",
            c as u32
        )));
    }
    if !is_nfc(path) {
        return Err(path_error(
            "`path` must be in Unicode Normalization Form C".to_string(),
        ));
    }
    let segments: Vec<&str> = path[1..].split('/').collect();
    if segments.len() > MAX_SEGMENTS {
        return Err(path_error(format!(
            "`path` must have at most {MAX_SEGMENTS} segments (got {})",
            segments.len()
        )));
    }
    if let Some(s) = segments
        .iter()
        .find(|s| s.is_empty() || **s == "." || **s == "..")
    {
        return Err(path_error(format!(
            "`path` segments must not be empty, `.` or `..` (got `{s}` in `{path}`)"
        )));
    }
    Ok(())
}

/// Checks a `path_prefix`: `/`, or a path of whole segments ending with `/`.
pub fn check_prefix(prefix: &str) -> Valid<()> {
    if !prefix.ends_with('/') {
        return Err(Invalid::new(format!(
            "`path_prefix` must end with `/` (got `{prefix}`)"
        )));
    }
    if prefix == "/" {
        return Ok(());
    }
    check_path(&prefix[..prefix.len() - 1])
        .map_err(|e| Invalid::new(e.message.replace("`path`", "`path_prefix`")))
}

/// Checks memory content: at most 102,400 bytes.
pub fn check_content(content: &str) -> Valid<()> {
    if content.len() > MAX_CONTENT_BYTES {
        return Err(Invalid::new(format!(
            "`content` must be at most {MAX_CONTENT_BYTES} bytes (got {})",
            content.len()
        )));
    }
    Ok(())
}

/// Checks a SHA-256 given as a precondition: 64 lowercase hex characters.
pub fn check_sha(field: &str, sha: &str) -> Valid<()> {
    if sha.len() != 64
        || !sha
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    {
        return Err(Invalid::new(format!(
            "`{field}` must be 64 lowercase hex characters"
        )));
    }
    Ok(())
}

fn check_name(name: &str) -> Valid<()> {
    check_len("name", name, 1, 255)?;
    if name.chars().any(char::is_control) {
        return Err(Invalid::new("`name` must not contain control characters"));
    }
    if name.trim().is_empty() {
        return Err(Invalid::new("`name` must not be blank"));
    }
    Ok(())
}

fn check_description(d: &str) -> Valid<()> {
    check_len("description", d, 0, MAX_DESCRIPTION)
}

fn check_metadata(m: &Metadata) -> Valid<()> {
    metadata::validate(m)
}

/// The 400 for writing to an archived store.
pub fn archived(id: &str, what: &str) -> Invalid {
    Invalid::with_code(
        "memory_store_archived",
        format!("memory store `{id}` is archived: {what}"),
    )
}

impl MemoryStoreCreate {
    /// Validates the body into `(name, description, metadata)`.
    pub fn into_parts(self) -> Valid<(String, String, Metadata)> {
        check_name(&self.name)?;
        let description = self.description.unwrap_or_default();
        check_description(&description)?;
        let metadata = self.metadata.unwrap_or_default();
        check_metadata(&metadata)?;
        Ok((self.name, description, metadata))
    }
}

impl MemoryStoreUpdate {
    /// Applies the update to `current`; `None` when it changes nothing. An archived store
    /// takes no changes.
    pub fn apply(self, current: &MemoryStore) -> Valid<Option<(String, String, Metadata)>> {
        if current.archived_at.is_some() {
            return Err(archived(&current.id, "it cannot be updated"));
        }
        let name = match self.name {
            Patch::Value(n) => {
                check_name(&n)?;
                n
            }
            Patch::Absent | Patch::Null => current.name.clone(),
        };
        let description = match self.description {
            Patch::Value(d) => {
                check_description(&d)?;
                d
            }
            Patch::Null => String::new(),
            Patch::Absent => current.description.clone(),
        };
        let metadata = match &self.metadata {
            Some(p) => metadata::apply_patch(&current.metadata, p, false)?,
            None => current.metadata.clone(),
        };
        let changed = name != current.name
            || description != current.description
            || metadata != current.metadata;
        Ok(changed.then_some((name, description, metadata)))
    }
}

impl MemoryCreate {
    /// Validates the body into `(path, content)`.
    pub fn into_parts(self) -> Valid<(String, String)> {
        check_path(&self.path)?;
        let Some(content) = self.content else {
            return Err(Invalid::new(
                "`content` is required (pass \"\" for an empty memory)",
            ));
        };
        check_content(&content)?;
        Ok((self.path, content))
    }
}

impl MemoryUpdate {
    /// Validates the body into `(path, content, expected sha)`.
    pub fn into_parts(self) -> Valid<(Option<String>, Option<String>, Option<String>)> {
        if let Some(p) = &self.path {
            check_path(p)?;
        }
        if let Some(c) = &self.content {
            check_content(c)?;
        }
        let expected = match self.precondition {
            Some(p) => {
                check_sha("precondition.content_sha256", &p.content_sha256)?;
                Some(p.content_sha256)
            }
            None => None,
        };
        Ok((self.path, self.content, expected))
    }
}

/// The key after every path that starts with `prefix` (a path ending with `/`): the same
/// text with its last `/` replaced by the next byte, `0`. Paths compare bytewise.
pub fn past_prefix(prefix: &str) -> String {
    let mut s = prefix[..prefix.len() - 1].to_string();
    s.push('0');
    s
}

/// Where a stored path falls in a listing of `prefix` at `depth` (0 = everything): itself,
/// or the prefix of its first `depth` segments below `prefix` it rolls up into.
pub fn roll_up(path: &str, prefix: &str, depth: usize) -> Option<String> {
    if depth == 0 {
        return None;
    }
    let rest = path.strip_prefix(prefix)?;
    let mut cut = 0;
    for (n, (i, _)) in rest.match_indices('/').enumerate() {
        if n + 1 == depth {
            cut = i + 1;
            break;
        }
    }
    (cut > 0).then(|| format!("{prefix}{}", &rest[..cut]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths() {
        assert!(check_path("/a").is_ok());
        assert!(check_path("/projects/foo/notes.md").is_ok());
        assert!(check_path("a").is_err());
        assert!(check_path("/").is_err());
        assert!(check_path("/a//b").is_err());
        assert!(check_path("/a/./b").is_err());
        assert!(check_path("/a/../b").is_err());
        assert!(check_path("/a/").is_err());
        assert!(check_path("/a\u{7}").is_err());
        assert!(
            check_path("/a\u{200B}").is_err(),
            "zero-width space is a format char"
        );
        assert!(check_path("/a\u{2028}").is_err());
        assert!(check_path("/e\u{301}").is_err(), "not NFC");
        assert!(check_path("/\u{e9}").is_ok());
        assert!(check_path(&format!("/{}", "x".repeat(1023))).is_ok());
        assert!(check_path(&format!("/{}", "x".repeat(1024))).is_err());
        assert!(check_path(&"/a".repeat(20)).is_ok());
        assert!(check_path(&"/a".repeat(21)).is_err());
        assert!(check_prefix("/").is_ok());
        assert!(check_prefix("/a/b/").is_ok());
        assert!(check_prefix("/a/b").is_err());
        assert!(check_prefix("/a//").is_err());
    }

    #[test]
    fn rolling_up() {
        assert_eq!(roll_up("/a/b.md", "/", 1).as_deref(), Some("/a/"));
        assert_eq!(roll_up("/b.md", "/", 1), None);
        assert_eq!(roll_up("/a/b/c.md", "/a/", 1).as_deref(), Some("/a/b/"));
        assert_eq!(roll_up("/a/b/c.md", "/", 2).as_deref(), Some("/a/b/"));
        assert_eq!(roll_up("/a/b/c.md", "/", 0), None);
        assert_eq!(past_prefix("/a/b/"), "/a/b0");
        assert!("/a/b/zzz" < past_prefix("/a/b/").as_str());
        assert!("/a/b0" >= past_prefix("/a/b/").as_str());
    }

    #[test]
    fn sha() {
        assert_eq!(
            sha256_hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert!(check_sha("x", &sha256_hex("a")).is_ok());
        assert!(check_sha("x", &sha256_hex("a").to_uppercase()).is_err());
    }
}
