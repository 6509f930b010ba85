//! `{"type": "file", "file_id"}` sources of `image` and `document` blocks, in
//! user messages and tool results. A batch is accepted only when each file exists in the
//! workspace, has not expired, and is something the block can carry (an image type, a PDF or
//! text) within the size a model request takes. The event log keeps the reference; each model
//! request carries the bytes, read from the file store and inlined as the `base64` (or, for
//! text, `text`) source every provider understands — the provider's own Files API does not
//! know our ids. A file deleted or expired after it was accepted becomes a text block saying
//! so, so the session goes on without it.

use base64::Engine as _;
use futures_util::StreamExt as _;
use serde_json::{Value, json};

use super::Inner;
use super::ops::OpError;
use crate::files::FileError;
use mast_domain::content::IMAGE_TYPES;
use mast_domain::events::ClientEvent;
use mast_domain::invalid::Invalid;
use mast_models::Message;
use mast_store::StoreError;

/// Largest file an image block may name (the Messages API's per-image limit).
pub const MAX_IMAGE_BYTES: i64 = 5 * 1024 * 1024;
/// Largest file a document block may name (the Messages API's request limit).
pub const MAX_DOCUMENT_BYTES: i64 = 32 * 1024 * 1024;
/// Most file sources one request may carry (the documented limit for `initial_events`).
pub const MAX_FILE_SOURCES: usize = 100;

/// One file source of a batch: where it is, which block holds it, and the file.
struct Named<'a> {
    at: String,
    image: bool,
    file_id: &'a str,
}

fn content_of(e: &ClientEvent) -> &[Value] {
    match e {
        ClientEvent::UserMessage { content }
        | ClientEvent::CustomToolResult { content, .. }
        | ClientEvent::ToolResult { content, .. } => content,
        _ => &[],
    }
}

fn file_id(block: &Value) -> Option<&str> {
    let src = block.get("source")?;
    (src.get("type")?.as_str()? == "file").then_some(())?;
    src.get("file_id")?.as_str()
}

fn named<'a>(prefix: &str, batch: &'a [ClientEvent]) -> Vec<Named<'a>> {
    let mut out = Vec::new();
    for (i, e) in batch.iter().enumerate() {
        for (j, b) in content_of(e).iter().enumerate() {
            if let Some(id) = file_id(b) {
                out.push(Named {
                    at: format!("{prefix}[{i}].content[{j}].source.file_id"),
                    image: b.get("type").and_then(Value::as_str) == Some("image"),
                    file_id: id,
                });
            }
        }
    }
    out
}

