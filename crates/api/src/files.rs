//! `/v1/files`, the Files API: upload (multipart, streamed to storage), list, retrieve
//! metadata, download (streamed) and delete. No `anthropic-beta` header is required: the
//! SDK sends none for files.

use axum::Router;
use axum::body::Body;
use axum::extract::{DefaultBodyLimit, FromRequest, Multipart, Path, Request, State};
use axum::http::{HeaderValue, header};
use axum::response::Response;
use axum::routing::{get, post};
use futures_util::StreamExt as _;
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::auth::{Principal, Workspace, session_workspace};
use super::error::{ApiError, ApiResult};
use super::extract::QueryParams;
use super::pagination::{Page, PageRequest};
use mast_domain::file::{
    self, DeletedFile, FileDeletedTag, FileMetadata, FileScope, FileTag, SessionScopeTag,
};
use mast_domain::ids::new_id;
use mast_domain::invalid::Invalid;
use mast_domain::query::{Direction, FileFilter, Scan};
use mast_domain::time;
use mast_engine::files::{BlobError, FileError, FileRecord};

/// Most ids one `ids[]` list may name (after de-duplication).
const MAX_IDS: usize = 100;
/// Largest text part of an upload (`expires_in_seconds`).
const MAX_TEXT_PART: usize = 1024;
/// Multipart framing and text parts a body may carry beyond the file's own bytes.
const MULTIPART_SLACK: u64 = 64 * 1024;

/// The multipart body of `POST /v1/files`.
#[derive(Debug, ToSchema)]
#[allow(dead_code)]
pub struct FileUpload {
    /// The file's bytes; the part's `filename` and `Content-Type` give its name and media type.
    #[schema(value_type = String, format = Binary)]
    file: Vec<u8>,
    /// Deletes the file this many seconds after the upload (3600 to 7776000).
    expires_in_seconds: Option<i64>,
}

/// A download's body: the file's bytes.
#[derive(Debug, ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct FileBytes(#[allow(dead_code)] Vec<u8>);

/// A page of files.
#[derive(Debug, Serialize, ToSchema)]
pub struct FilePage {
    pub data: Vec<FileMetadata>,
    pub next_page: Option<String>,
}

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/files",
            // The upload enforces its own limit while streaming (`MAST_FILES_MAX_BYTES`).
            post(upload).layer(DefaultBodyLimit::disable()).get(list),
        )
        .route("/v1/files/{file_id}", get(retrieve).delete(delete))
        .route("/v1/files/{file_id}/content", get(download))
}

/// The wire form of a stored file.
fn metadata(r: &FileRecord) -> FileMetadata {
    FileMetadata {
        tag: FileTag::Tag,
        id: r.id.clone(),
        filename: r.filename.clone(),
        mime_type: r.mime_type.clone(),
        size_bytes: r.size_bytes,
        created_at: time::format(r.created_at),
        downloadable: r.downloadable,
        expires_at: time::format_opt(r.expires_at),
        scope: r.scope_id.clone().map(|id| FileScope {
            tag: SessionScopeTag::Tag,
            id,
        }),
    }
}

fn file_error(e: FileError) -> ApiError {
    match e {
        FileError::NotFound(id) => ApiError::not_found(format!("file `{id}` not found")),
        FileError::Expired(id) => {
            let mut err = ApiError::not_found(format!(
                "file `{id}` has expired: its `expires_at` has passed"
            ));
            err.details = Some(serde_json::json!({ "error_code": "file_expired" }));
            err
        }
        FileError::Store(e) => e.into(),
        FileError::Blob(e) => ApiError::internal(format!("file storage: {e:#}")),
    }
}

fn too_large(max: u64) -> ApiError {
    ApiError::too_large(format!(
        "the file is larger than this server's limit of {max} bytes (MAST_FILES_MAX_BYTES)"
    ))
}

fn blob_error(e: BlobError, max: u64) -> ApiError {
    match e {
        BlobError::TooLarge(_) => too_large(max),
        BlobError::Source(m) => {
            ApiError::invalid(format!("the multipart body could not be read: {m}"))
        }
        e => ApiError::internal(format!("file storage: {e:#}")),
    }
}

/// What the parts of an upload said.
#[derive(Default)]
struct Parts {
    /// The stored blob's id, name, media type and size, once the `file` part is in.
    file: Option<(String, String, String, u64)>,
    expires_in_seconds: Option<i64>,
}

