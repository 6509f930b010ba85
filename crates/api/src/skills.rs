//! `/v1/skills`: skills and their versions, uploaded as multipart bundles (one
//! `files[]` part per file of a folder holding a `SKILL.md`), and each version's files as a
//! zip. No `anthropic-beta` header is required: the SDK sends none here. A self-hosted
//! worker's work token may retrieve and download the versions of its session's skills.

use axum::Router;
use axum::extract::{FromRequest, Multipart, Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::auth::{Principal, Workspace, session_workspace};
use super::error::{ApiError, ApiResult};
use super::extract::QueryParams;
use super::pagination::{Page, PageRequest};
use mast_domain::invalid::Invalid;
use mast_domain::query::Direction;
use mast_domain::skill::{
    DeletedSkill, DeletedSkillVersion, SkillDeletedTag, SkillObject, SkillVersionDeletedTag,
    SkillVersionObject,
};
use mast_domain::skill_bundle::{MAX_BUNDLE_BYTES, MAX_FILES};
use mast_engine::ops::OpError;

/// Longest `display_name`.
const MAX_DISPLAY_NAME: usize = 255;
/// Multipart framing a bundle's body may carry beyond its files' bytes.
const MULTIPART_SLACK: usize = MAX_FILES * 1024 + 64 * 1024;
/// The beta that addresses versions by epoch timestamps, which Mast's versions do not have.
const EPOCH_BETA: &str = "skills-2025-10-02";
/// Sources a skill list may be filtered by.
const SOURCES: &[&str] = &["custom", "anthropic", "anthropic_example", "plugin"];

/// The multipart body of `POST /v1/skills` (and, without `display_name`, of a new version).
#[derive(Debug, ToSchema)]
#[allow(dead_code)]
pub struct SkillUpload {
    /// One part per file; its `filename` is the file's path including the skill's folder
    /// (`my-skill/SKILL.md`, `my-skill/scripts/run.sh`).
    #[schema(rename = "files[]", value_type = Vec<String>, format = Binary)]
    files: Vec<Vec<u8>>,
    /// Human-readable name (one line, at most 255 characters); SKILL.md's `name` when omitted.
    display_name: Option<String>,
}

/// A version's files as a zip archive whose entries are `<name>/<path>`.
#[derive(Debug, ToSchema)]
#[schema(value_type = String, format = Binary)]
pub struct SkillArchive(#[allow(dead_code)] Vec<u8>);

/// A page of skills.
#[derive(Debug, Serialize, ToSchema)]
pub struct SkillPage {
    pub data: Vec<SkillObject>,
    pub next_page: Option<String>,
}

/// A page of skill versions.
#[derive(Debug, Serialize, ToSchema)]
pub struct SkillVersionPage {
    pub data: Vec<SkillVersionObject>,
    pub next_page: Option<String>,
}

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/skills", post(create).get(list))
        .route("/v1/skills/{skill_id}", get(retrieve).delete(delete))
        .route(
            "/v1/skills/{skill_id}/versions",
            post(create_version).get(list_versions),
        )
        .route(
            "/v1/skills/{skill_id}/versions/{version}",
            get(retrieve_version).delete(delete_version),
        )
        .route(
            "/v1/skills/{skill_id}/versions/{version}/content",
            get(download),
        )
}

fn too_large() -> ApiError {
    ApiError::too_large(format!(
        "a skill bundle's files may total at most {MAX_BUNDLE_BYTES} bytes"
    ))
}

/// Refuses the beta that would make version ids mean epoch timestamps.
fn refuse_epoch_beta(headers: &HeaderMap) -> ApiResult<()> {
    let asks = headers
        .get_all("anthropic-beta")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|b| b.trim() == EPOCH_BETA);
    if asks {
        return Err(Invalid::unsupported(
            "anthropic-beta",
            EPOCH_BETA,
            "versions are addressed by their `id` (as `latest_version_id` gives it); send no `anthropic-beta` header",
        )
        .into());
    }
    Ok(())
}

/// What the parts of an upload said.
struct Upload {
    display_name: Option<String>,
    files: Vec<(String, Vec<u8>)>,
}

