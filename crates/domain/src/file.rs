//! Files API wire types (`/v1/files`) and the rules for what an upload may
//! carry: its name, media type and expiry.

use serde::Serialize;
use utoipa::ToSchema;

use super::invalid::Invalid;
use crate::type_tag;

type_tag!(
    /// `"type": "file"`.
    FileTag = "file"
);
type_tag!(
    /// `"type": "file_deleted"`.
    FileDeletedTag = "file_deleted"
);
type_tag!(
    /// `"type": "session"`.
    SessionScopeTag = "session"
);

/// Shortest `expires_in_seconds` (one hour), as the SDK documents it.
pub const MIN_EXPIRES_IN_SECONDS: i64 = 3600;
/// Longest `expires_in_seconds` (90 days), as the SDK documents it.
pub const MAX_EXPIRES_IN_SECONDS: i64 = 7_776_000;
/// Longest stored file name, in bytes.
pub const MAX_FILENAME_BYTES: usize = 255;

/// What a file belongs to (the session whose agent wrote it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct FileScope {
    #[serde(rename = "type")]
    pub tag: SessionScopeTag,
    /// The session's id.
    pub id: String,
}

/// A file's metadata (`BetaFileMetadata`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct FileMetadata {
    #[serde(rename = "type")]
    pub tag: FileTag,
    pub id: String,
    /// The uploaded name's final path component.
    pub filename: String,
    pub mime_type: String,
    pub size_bytes: i64,
    pub created_at: String,
    /// Whether `GET /v1/files/{id}/content` serves it (always, on this server).
    pub downloadable: bool,
    /// When it disappears; `null` keeps it until deleted.
    pub expires_at: Option<String>,
    /// The session it belongs to; `null` for uploads.
    pub scope: Option<FileScope>,
}

/// Response of `DELETE /v1/files/{id}`.
#[derive(Debug, Serialize, ToSchema)]
pub struct DeletedFile {
    pub id: String,
    #[serde(rename = "type")]
    pub tag: FileDeletedTag,
}

/// The extension conventionally used for a media type (for an unnamed upload).
fn extension_for(mime: &str) -> Option<&'static str> {
    MIME_TYPES
        .iter()
        .find(|(_, m)| *m == mime)
        .map(|(ext, _)| *ext)
}

/// The media type conventionally meant by a file name's extension.
fn mime_for(filename: &str) -> Option<&'static str> {
    let ext = filename.rsplit_once('.')?.1.to_ascii_lowercase();
    MIME_TYPES.iter().find(|(e, _)| *e == ext).map(|(_, m)| *m)
}

/// Extensions and media types, first match wins both ways (the same guesses Python's
/// `mimetypes`, and so the SDK, makes for these).
const MIME_TYPES: &[(&str, &str)] = &[
    ("txt", "text/plain"),
    ("csv", "text/csv"),
    ("md", "text/markdown"),
    ("html", "text/html"),
    ("htm", "text/html"),
    ("json", "application/json"),
    ("pdf", "application/pdf"),
    ("png", "image/png"),
    ("jpg", "image/jpeg"),
    ("jpeg", "image/jpeg"),
    ("gif", "image/gif"),
    ("webp", "image/webp"),
    ("xml", "application/xml"),
    ("zip", "application/zip"),
    ("py", "text/x-python"),
    (
        "xlsx",
        "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
    ),
    (
        "docx",
        "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
    ),
];

/// The stored name of an upload: the final path component of `filename` (either slash), or
/// `unnamed` plus the media type's extension when there is none.
pub fn stored_filename(filename: Option<&str>, mime_type: &str) -> Result<String, Invalid> {
    let base = filename
        .map(|f| f.rsplit(['/', '\\']).next().unwrap_or(""))
        .unwrap_or("");
    if base.chars().any(char::is_control) {
        return Err(Invalid::new(
            "the `file` part's filename must not contain control characters",
        ));
    }
    if base.len() > MAX_FILENAME_BYTES {
        return Err(Invalid::new(format!(
            "the `file` part's filename is longer than {MAX_FILENAME_BYTES} bytes"
        )));
    }
    if base.is_empty() || base == "." || base == ".." {
        return Ok(match extension_for(mime_type) {
            Some(ext) => format!("unnamed.{ext}"),
            None => "unnamed".to_string(),
        });
    }
    Ok(base.to_string())
}