async fn read_parts(app: &AppState, mp: &mut Multipart, parts: &mut Parts) -> ApiResult<()> {
    let bad = |e: axum::extract::multipart::MultipartError| {
        ApiError::invalid(format!(
            "the multipart body could not be read: {}",
            e.body_text()
        ))
    };
    while let Some(mut field) = mp.next_field().await.map_err(bad)? {
        let name = field.name().unwrap_or_default().to_string();
        match name.as_str() {
            "file" => {
                if parts.file.is_some() {
                    return Err(Invalid::duplicate_field("file").into());
                }
                // Decided before any byte is stored, so a bad name costs no upload.
                let mime = file::stored_mime_type(field.content_type(), field.file_name())?;
                let filename = file::stored_filename(field.file_name(), &mime)?;
                let id = new_id("file");
                let size = app
                    .files
                    .put_bytes(&id, field.boxed())
                    .await
                    .map_err(|e| blob_error(e, app.files.max_bytes))?;
                parts.file = Some((id, filename, mime, size));
            }
            "expires_in_seconds" => {
                if parts.expires_in_seconds.is_some() {
                    return Err(Invalid::duplicate_field("expires_in_seconds").into());
                }
                let mut text = Vec::new();
                while let Some(chunk) = field.chunk().await.map_err(bad)? {
                    text.extend_from_slice(&chunk);
                    if text.len() > MAX_TEXT_PART {
                        break;
                    }
                }
                let text = String::from_utf8_lossy(&text);
                parts.expires_in_seconds = Some(file::expires_in_seconds(&text)?);
            }
            other => {
                return Err(Invalid::unknown_field(
                    "",
                    other,
                    "a file upload",
                    &["file", "expires_in_seconds"],
                )
                .into());
            }
        }
    }
    Ok(())
}

/// Upload a file.
///
/// Uploads a file as `multipart/form-data`: a `file` part (its `filename` and `Content-Type` give the stored name and media type) and an optional `expires_in_seconds` part. The bytes are streamed to storage; a file over the server's limit (`MAST_FILES_MAX_BYTES`, 500 MB by default) is refused with 413.
#[utoipa::path(post, path = "/v1/files", tag = "files", operation_id = "files_upload",
    request_body(content = FileUpload, content_type = "multipart/form-data"),
    responses((status = 200, body = FileMetadata), (status = 400, body = super::openapi::ErrorBody),
        (status = 413, body = super::openapi::ErrorBody, description = "the file is over the size limit"),
        (status = 415, body = super::openapi::ErrorBody, description = "the body is not multipart/form-data")))]
async fn upload(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    request: Request,
) -> ApiResult<axum::Json<FileMetadata>> {
    let max = app.files.max_bytes;
    // A body announced larger than any acceptable upload is refused before a byte is read.
    if let Some(len) = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        && len > max.saturating_add(MULTIPART_SLACK)
    {
        return Err(too_large(max));
    }
    let mut mp = Multipart::from_request(request, &app)
        .await
        .map_err(|e| super::extract::multipart_refusal(e, "a `file` part"))?;
    let mut parts = Parts::default();
    let read = read_parts(&app, &mut mp, &mut parts).await;
    let Some((id, filename, mime_type, size)) = parts.file else {
        read?;
        return Err(Invalid::new("`file` is required: a multipart part named `file`").into());
    };
    if let Err(e) = read {
        app.files.discard(&id).await;
        return Err(e);
    }
    let created_at = app.files.now();
    let record = FileRecord {
        id,
        workspace_id: ws,
        filename,
        mime_type,
        size_bytes: size as i64,
        downloadable: true,
        scope_id: None,
        created_at,
        expires_at: parts.expires_in_seconds.map(|s| created_at + s * 1_000_000),
    };
    app.files.register(&record).await?;
    Ok(axum::Json(metadata(&record)))
}

/// List files.
///
/// Lists the workspace's files, newest first, with cursor pagination. `scope_id` keeps the files of one session; `ids[]` (at most 100, not with `page` or `limit`) returns those of the given ids that exist, as one page.
#[utoipa::path(get, path = "/v1/files", tag = "files", operation_id = "files_list",
    params(("limit" = Option<i64>, Query, minimum = 1, maximum = 1000), ("page" = Option<String>, Query), ("scope_id" = Option<String>, Query),
        ("ids[]" = Option<Vec<String>>, Query)),
    responses((status = 200, body = FilePage), (status = 400, body = super::openapi::ErrorBody)))]
async fn list(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    q: QueryParams,
) -> ApiResult<axum::Json<FilePage>> {
    for old in ["after_id", "before_id"] {
        if q.get(old).is_some() {
            return Err(Invalid::unsupported(
                old,
                "files_list_after_id",
                "page with `page` and the `next_page` cursor of the previous page",
            )
            .into());
        }
    }
    let mut filter = FileFilter {
        scope_id: q.get("scope_id").map(str::to_string),
        ids: Vec::new(),
        live_at: app.files.now(),
    };
    let mut ids = q.all("ids");
    if !ids.is_empty() {
        if q.get("page").is_some() || q.get("limit").is_some() {
            return Err(ApiError::invalid(
                "`ids` cannot be combined with `page` or `limit`: it always returns one page",
            ));
        }
        ids.sort();
        ids.dedup();
        if ids.len() > MAX_IDS {
            return Err(ApiError::invalid(format!(
                "`ids` may name at most {MAX_IDS} files"
            )));
        }
        let scan = Scan {
            after: None,
            direction: Direction::Descending,
            limit: MAX_IDS as i64,
        };
        filter.ids = ids;
        let rows = app.files.list(&ws, &filter, &scan).await?;
        return Ok(axum::Json(FilePage {
            data: rows.iter().map(metadata).collect(),
            next_page: None,
        }));
    }
    let page = PageRequest::<String>::parse(&q, Direction::Descending, 20, 1000, false)?;
    let rows = app.files.list(&ws, &filter, &page.scan()).await?;
    let Page {
        data, next_page, ..
    } = page.finish(rows, |f| f.id.clone());
    Ok(axum::Json(FilePage {
        data: data.iter().map(metadata).collect(),
        next_page,
    }))
}