/// Reads a bundle upload, refusing it as soon as its files pass the size limit.
async fn read_upload(app: &AppState, request: Request, with_name: bool) -> ApiResult<Upload> {
    if let Some(len) = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<usize>().ok())
        && len > MAX_BUNDLE_BYTES + MULTIPART_SLACK
    {
        return Err(too_large());
    }
    let mut mp = Multipart::from_request(request, app)
        .await
        .map_err(|e| super::extract::multipart_refusal(e, "one `files[]` part per file"))?;
    let bad = |e: axum::extract::multipart::MultipartError| {
        ApiError::invalid(format!(
            "the multipart body could not be read: {}",
            e.body_text()
        ))
    };
    let known: &[&str] = if with_name {
        &["files[]", "display_name"]
    } else {
        &["files[]"]
    };
    let mut up = Upload {
        display_name: None,
        files: Vec::new(),
    };
    let mut total = 0usize;
    while let Some(mut field) = mp.next_field().await.map_err(bad)? {
        let name = field.name().unwrap_or_default().to_string();
        match name.as_str() {
            "files[]" | "files" => {
                if up.files.len() == MAX_FILES {
                    return Err(ApiError::invalid(format!(
                        "a skill bundle may hold at most {MAX_FILES} files"
                    )));
                }
                let filename = field.file_name().unwrap_or_default().to_string();
                let mut bytes = Vec::new();
                while let Some(chunk) = field.chunk().await.map_err(bad)? {
                    total += chunk.len();
                    if total > MAX_BUNDLE_BYTES {
                        return Err(too_large());
                    }
                    bytes.extend_from_slice(&chunk);
                }
                up.files.push((filename, bytes));
            }
            "display_name" if with_name => {
                if up.display_name.is_some() {
                    return Err(Invalid::duplicate_field("display_name").into());
                }
                let mut text = Vec::new();
                while let Some(chunk) = field.chunk().await.map_err(bad)? {
                    text.extend_from_slice(&chunk);
                    if text.len() > 4 * MAX_DISPLAY_NAME {
                        break;
                    }
                }
                up.display_name = Some(check_display_name(&String::from_utf8_lossy(&text))?);
            }
            other => {
                return Err(Invalid::unknown_field("", other, "a skill upload", known).into());
            }
        }
    }
    Ok(up)
}

fn check_display_name(s: &str) -> ApiResult<String> {
    let s = s.trim();
    if s.is_empty() {
        return Err(ApiError::invalid(
            "`display_name` must not be empty (omit it to use SKILL.md's `name`)",
        ));
    }
    if s.chars().count() > MAX_DISPLAY_NAME || s.contains(['\n', '\r']) {
        return Err(ApiError::invalid(format!(
            "`display_name` must be one line of at most {MAX_DISPLAY_NAME} characters"
        )));
    }
    Ok(s.to_string())
}

/// The answer to a refused upload: a bundle over the size limit is a 413.
fn upload_refused(e: OpError) -> ApiError {
    match e {
        OpError::Invalid(i) if i.code == Some("skill_too_large") => too_large(),
        e => e.into(),
    }
}

/// Create a skill.
///
/// Uploads a skill's first version as `multipart/form-data`: one `files[]` part per file of the skill's folder, each part's `filename` its path including the folder (`my-skill/SKILL.md`), and an optional `display_name`. SKILL.md must open with YAML front matter giving `name` (kebab-case, at most 64 characters) and `description` (at most 1024). A bundle holds at most 500 files totalling 8 MiB (413 beyond).
#[utoipa::path(post, path = "/v1/skills", tag = "skills", operation_id = "skills_create",
    request_body(content = SkillUpload, content_type = "multipart/form-data"),
    responses((status = 200, body = SkillObject), (status = 400, body = super::openapi::ErrorBody),
        (status = 413, body = super::openapi::ErrorBody, description = "the bundle is over the size limit"),
        (status = 415, body = super::openapi::ErrorBody, description = "the body is not multipart/form-data")))]
async fn create(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    request: Request,
) -> ApiResult<axum::Json<SkillObject>> {
    refuse_epoch_beta(request.headers())?;
    let up = read_upload(&app, request, true).await?;
    let skill = app
        .engine
        .create_skill(&ws, up.display_name, up.files)
        .await
        .map_err(upload_refused)?;
    Ok(axum::Json(skill))
}

/// List skills.
///
/// Lists the workspace's skills, newest first, with cursor pagination; `source` keeps one source (`custom`: uploaded here; Mast holds no `anthropic` skills).
#[utoipa::path(get, path = "/v1/skills", tag = "skills", operation_id = "skills_list",
    params(("limit" = Option<i64>, Query, minimum = 1, maximum = 1000), ("page" = Option<String>, Query), ("source" = Option<String>, Query, description = "Only skills of this source: `custom` (uploaded here), `anthropic`, `anthropic_example` or `plugin` (Mast holds none of the last three).")),
    responses((status = 200, body = SkillPage), (status = 400, body = super::openapi::ErrorBody)))]