/// The media type of an upload: the `file` part's `Content-Type` unless it is missing or the
/// generic `application/octet-stream`, then a guess from the name's extension, then
/// `application/octet-stream`. Parameters (`; charset=…`) are kept.
pub fn stored_mime_type(
    part_type: Option<&str>,
    filename: Option<&str>,
) -> Result<String, Invalid> {
    let given = part_type.map(str::trim).filter(|t| !t.is_empty());
    if let Some(t) = given
        && !t.eq_ignore_ascii_case("application/octet-stream")
    {
        let (essence, _) = t.split_once(';').unwrap_or((t, ""));
        let ok = t.len() <= 255
            && t.bytes().all(|b| (0x20..0x7f).contains(&b))
            && essence.split_once('/').is_some_and(|(a, b)| {
                !a.trim().is_empty() && !b.trim().is_empty() && !b.contains('/')
            });
        if !ok {
            return Err(Invalid::new(format!(
                "the `file` part's Content-Type `{t}` is not a media type such as `text/plain`"
            )));
        }
        return Ok(t.to_string());
    }
    Ok(filename
        .and_then(mime_for)
        .unwrap_or("application/octet-stream")
        .to_string())
}

/// Reads the `expires_in_seconds` part: an integer within the SDK's documented range.
pub fn expires_in_seconds(text: &str) -> Result<i64, Invalid> {
    match text.trim().parse::<i64>() {
        Ok(n) if (MIN_EXPIRES_IN_SECONDS..=MAX_EXPIRES_IN_SECONDS).contains(&n) => Ok(n),
        _ => Err(Invalid::new(format!(
            "`expires_in_seconds` must be an integer from {MIN_EXPIRES_IN_SECONDS} (one hour) \
             to {MAX_EXPIRES_IN_SECONDS} (90 days)"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_keep_the_last_component_and_unnamed_gets_an_extension() {
        assert_eq!(
            stored_filename(Some("a/b/c.csv"), "text/csv").unwrap(),
            "c.csv"
        );
        assert_eq!(
            stored_filename(Some("C:\\x\\y.txt"), "text/plain").unwrap(),
            "y.txt"
        );
        assert_eq!(
            stored_filename(None, "application/pdf").unwrap(),
            "unnamed.pdf"
        );
        assert_eq!(
            stored_filename(Some("dir/"), "application/octet-stream").unwrap(),
            "unnamed"
        );
        assert_eq!(
            stored_filename(Some("résumé.md"), "text/markdown").unwrap(),
            "résumé.md"
        );
        assert!(stored_filename(Some("a\nb"), "text/plain").is_err());
    }

    #[test]
    fn media_types_come_from_the_part_then_the_name() {
        assert_eq!(
            stored_mime_type(Some("text/csv"), Some("x.bin")).unwrap(),
            "text/csv"
        );
        assert_eq!(
            stored_mime_type(Some("application/octet-stream"), Some("x.PDF")).unwrap(),
            "application/pdf"
        );
        assert_eq!(
            stored_mime_type(None, None).unwrap(),
            "application/octet-stream"
        );
        assert_eq!(
            stored_mime_type(Some("text/plain; charset=utf-8"), None).unwrap(),
            "text/plain; charset=utf-8"
        );
        assert!(stored_mime_type(Some("nonsense"), None).is_err());
        assert!(stored_mime_type(Some("text/\u{1}x"), None).is_err());
    }

    #[test]
    fn expiry_is_bounded_like_the_sdk_says() {
        assert_eq!(expires_in_seconds("3600").unwrap(), 3600);
        assert!(expires_in_seconds("3599").is_err());
        assert!(expires_in_seconds("7776001").is_err());
        assert!(expires_in_seconds("soon").is_err());
    }
}
