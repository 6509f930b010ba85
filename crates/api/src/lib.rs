//! The HTTP layer: axum routers (one file per resource), extractors, errors, auth, pagination
//! and the SSE endpoint. Handlers translate HTTP into a call of the engine's front door — an
//! [`Engine`] operation, or one of the engine's services it holds (files, vaults, hooks,
//! webhooks) — and its typed result back into a response. This crate depends on the domain
//! and the engine only: it cannot reach the store or a model provider.

pub mod agents;
pub mod auth;
pub mod browser_guard;
pub mod console;
pub mod deployments;
pub mod docs;
pub mod edge;
pub mod environment_keys;
pub mod environments;
pub mod error;
pub mod events;
pub mod extract;
pub mod files;
pub mod fork;
pub mod key_watch;
pub mod memories;
pub mod memory_access;
pub mod memory_stores;
pub mod models;
pub mod openapi;
pub mod ops;
pub mod page_headers;
pub mod pagination;
pub mod request_id;
pub mod resources;
pub mod sessions;
pub mod skills;
pub mod stream;
pub mod threads;
pub mod unread_body;
pub mod vaults;
// Hooks: Mast's own addition, under `/v1/mast/`.
pub mod hooks;
pub mod webhooks;
pub mod work;

use std::ops::Deref;
use std::sync::Arc;

use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::http::header;
use axum::middleware;
use axum::response::IntoResponse;
use axum::routing::get;
use tokio_util::sync::CancellationToken;

use mast_engine::Engine;

/// Largest request body accepted (upstream answers 413 beyond 32 MB).
pub const BODY_LIMIT: usize = 32 * 1024 * 1024;

/// What every handler shares.
pub struct Shared {
    pub auth: auth::Authenticator,
    pub engine: Engine,
    /// The Files API's storage.
    pub files: Arc<mast_engine::files::Files>,
    /// Lease lengths of self-hosted work items.
    pub work_leases: mast_engine::work::LeaseTerms,
    /// Vault credentials: sealing, OAuth refresh, validation.
    pub vaults: Arc<mast_engine::vaults::Vaults>,
    /// Cancelled on graceful shutdown; ends open streams.
    pub shutdown: CancellationToken,
    /// Hooks: creation seals their signing secrets.
    pub hooks: Arc<mast_engine::hooks::Hooks>,
    /// Webhook endpoints and their deliveries.
    pub webhooks: Arc<mast_engine::webhooks::Webhooks>,
}

/// Cheap-to-clone handle to [`Shared`], the router's state.
#[derive(Clone)]
pub struct AppState(pub Arc<Shared>);

impl Deref for AppState {
    type Target = Shared;
    fn deref(&self) -> &Shared {
        &self.0
    }
}

async fn openapi_json() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "application/json")],
        openapi::document(),
    )
}

pub(crate) async fn no_route(method: axum::http::Method, uri: axum::http::Uri) -> error::ApiError {
    error::ApiError::not_found(format!(
        "no such route: `{method} {}` (the API's routes are listed at /docs)",
        uri.path()
    ))
}

/// Refuses NUL characters in the path or query the same way on every store.
async fn reject_nul(
    req: axum::extract::Request,
    next: middleware::Next,
) -> axum::response::Response {
    let uri = req.uri().to_string();
    if uri.contains("%00") || uri.contains('\0') {
        return error::ApiError::invalid("the request URL must not contain NUL characters")
            .into_response();
    }
    next.run(req).await
}

/// The whole HTTP application.
pub fn router(state: AppState) -> Router {
    let api = Router::new()
        .merge(agents::router())
        .merge(environments::router())
        .merge(sessions::router())
        .merge(events::router())
        .merge(stream::router())
        .merge(threads::router())
        .merge(resources::router())
        .merge(models::router())
        .merge(work::router())
        .merge(environment_keys::router())
        .merge(vaults::router())
        .merge(files::router())
        .merge(memory_stores::router())
        .merge(memories::router())
        .merge(skills::router())
        // Hooks: Mast's own addition.
        .merge(hooks::router())
        // Mast's own additions beyond the upstream API.
        .merge(fork::router())
        .merge(webhooks::router())
        .merge(deployments::router())
        .route_layer(middleware::from_fn_with_state(
            state.clone(),
            auth::middleware,
        ));
    let routes = Router::new()
        .merge(api)
        .merge(docs::router())
        // Web console (static files; data comes through the authenticated API).
        .merge(console::router())
        .route("/openapi.json", get(openapi_json))
        .route("/healthz", get(ops::healthz))
        .route("/readyz", get(ops::readyz))
        .route("/metrics", get(ops::metrics))
        .fallback(no_route)
        .route_layer(middleware::from_fn(ops::track))
        .with_state(state.clone());
    // The layers every request passes go around the routes once: `Router::layer` wraps each
    // route's endpoint, and a route's stack is cloned for every request it serves.
    let layered = tower::ServiceBuilder::new()
        .layer(middleware::from_fn(request_id::middleware))
        .layer(middleware::from_fn(unread_body::middleware))
        .layer(middleware::from_fn(reject_nul))
        .layer(middleware::from_fn_with_state(
            state,
            browser_guard::allowed_hosts,
        ))
        .layer(DefaultBodyLimit::max(BODY_LIMIT))
        .service(routes);
    Router::new().fallback_service(layered)
}
