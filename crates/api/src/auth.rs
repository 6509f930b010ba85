//! Authentication: API keys (`x-api-key` or `Authorization: Bearer`), stored hashed, each
//! bound to a workspace. With no key configured at all the server may run open (loopback).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::extract::{FromRequestParts, Request, State};
use axum::http::HeaderMap;
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::AppState;
use super::error::ApiError;
use mast_domain::work::WorkState;
use mast_engine::Engine;
use mast_engine::hub::Hub;
use mast_engine::keys::Keys;

pub use mast_domain::keys::{
    DEFAULT_WORKSPACE, ENVIRONMENT_KEY_PREFIX, WORK_TOKEN_PREFIX, hash_key,
};

/// How long a cached key lookup stands when no change is announced: a safety net for an
/// announcement lost without the listener noticing (a half-open connection).
const CACHE_TTL: Duration = Duration::from_secs(10);

/// Who a request comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    /// An API key (or open mode): the whole workspace.
    ApiKey {
        workspace: String,
        /// Hash of the key (to check later that it still stands); None in open mode.
        key_hash: Option<String>,
    },
    /// An environment key: polls its environment's queue and serves its sessions.
    EnvironmentKey {
        workspace: String,
        environment_id: String,
        /// Hash of the key (to check later that it still stands).
        key_hash: String,
    },
    /// A polled work item's sessions token: that item and its one session, while it lives.
    WorkToken {
        workspace: String,
        environment_id: String,
        work_id: String,
        session_id: String,
        /// The item's state when the request arrived.
        state: WorkState,
        /// Hash of the token (to check later that it still stands).
        token_hash: String,
    },
}

impl Principal {
    /// The workspace the credential belongs to.
    pub fn workspace(&self) -> &str {
        match self {
            Principal::ApiKey { workspace, .. }
            | Principal::EnvironmentKey { workspace, .. }
            | Principal::WorkToken { workspace, .. } => workspace,
        }
    }
}

impl<S: Send + Sync> FromRequestParts<S> for Principal {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        parts
            .extensions
            .get::<Principal>()
            .cloned()
            .ok_or_else(|| ApiError::unauthorized("authentication required"))
    }
}

/// The workspace a request acts in, for endpoints only API keys may call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace(pub String);

impl<S: Send + Sync> FromRequestParts<S> for Workspace {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        Workspace::of(&Principal::from_request_parts(parts, state).await?)
    }
}

impl Workspace {
    /// The workspace of an API key; worker credentials are refused.
    pub fn of(principal: &Principal) -> Result<Self, ApiError> {
        match principal {
            Principal::ApiKey { workspace, .. } => Ok(Workspace(workspace.clone())),
            _ => Err(ApiError::forbidden(
                "worker credentials (environment keys and work tokens) are accepted only on the work queue, \
                 on their sessions' retrieve and events endpoints, and (work tokens) on the files their session mounts; \
                 use an API key",
            )),
        }
    }
}

/// The workspace in which `principal` may use session `session_id`'s retrieve and events
/// endpoints: any session for an API key, its environment's sessions for an environment key,
/// the one session of a held work item for its token.
pub async fn session_workspace(
    engine: &Engine,
    principal: &Principal,
    session_id: &str,
) -> Result<String, ApiError> {
    match principal {
        Principal::ApiKey { workspace, .. } => Ok(workspace.clone()),
        Principal::WorkToken {
            workspace,
            session_id: scoped,
            state,
            ..
        } => {
            if scoped != session_id {
                return Err(ApiError::forbidden(
                    "this work token is scoped to another session",
                ));
            }
            match state {
                WorkState::Queued => Err(ApiError::forbidden(
                    "this work token's item is back in the queue: its lease was lost",
                )),
                WorkState::Stopped => {
                    Err(ApiError::unauthorized("this work token's item has stopped"))
                }
                _ => Ok(workspace.clone()),
            }
        }
        Principal::EnvironmentKey {
            workspace,
            environment_id,
            ..
        } => match engine.session_environment(workspace, session_id).await? {
            Some(env) if &env == environment_id => Ok(workspace.clone()),
            _ => Err(ApiError::not_found(format!(
                "session `{session_id}` not found in this environment"
            ))),
        },
    }
}