async fn list(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    headers: HeaderMap,
    q: QueryParams,
) -> ApiResult<axum::Json<SkillPage>> {
    refuse_epoch_beta(&headers)?;
    let source = q.get("source").filter(|s| !s.is_empty());
    if let Some(s) = source
        && !SOURCES.contains(&s)
    {
        return Err(ApiError::invalid(format!(
            "`source` must be one of {}, not `{s}`",
            mast_domain::fields::quoted(SOURCES)
        )));
    }
    let page = PageRequest::<String>::parse(&q, Direction::Descending, 20, 1000, false)?;
    let rows = app.engine.list_skills(&ws, source, &page.scan()).await?;
    let Page {
        data, next_page, ..
    } = page.finish(rows, |s| s.id.clone());
    Ok(axum::Json(SkillPage { data, next_page }))
}

/// Retrieve a skill.
///
/// Returns one skill of the workspace, with its `latest_version_id`.
#[utoipa::path(get, path = "/v1/skills/{skill_id}", tag = "skills", operation_id = "skills_retrieve", params(("skill_id" = String, Path, description = "The skill's id (`skill_...`).")),
    responses((status = 200, body = SkillObject), (status = 404, body = super::openapi::ErrorBody)))]
async fn retrieve(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<SkillObject>> {
    refuse_epoch_beta(&headers)?;
    Ok(axum::Json(app.engine.skill(&ws, &id).await?))
}

/// Delete a skill.
///
/// Deletes a skill with all its versions. Sessions already running with it say in their system prompt that it is unavailable; new sessions of agents that still name it are refused.
#[utoipa::path(delete, path = "/v1/skills/{skill_id}", tag = "skills", operation_id = "skills_delete", params(("skill_id" = String, Path, description = "The skill's id (`skill_...`).")),
    responses((status = 200, body = DeletedSkill), (status = 404, body = super::openapi::ErrorBody)))]
async fn delete(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    headers: HeaderMap,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<DeletedSkill>> {
    refuse_epoch_beta(&headers)?;
    app.engine.delete_skill(&ws, &id).await?;
    Ok(axum::Json(DeletedSkill {
        id,
        tag: SkillDeletedTag::Tag,
    }))
}

/// Create a skill version.
///
/// Uploads a new version of a skill, as for creating a skill (without `display_name`); its SKILL.md must give the skill's `name`. It becomes the skill's `latest_version_id`.
#[utoipa::path(post, path = "/v1/skills/{skill_id}/versions", tag = "skills", operation_id = "skills_versions_create",
    params(("skill_id" = String, Path, description = "The skill's id (`skill_...`).")),
    request_body(content = SkillUpload, content_type = "multipart/form-data"),
    responses((status = 200, body = SkillVersionObject), (status = 400, body = super::openapi::ErrorBody),
        (status = 404, body = super::openapi::ErrorBody), (status = 413, body = super::openapi::ErrorBody),
        (status = 415, body = super::openapi::ErrorBody, description = "the body is not multipart/form-data")))]
async fn create_version(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    Path(skill_id): Path<String>,
    request: Request,
) -> ApiResult<axum::Json<SkillVersionObject>> {
    refuse_epoch_beta(request.headers())?;
    // A missing skill is said before its upload is read.
    app.engine.skill(&ws, &skill_id).await?;
    let up = read_upload(&app, request, false).await?;
    let version = app
        .engine
        .create_skill_version(&ws, &skill_id, up.files)
        .await
        .map_err(upload_refused)?;
    Ok(axum::Json(version))
}

/// List skill versions.
///
/// Lists a skill's versions, newest first, with cursor pagination.
#[utoipa::path(get, path = "/v1/skills/{skill_id}/versions", tag = "skills", operation_id = "skills_versions_list",
    params(("skill_id" = String, Path, description = "The skill's id (`skill_...`)."), ("limit" = Option<i64>, Query, minimum = 1, maximum = 1000), ("page" = Option<String>, Query)),
    responses((status = 200, body = SkillVersionPage), (status = 404, body = super::openapi::ErrorBody)))]
async fn list_versions(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    headers: HeaderMap,
    Path(skill_id): Path<String>,
    q: QueryParams,
) -> ApiResult<axum::Json<SkillVersionPage>> {
    refuse_epoch_beta(&headers)?;
    let page = PageRequest::<String>::parse(&q, Direction::Descending, 20, 1000, false)?;
    let rows = app
        .engine
        .list_skill_versions(&ws, &skill_id, &page.scan())
        .await?;
    let Page {
        data, next_page, ..
    } = page.finish(rows, |v| v.id.clone());
    Ok(axum::Json(SkillVersionPage { data, next_page }))
}

