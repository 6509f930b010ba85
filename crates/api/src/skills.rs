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
use mast_domain::agent::Skill;
use mast_domain::ids::new_id;
use mast_domain::invalid::Invalid;
use mast_domain::query::Direction;
use mast_domain::session::SessionBody;
use mast_domain::skill::{
    DeletedSkill, DeletedSkillVersion, LATEST, SkillDeletedTag, SkillObject, SkillSource, SkillTag,
    SkillVersionDeletedTag, SkillVersionObject, SkillVersionTag,
};
use mast_domain::skill_bundle::{self, MAX_BUNDLE_BYTES, MAX_FILES};
use mast_domain::time;
use mast_store::{
    NewSkillVersion, SkillRecord, SkillVersionDelete, SkillVersionRecord, StoreError,
};

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

fn skill_view(r: &SkillRecord) -> SkillObject {
    SkillObject {
        tag: SkillTag::Tag,
        id: r.id.clone(),
        display_name: r.display_name.clone(),
        source: SkillSource {
            kind: r.source.clone(),
        },
        latest_version_id: r.latest_version_id.clone(),
        created_at: time::format(r.created_at),
        updated_at: time::format(r.updated_at),
    }
}

fn version_view(v: &SkillVersionRecord) -> SkillVersionObject {
    SkillVersionObject {
        tag: SkillVersionTag::Tag,
        id: v.id.clone(),
        skill_id: v.skill_id.clone(),
        name: v.name.clone(),
        description: v.description.clone(),
        created_at: time::format(v.created_at),
    }
}

fn skill_not_found(id: &str) -> ApiError {
    ApiError::not_found(format!("skill `{id}` not found"))
}