/// Whether a credential still stands (a long-lived stream re-checks its caller's): an API or
/// environment key not revoked, open mode while no key exists, a work token whose item is
/// still held.
pub async fn still_valid(keys: &Keys, principal: &Principal) -> Result<bool, ApiError> {
    Ok(match principal {
        Principal::ApiKey {
            key_hash: Some(hash),
            ..
        } => keys.workspace_for_key(hash).await?.is_some(),
        Principal::ApiKey { key_hash: None, .. } => keys.count_api_keys().await? == 0,
        Principal::EnvironmentKey { key_hash, .. } => {
            keys.environment_for_key(key_hash).await?.is_some()
        }
        Principal::WorkToken { token_hash, .. } => keys
            .work_for_token(token_hash)
            .await?
            .is_some_and(|w| !matches!(w.state(), WorkState::Queued | WorkState::Stopped)),
    })
}

/// Key lookups, and the open-mode decision.
///
/// A key created or revoked by another process (the CLI writing the store) must count on the
/// very next request, so nothing is trusted from memory that could have changed unseen:
/// - Open mode is decided by counting keys on each keyless request while no key exists; once
///   one does, it is closed for good (keys are revoked, never deleted, so the count never
///   falls back to zero). It is not cached by key epoch even where key changes are heard:
///   a replica hears of a key another process created only when the notification arrives,
///   and until then it would still serve requests without a key.
/// - API key lookups are cached only where every change is announced: on Postgres the store
///   signals each key change to every replica in the changing transaction, and a replica
///   caches only while its signal listener is connected (dropping the cache whenever it
///   connects or loses the connection, when it may have missed one). A revocation by another
///   process therefore counts on a replica once its notification arrives (normally well
///   under a millisecond after the commit), not before. On SQLite there is no
///   such channel to the CLI, and the lookup is a local indexed read, so there is no cache.
pub struct Authenticator {
    allow_open: bool,
    /// Which hosts requests may name (open mode's browser rules, `MAST_ALLOWED_HOSTS`).
    hosts: super::browser_guard::HostRules,
    /// Set once a key exists: open mode never comes back.
    closed: AtomicBool,
    /// Where key changes are announced (Postgres); no caching without it.
    changes: Option<Arc<Hub>>,
    keys: Mutex<KeyCache>,
    /// The keys that stand, for open streams (see [`super::key_watch`]).
    watch: super::key_watch::KeyWatch,
}

/// Cached positive lookups, all from one key epoch (see [`Hub::keys_changed`]).
#[derive(Default)]
struct KeyCache {
    epoch: u64,
    workspaces: HashMap<String, (String, Instant)>,
}

impl Authenticator {
    /// `allow_open`: accept requests into the default workspace while no key exists.
    /// `changes`: the hub hearing every key change (replicas on Postgres), which makes caching
    /// lookups safe; None looks every key up. `hosts`: which hosts requests may name.
    pub fn new(
        allow_open: bool,
        changes: Option<Arc<Hub>>,
        hosts: super::browser_guard::HostRules,
    ) -> Self {
        Authenticator {
            allow_open,
            hosts,
            closed: AtomicBool::new(false),
            changes,
            keys: Mutex::new(KeyCache::default()),
            watch: Default::default(),
        }
    }

    /// The keys that stand, as open streams follow them.
    pub fn key_watch(&self) -> &super::key_watch::KeyWatch {
        &self.watch
    }

    /// Which hosts requests may name.
    pub fn host_rules(&self) -> &super::browser_guard::HostRules {
        &self.hosts
    }

    async fn is_open(&self, keys: &Keys) -> Result<bool, ApiError> {
        if !self.allow_open || self.closed.load(Ordering::Relaxed) {
            return Ok(false);
        }
        let open = keys.count_api_keys().await? == 0;
        if !open && !self.closed.swap(true, Ordering::Relaxed) {
            tracing::info!("an API key exists now: requests without one are refused from here on");
        }
        Ok(open)
    }

