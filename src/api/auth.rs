//! Authentication: API keys (`x-api-key` or `Authorization: Bearer`), stored hashed, each
//! bound to a workspace. With no key configured at all the server may run open (loopback).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::{FromRequestParts, Request, State};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

use super::AppState;
use super::error::ApiError;
use crate::store::Store;

/// The default workspace every store is created with.
pub const DEFAULT_WORKSPACE: &str = "wrkspc_default";

const CACHE_TTL: Duration = Duration::from_secs(30);
const OPEN_CHECK_TTL: Duration = Duration::from_secs(2);

/// The workspace a request acts in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Workspace {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Workspace>()
            .cloned()
            .ok_or_else(|| ApiError::unauthorized("authentication required"))
    }
}

/// Hex SHA-256 of a key: the only form in which keys are stored or cached.
pub fn hash_key(key: &str) -> String {
    Sha256::digest(key.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Key lookups with a short cache, and the open-mode decision.
pub struct Authenticator {
    allow_open: bool,
    keys: Mutex<HashMap<String, (String, Instant)>>,
    open: Mutex<Option<(bool, Instant)>>,
}

impl Authenticator {
    /// `allow_open`: accept requests into the default workspace while no key exists.
    pub fn new(allow_open: bool) -> Self {
        Authenticator {
            allow_open,
            keys: Mutex::new(HashMap::new()),
            open: Mutex::new(None),
        }
    }

    async fn is_open(&self, store: &dyn Store) -> Result<bool, ApiError> {
        if !self.allow_open {
            return Ok(false);
        }
        if let Some((open, at)) = *self.open.lock().expect("lock")
            && at.elapsed() < OPEN_CHECK_TTL
        {
            return Ok(open);
        }
        let open = store.count_api_keys().await? == 0;
        *self.open.lock().expect("lock") = Some((open, Instant::now()));
        Ok(open)
    }

    async fn workspace_for(
        &self,
        store: &dyn Store,
        key: &str,
    ) -> Result<Option<String>, ApiError> {
        let hash = hash_key(key);
        if let Some((ws, at)) = self.keys.lock().expect("lock").get(&hash)
            && at.elapsed() < CACHE_TTL
        {
            return Ok(Some(ws.clone()));
        }
        let ws = store.workspace_for_key(&hash).await?;
        if let Some(ws) = &ws {
            self.keys
                .lock()
                .expect("lock")
                .insert(hash, (ws.clone(), Instant::now()));
        }
        Ok(ws)
    }

    /// Resolves the workspace for a request's headers.
    pub async fn authenticate(
        &self,
        store: &dyn Store,
        headers: &HeaderMap,
    ) -> Result<Workspace, ApiError> {
        let key = presented_key(headers);
        if let Some(key) = &key
            && let Some(ws) = self.workspace_for(store, key).await?
        {
            if let Some(wanted) = headers
                .get("anthropic-workspace-id")
                .and_then(|v| v.to_str().ok())
                && wanted != ws
            {
                return Err(ApiError::forbidden(format!(
                    "this API key does not belong to workspace `{wanted}`"
                )));
            }
            return Ok(Workspace(ws));
        }
        if self.is_open(store).await? {
            return Ok(Workspace(DEFAULT_WORKSPACE.to_string()));
        }
        Err(match key {
            Some(_) => ApiError::unauthorized("invalid API key"),
            None => ApiError::unauthorized(
                "missing API key: send `x-api-key: <key>` or `Authorization: Bearer <key>`",
            ),
        })
    }
}

/// The key a request presents, if any.
pub fn presented_key(headers: &HeaderMap) -> Option<String> {
    if let Some(k) = headers.get("x-api-key").and_then(|v| v.to_str().ok()) {
        let k = k.trim();
        if !k.is_empty() {
            return Some(k.to_string());
        }
    }
    let auth = headers.get("authorization").and_then(|v| v.to_str().ok())?;
    let (scheme, token) = auth.trim().split_once(' ')?;
    (scheme.eq_ignore_ascii_case("bearer") && !token.trim().is_empty())
        .then(|| token.trim().to_string())
}

/// Middleware: authenticates and attaches the [`Workspace`].
pub async fn middleware(State(app): State<AppState>, mut req: Request, next: Next) -> Response {
    match app
        .auth
        .authenticate(app.store.as_ref(), req.headers())
        .await
    {
        Ok(ws) => {
            req.extensions_mut().insert(ws);
            next.run(req).await
        }
        Err(e) => e.into_response(),
    }
}