fn version_not_found(skill_id: &str, version: &str) -> ApiError {
    ApiError::not_found(format!("skill `{skill_id}` has no version `{version}`"))
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

/// Checks the uploaded files and makes them a stored version of `skill_id`.
fn new_version(skill_id: &str, files: Vec<(String, Vec<u8>)>) -> ApiResult<NewSkillVersion> {
    let bundle = skill_bundle::parse(files).map_err(|e| {
        if e.code == Some("skill_too_large") {
            too_large()
        } else {
            e.into()
        }
    })?;
    Ok(NewSkillVersion {
        version: SkillVersionRecord {
            id: new_id("skillver"),
            skill_id: skill_id.to_string(),
            name: bundle.name,
            description: bundle.description,
            created_at: time::now(),
        },
        files: bundle.files,
    })
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
    let id = new_id("skill");
    let first = new_version(&id, up.files)?;
    let v = &first.version;
    let skill = SkillRecord {
        id,
        workspace_id: ws,
        display_name: up.display_name.unwrap_or_else(|| v.name.clone()),
        source: "custom".into(),
        name: v.name.clone(),
        latest_version_id: v.id.clone(),
        created_at: v.created_at,
        updated_at: v.created_at,
    };
    app.store.insert_skill(&skill, &first).await?;
    Ok(axum::Json(skill_view(&skill)))
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
    let rows = app.store.list_skills(&ws, source, &page.scan()).await?;
    let Page {
        data, next_page, ..
    } = page.finish(rows, |s| s.id.clone());
    Ok(axum::Json(SkillPage {
        data: data.iter().map(skill_view).collect(),
        next_page,
    }))
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
    let s = app
        .store
        .get_skill(&ws, &id)
        .await?
        .ok_or_else(|| skill_not_found(&id))?;
    Ok(axum::Json(skill_view(&s)))
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
    if !app.store.delete_skill(&ws, &id).await? {
        return Err(skill_not_found(&id));
    }
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
    if app.store.get_skill(&ws, &skill_id).await?.is_none() {
        return Err(skill_not_found(&skill_id));
    }
    let up = read_upload(&app, request, false).await?;
    let new = new_version(&skill_id, up.files)?;
    match app.store.insert_skill_version(&ws, &new).await {
        Ok(_) => Ok(axum::Json(version_view(&new.version))),
        Err(StoreError::NotFound) => Err(skill_not_found(&skill_id)),
        Err(e) => Err(e.into()),
    }
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
    if app.store.get_skill(&ws, &skill_id).await?.is_none() {
        return Err(skill_not_found(&skill_id));
    }
    let rows = app
        .store
        .list_skill_versions(&ws, &skill_id, &page.scan())
        .await?;
    let Page {
        data, next_page, ..
    } = page.finish(rows, |v| v.id.clone());
    Ok(axum::Json(SkillVersionPage {
        data: data.iter().map(version_view).collect(),
        next_page,
    }))
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
    let session = app
        .store
        .get_session(&ws, session_id)
        .await?
        .ok_or_else(|| ApiError::not_found(format!("session `{session_id}` not found")))?;
    let body: SessionBody = serde_json::from_str(&session.body)
        .map_err(|e| ApiError::internal(format!("session body: {e}")))?;
    if !names_skill(&body, skill_id) {
        return Err(ApiError::forbidden(format!(
            "this work token's session does not use skill `{skill_id}`"
        )));
    }
    Ok(ws)
}

/// Whether the session's agent (or an agent of its roster) names the skill.
fn names_skill(body: &SessionBody, skill_id: &str) -> bool {
    let listed = |skills: &[Skill]| skills.iter().any(|s| s.skill_id == skill_id);
    listed(&body.agent.skills)
        || body
            .agent
            .multiagent
            .as_ref()
            .is_some_and(|m| mentions(m, skill_id))
}

/// Whether a roster (full agent snapshots) holds a skill entry with this id.
fn mentions(v: &serde_json::Value, skill_id: &str) -> bool {
    match v {
        serde_json::Value::Object(o) => {
            o.get("skill_id").and_then(|s| s.as_str()) == Some(skill_id)
                || o.values().any(|v| mentions(v, skill_id))
        }
        serde_json::Value::Array(a) => a.iter().any(|v| mentions(v, skill_id)),
        _ => false,
    }
}

/// The version `version` (an id or `latest`) of a skill of `ws`.
async fn find_version(
    app: &AppState,
    ws: &str,
    skill_id: &str,
    version: &str,
) -> ApiResult<SkillVersionRecord> {
    let id = if version == LATEST {
        app.store
            .get_skill(ws, skill_id)
            .await?
            .ok_or_else(|| skill_not_found(skill_id))?
            .latest_version_id
    } else {
        version.to_string()
    };
    match app.store.get_skill_version(ws, skill_id, &id).await? {
        Some(v) => Ok(v),
        None if app.store.get_skill(ws, skill_id).await?.is_none() => {
            Err(skill_not_found(skill_id))
        }
        None => Err(version_not_found(skill_id, version)),
    }
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
    let v = find_version(&app, &ws, &skill_id, &version).await?;
    Ok(axum::Json(version_view(&v)))
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
    match app
        .store
        .delete_skill_version(&ws, &skill_id, &version, time::now())
        .await?
    {
        SkillVersionDelete::Deleted => Ok(axum::Json(DeletedSkillVersion {
            id: version,
            tag: SkillVersionDeletedTag::Tag,
        })),
        SkillVersionDelete::Last => Err(ApiError::invalid(format!(
            "`{version}` is the only version of skill `{skill_id}` and a skill keeps at least one; delete the skill instead"
        ))),
        SkillVersionDelete::NotFound if app.store.get_skill(&ws, &skill_id).await?.is_none() => {
            Err(skill_not_found(&skill_id))
        }
        SkillVersionDelete::NotFound => Err(version_not_found(&skill_id, &version)),
    }
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
    let v = find_version(&app, &ws, &skill_id, &version).await?;
    let files = app.store.skill_files(&v.id).await?;
    let zip = skill_bundle::to_zip(&v.name, &files);
    let disposition = HeaderValue::from_str(&format!("attachment; filename=\"{}.zip\"", v.name))
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

/// Refuses an agent's custom skills that are not in the workspace (or lack the pinned
/// version), at save time rather than when a session starts.
pub async fn check_agent_skills(app: &AppState, ws: &str, skills: &[Skill]) -> ApiResult<()> {
    for (i, s) in skills.iter().enumerate() {
        if mast_engine::skills::resolve(&*app.store, ws, s)
            .await?
            .is_none()
        {
            if s.kind == mast_domain::agent::SkillKind::Anthropic {
                return Err(mast_domain::skill::anthropic_not_installed(
                    &format!("skills[{i}]"),
                    &s.skill_id,
                )
                .into());
            }
            return Err(ApiError::invalid(format!(
                "`skills[{i}]`: {}",
                mast_engine::skills::missing(s)
            )));
        }
    }
    Ok(())
}
