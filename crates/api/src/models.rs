//! `/v1/models`: the models the configured providers serve, paged with
//! `after_id` / `before_id` like the upstream catalog.

use axum::Router;
use axum::extract::{Path, State};
use axum::routing::get;
use serde::Serialize;
use utoipa::ToSchema;

use super::AppState;
use super::auth::Workspace;
use super::error::{ApiError, ApiResult};
use super::extract::QueryParams;
use mast_domain::type_tag;
use mast_engine::ops::CatalogEntry;

type_tag!(
    /// `"type": "model"`.
    ModelTag = "model"
);

/// A model as `client.models.list()` returns it.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelInfo {
    #[serde(rename = "type")]
    pub tag: ModelTag,
    pub id: String,
    pub display_name: String,
    /// Release dates are not known for configured models: the epoch, as upstream allows.
    pub created_at: String,
    #[schema(example = "active")]
    pub lifecycle: String,
}

/// A page of the catalog.
#[derive(Debug, Serialize, ToSchema)]
pub struct ModelPage {
    pub data: Vec<ModelInfo>,
    pub has_more: bool,
    pub first_id: Option<String>,
    pub last_id: Option<String>,
}

/// Routes of this resource.
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/models", get(list))
        // Ids of configured providers may contain slashes (`ollama/llama3.2`).
        .route("/v1/models/{*model_id}", get(retrieve))
}

fn info(e: &CatalogEntry) -> ModelInfo {
    ModelInfo {
        tag: ModelTag::Tag,
        id: e.id.clone(),
        display_name: e.display_name.clone(),
        created_at: "1970-01-01T00:00:00Z".into(),
        lifecycle: "active".into(),
    }
}

/// List models.
///
/// Lists the models this server can route to: Claude models (when an Anthropic key is configured), configured OpenAI-compatible providers' models and the built-in scripted model.
#[utoipa::path(get, path = "/v1/models", tag = "models", operation_id = "models_list",
    params(("limit" = Option<i64>, Query), ("after_id" = Option<String>, Query), ("before_id" = Option<String>, Query)),
    responses((status = 200, body = ModelPage), (status = 400, body = super::openapi::ErrorBody)))]
async fn list(
    State(app): State<AppState>,
    _ws: Workspace,
    q: QueryParams,
) -> ApiResult<axum::Json<ModelPage>> {
    let limit = q.limit(20, 1000)? as usize;
    let catalog = app.engine.model_catalog().await;
    let position = |key: &str| -> ApiResult<usize> {
        let id = q.get(key).unwrap_or_default();
        catalog
            .iter()
            .position(|e| e.id == id)
            .ok_or_else(|| ApiError::invalid(format!("`{key}` `{id}` is not a model in this list")))
    };
    let (window, has_more) = match (q.get("after_id"), q.get("before_id")) {
        (Some(_), Some(_)) => {
            return Err(ApiError::invalid(
                "send `after_id` or `before_id`, not both",
            ));
        }
        (Some(_), None) => {
            let rest = &catalog[position("after_id")? + 1..];
            (&rest[..rest.len().min(limit)], rest.len() > limit)
        }
        (None, Some(_)) => {
            let before = &catalog[..position("before_id")?];
            let start = before.len().saturating_sub(limit);
            (&before[start..], start > 0)
        }
        (None, None) => (&catalog[..catalog.len().min(limit)], catalog.len() > limit),
    };
    Ok(axum::Json(ModelPage {
        first_id: window.first().map(|e| e.id.clone()),
        last_id: window.last().map(|e| e.id.clone()),
        data: window.iter().map(info).collect(),
        has_more,
    }))
}

/// Retrieve a model.
///
/// Returns one model this server can route to.
#[utoipa::path(get, path = "/v1/models/{model_id}", tag = "models", operation_id = "models_retrieve", params(("model_id" = String, Path)),
    responses((status = 200, body = ModelInfo), (status = 404, body = super::openapi::ErrorBody)))]
async fn retrieve(
    State(app): State<AppState>,
    _ws: Workspace,
    Path(id): Path<String>,
) -> ApiResult<axum::Json<ModelInfo>> {
    Ok(axum::Json(info(&app.engine.model(&id).await?)))
}