/// Retrieve a file's metadata.
///
/// Returns one file's metadata; 404 with `error_code` `file_expired` once its `expires_at` has passed. A self-hosted work item's token may read the files its session mounts as resources.
#[utoipa::path(get, path = "/v1/files/{file_id}", tag = "files", operation_id = "files_retrieve_metadata", params(("file_id" = String, Path)),
    responses((status = 200, body = FileMetadata), (status = 404, body = super::openapi::ErrorBody)))]
async fn retrieve(
    State(app): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<FileMetadata>> {
    let ws = readable_workspace(&app, &principal, &id).await?;
    let file = app.files.get(&ws, &id).await.map_err(file_error)?;
    Ok(axum::Json(metadata(&file)))
}

/// The workspace in which `principal` may read file `id`: any file for an API key; for a
/// held work item's token, the files its session mounts as `file` resources, which a
/// self-hosted worker fetches to put at their mount paths (docs/files-and-resources.md, "Self-hosted sessions").
async fn readable_workspace(app: &AppState, principal: &Principal, id: &str) -> ApiResult<String> {
    let Principal::WorkToken { session_id, .. } = principal else {
        return Workspace::of(principal).map(|w| w.0);
    };
    let ws = session_workspace(&app.engine, principal, session_id).await?;
    let mounted = app
        .engine
        .resources(&ws, session_id)
        .await?
        .iter()
        .any(|r| {
            r.get("type").and_then(serde_json::Value::as_str) == Some("file")
                && r.get("file_id").and_then(serde_json::Value::as_str) == Some(id)
        });
    if !mounted {
        return Err(ApiError::forbidden(format!(
            "a work token reads only the files its session mounts; file `{id}` is not one of them"
        )));
    }
    Ok(ws)
}

/// `attachment; filename="…"` with an ASCII stand-in, plus the exact name (RFC 6266).
fn content_disposition(filename: &str) -> HeaderValue {
    let ascii: String = filename
        .chars()
        .map(|c| {
            if c.is_ascii_graphic() && c != '"' && c != '\\' || c == ' ' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let exact: String = filename
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"!#$&+-.^_`|~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect();
    HeaderValue::from_str(&format!(
        "attachment; filename=\"{ascii}\"; filename*=UTF-8''{exact}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("attachment"))
}

/// Download a file.
///
/// Streams a file's bytes with its media type as `Content-Type`, its size as `Content-Length` and its name in `Content-Disposition`. A self-hosted work item's token may download the files its session mounts as resources.
#[utoipa::path(get, path = "/v1/files/{file_id}/content", tag = "files", operation_id = "files_download", params(("file_id" = String, Path)),
    responses((status = 200, description = "the file's bytes, with its own media type as `Content-Type`", content_type = "*/*", body = FileBytes),
        (status = 404, body = super::openapi::ErrorBody)))]
async fn download(
    State(app): State<AppState>,
    principal: Principal,
    Path(id): Path<String>,
) -> ApiResult<Response> {
    let ws = readable_workspace(&app, &principal, &id).await?;
    let (file, bytes) = app.files.open_content(&ws, &id).await.map_err(file_error)?;
    let mime = HeaderValue::from_str(&file.mime_type)
        .unwrap_or_else(|_| HeaderValue::from_static("application/octet-stream"));
    let mut resp = Response::builder()
        .header(header::CONTENT_TYPE, mime)
        .header(header::CONTENT_LENGTH, file.size_bytes)
        .header(
            header::CONTENT_DISPOSITION,
            content_disposition(&file.filename),
        )
        .body(Body::from_stream(bytes))
        .map_err(ApiError::internal)?;
    super::page_headers::download(resp.headers_mut());
    Ok(resp)
}

/// Delete a file.
///
/// Deletes a file and frees its bytes.
#[utoipa::path(delete, path = "/v1/files/{file_id}", tag = "files", operation_id = "files_delete", params(("file_id" = String, Path)),
    responses((status = 200, body = DeletedFile), (status = 404, body = super::openapi::ErrorBody)))]
async fn delete(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<DeletedFile>> {
    app.files.delete(&ws, &id).await.map_err(file_error)?;
    Ok(axum::Json(DeletedFile {
        id,
        tag: FileDeletedTag::Tag,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn disposition_keeps_the_exact_name_and_an_ascii_stand_in() {
        let v = content_disposition("résumé \"1\".pdf");
        assert_eq!(
            v.to_str().unwrap(),
            "attachment; filename=\"r_sum_ _1_.pdf\"; filename*=UTF-8''r%C3%A9sum%C3%A9%20%221%22.pdf"
        );
    }
}