/// The workspace in which `principal` may read versions of `skill_id`: any skill of its
/// workspace for an API key; for a self-hosted worker's work token, the skills its session's
/// agent names (what the SDK's worker downloads before running tools).
async fn reader_workspace(
    app: &AppState,
    principal: &Principal,
    skill_id: &str,
) -> ApiResult<String> {
    let Principal::WorkToken { session_id, .. } = principal else {
        return match principal {
            Principal::ApiKey { workspace, .. } => Ok(workspace.clone()),
            _ => Err(ApiError::forbidden(
                "an environment key cannot read skills; the worker reads its session's skills with the work item's sessions token",
            )),
        };
    };
    let ws = session_workspace(&app.engine, principal, session_id).await?;
    if !app
        .engine
        .session_names_skill(&ws, session_id, skill_id)
        .await?
    {
        return Err(ApiError::forbidden(format!(
            "this work token's session does not use skill `{skill_id}`"
        )));
    }
    Ok(ws)
}

/// Retrieve a skill version.
///
/// Returns one version; `latest` names the skill's newest. A self-hosted worker may call this with its work item's sessions token for the skills of that session's agent.
#[utoipa::path(get, path = "/v1/skills/{skill_id}/versions/{version}", tag = "skills", operation_id = "skills_versions_retrieve",
    params(("skill_id" = String, Path, description = "The skill's id (`skill_...`)."), ("version" = String, Path, description = "a version id, or `latest`")),
    responses((status = 200, body = SkillVersionObject), (status = 404, body = super::openapi::ErrorBody)))]
async fn retrieve_version(
    State(app): State<AppState>,
    principal: Principal,
    headers: HeaderMap,
    Path((skill_id, version)): Path<(String, String)>,
) -> ApiResult<axum::Json<SkillVersionObject>> {
    refuse_epoch_beta(&headers)?;
    let ws = reader_workspace(&app, &principal, &skill_id).await?;
    Ok(axum::Json(
        app.engine.skill_version(&ws, &skill_id, &version).await?,
    ))
}

/// Delete a skill version.
///
/// Deletes one version; the skill's `latest_version_id` moves to the newest one left. A skill keeps at least one version: delete the skill itself instead of its last.
#[utoipa::path(delete, path = "/v1/skills/{skill_id}/versions/{version}", tag = "skills", operation_id = "skills_versions_delete",
    params(("skill_id" = String, Path, description = "The skill's id (`skill_...`)."), ("version" = String, Path, description = "A version id (not `latest`).")),
    responses((status = 200, body = DeletedSkillVersion), (status = 400, body = super::openapi::ErrorBody), (status = 404, body = super::openapi::ErrorBody)))]
async fn delete_version(
    State(app): State<AppState>,
    Workspace(ws): Workspace,
    headers: HeaderMap,
    Path((skill_id, version)): Path<(String, String)>,
) -> ApiResult<axum::Json<DeletedSkillVersion>> {
    refuse_epoch_beta(&headers)?;
    app.engine
        .delete_skill_version(&ws, &skill_id, &version)
        .await?;
    Ok(axum::Json(DeletedSkillVersion {
        id: version,
        tag: SkillVersionDeletedTag::Tag,
    }))
}

/// Download a skill version.
///
/// Returns the version's files as a zip archive whose entries are `<name>/<path>` (`name` is the version's), with Unix modes (scripts executable). A self-hosted worker may call this with its work item's sessions token for the skills of that session's agent.
#[utoipa::path(get, path = "/v1/skills/{skill_id}/versions/{version}/content", tag = "skills", operation_id = "skills_versions_download",
    params(("skill_id" = String, Path, description = "The skill's id (`skill_...`)."), ("version" = String, Path, description = "a version id, or `latest`")),
    responses((status = 200, description = "the version's files as a zip archive", content_type = "application/zip", body = SkillArchive),
        (status = 404, body = super::openapi::ErrorBody)))]
async fn download(
    State(app): State<AppState>,
    principal: Principal,
    headers: HeaderMap,
    Path((skill_id, version)): Path<(String, String)>,
) -> ApiResult<Response> {
    refuse_epoch_beta(&headers)?;
    let ws = reader_workspace(&app, &principal, &skill_id).await?;
    let (name, zip) = app
        .engine
        .skill_version_archive(&ws, &skill_id, &version)
        .await?;
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{name}.zip\""))
        .unwrap_or_else(|_| HeaderValue::from_static("attachment"));
    let mut resp = (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/zip"),
            ),
            (header::CONTENT_DISPOSITION, disposition),
        ],
        zip,
    )
        .into_response();
    super::page_headers::download(resp.headers_mut());
    Ok(resp)
}