    /// The workspace of the API key whose hash is `hash`, if it stands.
    async fn workspace_for(&self, keys: &Keys, hash: &str) -> Result<Option<String>, ApiError> {
        // Read before the lookup: a change announced while it runs makes its answer stale.
        let Some((hub, epoch)) = self
            .changes
            .as_ref()
            .and_then(|hub| Some((hub, hub.keys_epoch()?)))
        else {
            return Ok(keys.workspace_for_key(hash).await?);
        };
        {
            let mut cache = self.keys.lock().expect("lock");
            // Epochs only move forward: a request that read an older one is itself stale.
            if epoch > cache.epoch {
                cache.workspaces.clear();
                cache.epoch = epoch;
            }
            if cache.epoch == epoch
                && let Some((ws, at)) = cache.workspaces.get(hash)
                && at.elapsed() < CACHE_TTL
            {
                return Ok(Some(ws.clone()));
            }
        }
        let ws = keys.workspace_for_key(hash).await?;
        if let Some(ws) = &ws {
            let mut cache = self.keys.lock().expect("lock");
            if cache.epoch == epoch && hub.keys_epoch() == Some(epoch) {
                cache
                    .workspaces
                    .insert(hash.to_string(), (ws.clone(), Instant::now()));
            }
        }
        Ok(ws)
    }

    /// Resolves who a request comes from.
    pub async fn authenticate(
        &self,
        keys: &Keys,
        headers: &HeaderMap,
    ) -> Result<Principal, ApiError> {
        let key = presented_key(headers);
        let principal = match &key {
            // Worker credentials are never mistaken for API keys, even in open mode: a
            // stopped item's token must not turn into workspace access.
            Some(k) if k.starts_with(ENVIRONMENT_KEY_PREFIX) => {
                let key_hash = hash_key(k);
                match keys.environment_for_key(&key_hash).await? {
                    Some((workspace, environment_id)) => Principal::EnvironmentKey {
                        workspace,
                        environment_id,
                        key_hash,
                    },
                    None => return Err(ApiError::unauthorized("invalid environment key")),
                }
            }
            Some(k) if k.starts_with(WORK_TOKEN_PREFIX) => {
                let token_hash = hash_key(k);
                match keys.work_for_token(&token_hash).await? {
                    Some(w) => Principal::WorkToken {
                        state: w.state(),
                        token_hash,
                        workspace: w.workspace_id,
                        environment_id: w.environment_id,
                        work_id: w.id,
                        session_id: w.session_id,
                    },
                    None => {
                        return Err(ApiError::unauthorized(
                            "invalid work token: unknown, or replaced by a later poll of its item",
                        ));
                    }
                }
            }
            Some(k) => {
                let hash = hash_key(k);
                match self.workspace_for(keys, &hash).await? {
                    Some(workspace) => Principal::ApiKey {
                        workspace,
                        key_hash: Some(hash),
                    },
                    None => self.open_or(keys, headers, "invalid API key").await?,
                }
            }
            None => {
                self.open_or(
                    keys,
                    headers,
                    "missing API key: send `x-api-key: <key>` or `Authorization: Bearer <key>`",
                )
                .await?
            }
        };
        if let Some(wanted) = headers
            .get("anthropic-workspace-id")
            .and_then(|v| v.to_str().ok())
            && wanted != principal.workspace()
            // Open mode (no stored key behind it) serves whichever workspace is asked for.
            && !matches!(principal, Principal::ApiKey { key_hash: None, .. })
        {
            return Err(ApiError::forbidden(format!(
                "this credential does not belong to workspace `{wanted}`"
            )));
        }
        Ok(principal)
    }

    /// The open-mode principal while the server is open and the request is not one a web page
    /// on another site made (see [`super::browser_guard`]); else `refusal`.
    async fn open_or(
        &self,
        keys: &Keys,
        headers: &HeaderMap,
        refusal: &str,
    ) -> Result<Principal, ApiError> {
        if self.is_open(keys).await? {
            if let Some(refused) = super::browser_guard::open_mode_refusal(&self.hosts, headers) {
                return Err(refused);
            }
            return Ok(Principal::ApiKey {
                workspace: DEFAULT_WORKSPACE.to_string(),
                key_hash: None,
            });
        }
        Err(ApiError::unauthorized(refusal))
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

/// Middleware: authenticates and attaches the [`Principal`].
pub async fn middleware(State(app): State<AppState>, mut req: Request, next: Next) -> Response {
    match app
        .auth
        .authenticate(&app.engine.keys(), req.headers())
        .await
    {
        Ok(p) => {
            req.extensions_mut().insert(p);
            next.run(req).await
        }
        Err(e) => e.into_response(),
    }
}