/// The media type without parameters, lowercased.
fn essence(mime: &str) -> String {
    mime.split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// What an image or document block makes of a file of this media type, or why it cannot.
fn fits(image: bool, mime: &str) -> Result<(), String> {
    let m = essence(mime);
    if image {
        if IMAGE_TYPES.contains(&m.as_str()) {
            return Ok(());
        }
        return Err(format!(
            "an image block takes files of type {}",
            IMAGE_TYPES.join(", ")
        ));
    }
    if m == "application/pdf" || m.starts_with("text/") {
        return Ok(());
    }
    Err("a document block takes PDF (`application/pdf`) or text (`text/*`) files".into())
}

impl super::Engine {
    /// Every file source in `batch` names a live file of workspace `ws` that its block can
    /// carry; `prefix` names the list in errors (`events`, `initial_events`).
    pub(crate) async fn check_file_sources(
        &self,
        ws: &str,
        prefix: &str,
        batch: &[ClientEvent],
    ) -> Result<(), OpError> {
        let list = named(prefix, batch);
        if list.is_empty() {
            return Ok(());
        }
        let Some(files) = self.inner.files.as_ref() else {
            return Err(Invalid::unsupported(
                &list[0].at,
                "file_source",
                "this server runs without file storage; send the content as a `base64` or `url` source",
            )
            .into());
        };
        if list.len() > MAX_FILE_SOURCES {
            return Err(Invalid::new(format!(
                "`{prefix}` has {} file sources; at most {MAX_FILE_SOURCES} are accepted at once",
                list.len()
            ))
            .into());
        }
        for n in list {
            let f = match files.get(ws, n.file_id).await {
                Ok(f) => f,
                Err(FileError::NotFound(_)) => {
                    return Err(Invalid::new(format!(
                        "`{}`: file `{}` not found",
                        n.at, n.file_id
                    ))
                    .into());
                }
                Err(FileError::Expired(_)) => {
                    return Err(Invalid::new(format!(
                        "`{}`: file `{}` has expired",
                        n.at, n.file_id
                    ))
                    .into());
                }
                Err(FileError::Store(e)) => return Err(e.into()),
                Err(e) => return Err(StoreError::Internal(anyhow::anyhow!(e)).into()),
            };
            if let Err(why) = fits(n.image, &f.mime_type) {
                return Err(Invalid::new(format!(
                    "`{}`: file `{}` is `{}`; {why}",
                    n.at, n.file_id, f.mime_type
                ))
                .into());
            }
            let max = if n.image {
                MAX_IMAGE_BYTES
            } else {
                MAX_DOCUMENT_BYTES
            };
            if f.size_bytes > max {
                return Err(Invalid::new(format!(
                    "`{}`: file `{}` has {} bytes; an {} block takes at most {max}",
                    n.at,
                    n.file_id,
                    f.size_bytes,
                    if n.image { "image" } else { "document" }
                ))
                .into());
            }
        }
        Ok(())
    }
}

/// Replaces every file source in `messages` (tool results' content included) by the file's
/// bytes. Sources already inlined (by an earlier request of this runner) are left alone.
pub(super) async fn inline(inner: &Inner, sid: &str, messages: &mut [Message]) {
    let mut ws = None;
    for m in messages.iter_mut() {
        for block in m.content.iter_mut() {
            if block.get("type").and_then(Value::as_str) == Some("tool_result") {
                if let Some(Value::Array(inner_blocks)) = block.get_mut("content") {
                    for b in inner_blocks.iter_mut() {
                        inline_block(inner, sid, &mut ws, b).await;
                    }
                }
            } else {
                inline_block(inner, sid, &mut ws, block).await;
            }
        }
    }
}

async fn inline_block(inner: &Inner, sid: &str, ws: &mut Option<String>, block: &mut Value) {
    let Some(id) = file_id(block).map(str::to_string) else {
        return;
    };
    let image = block.get("type").and_then(Value::as_str) == Some("image");
    if ws.is_none() {
        *ws = match inner.store.get_session_by_id(sid).await {
            Ok(Some(rec)) => Some(rec.workspace_id),
            _ => None,
        };
    }
    let read = match ws.as_deref() {
        Some(ws) => source(inner, ws, &id, image).await,
        None => Err("its session could not be read".into()),
    };
    match read {
        Ok(src) => block["source"] = src,
        Err(why) => {
            let what = if image { "image" } else { "document" };
            *block = mast_domain::content::text(format!(
                "[{what} from file `{id}` is not available: {why}]"
            ));
        }
    }
}

/// The inline source of file `id`: base64 for images and PDFs, text for text files.
async fn source(inner: &Inner, ws: &str, id: &str, image: bool) -> Result<Value, String> {
    let files = inner
        .files
        .as_ref()
        .ok_or("this server runs without file storage")?;
    let (f, mut stream) = files.open_content(ws, id).await.map_err(|e| match e {
        FileError::NotFound(_) => "the file was deleted".to_string(),
        FileError::Expired(_) => "the file has expired".to_string(),
        e => e.to_string(),
    })?;
    fits(image, &f.mime_type)?;
    let max = if image {
        MAX_IMAGE_BYTES
    } else {
        MAX_DOCUMENT_BYTES
    } as usize;
    let mut bytes = Vec::with_capacity((f.size_bytes.max(0) as usize).min(max));
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| e.to_string())?;
        if bytes.len() + chunk.len() > max {
            return Err(format!("the file is larger than {max} bytes"));
        }
        bytes.extend_from_slice(&chunk);
    }
    let mime = essence(&f.mime_type);
    if mime.starts_with("text/") {
        return Ok(json!({"type": "text", "media_type": "text/plain",
            "data": String::from_utf8_lossy(&bytes)}));
    }
    Ok(json!({"type": "base64", "media_type": mime,
        "data": base64::engine::general_purpose::STANDARD.encode(&bytes)}))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_take_the_files_they_can_carry() {
        assert!(fits(true, "image/png").is_ok());
        assert!(fits(true, "IMAGE/JPEG; q=1").is_ok());
        assert!(fits(true, "application/pdf").is_err());
        assert!(fits(false, "application/pdf").is_ok());
        assert!(fits(false, "text/csv; charset=utf-8").is_ok());
        assert!(fits(false, "image/png").is_err());
    }

    #[test]
    fn file_sources_are_named_by_their_place() {
        let batch = vec![
            ClientEvent::UserMessage {
                content: vec![
                    json!({"type":"text","text":"hi"}),
                    json!({"type":"image","source":{"type":"file","file_id":"file_a"}}),
                ],
            },
            ClientEvent::ToolResult {
                tool_use_id: "t".into(),
                content: vec![
                    json!({"type":"document","source":{"type":"file","file_id":"file_b"}}),
                ],
                is_error: None,
            },
        ];
        let got: Vec<(String, bool, &str)> = named("events", &batch)
            .into_iter()
            .map(|n| (n.at, n.image, n.file_id))
            .collect();
        assert_eq!(
            got,
            [
                ("events[0].content[1].source.file_id".into(), true, "file_a"),
                (
                    "events[1].content[0].source.file_id".into(),
                    false,
                    "file_b"
                )
            ]
        );
    }
}
