//! Hooks (Mast's own addition): creating and deleting them (the signing secret is
//! sealed with the server's key and shown once), finding the ones that apply, and asking
//! them (see [`ask`]).
//!
//! A call is a Standard Webhooks-signed JSON POST (see [`crate::standard_webhooks`]) made
//! while no store transaction or lock is held. An endpoint that times out, errs or answers
//! something unreadable gets its hook's failure mode, and the verdict says why.
//!
//! The workspace's hooks of each event are cached in memory, so a session without hooks
//! pays no store read where a hook could be asked. The cache is dropped whenever hooks may
//! have changed: at once for changes made through this process, and on Postgres when the
//! store announces a change made by another replica (a `LISTEN/NOTIFY` signal sent in the
//! changing transaction); while those announcements cannot be heard nothing is cached. On
//! SQLite this process is the store's only writer (the data directory is locked).

mod ask;

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

pub use ask::{PostOutcome, PreOutcome, ToolCallRef};

use crate::hub::Hub;
use crate::ops::OpError;
use crate::secrets::Cipher;
use crate::standard_webhooks::{SignedPoster, SigningSecret};
use mast_domain::hook::{Hook, HookCreate, HookEvent, Matcher, sees_name};
use mast_domain::ids::new_id;
use mast_domain::invalid::Invalid;
use mast_domain::query::Scan;
use mast_domain::time;
use mast_sandbox::netguard::NetGuard;
use mast_store::{HookRecord, Store, StoreResult};

/// A hook of the config file: a `[[hooks]]` table with the fields of `POST /v1/mast/hooks`
/// plus the `signing_secret` (`whsec_…`) its endpoint verifies (read by the binary's config).
#[derive(Debug, Clone)]
pub struct ConfiguredHook {
    /// The hook, with id `hook_config_<n>` (its place in the file, from 1).
    pub hook: Hook,
    pub secret: SigningSecret,
}

/// Largest hook answer read (an `updated_input` or `updated_result` can be large).
const ANSWER_LIMIT: usize = 256 * 1024;

/// Most workspaces with cached lists; past it the cache starts over.
const CACHE_WORKSPACES: usize = 10_000;

/// How long a cached list is trusted at most: a backstop for a change signal lost on a
/// connection that died without saying so.
const CACHE_TTL: Duration = Duration::from_secs(30);

/// The hooks service: the store, the key that seals signing secrets, the signed client, and
/// the cache of each workspace's hooks.
pub struct Hooks {
    store: Arc<dyn Store>,
    cipher: Result<Cipher, String>,
    poster: SignedPoster,
    /// The config file's hooks, asked in every workspace before the workspace's own.
    configured: Vec<(ConfiguredHook, Option<Matcher>)>,
    /// Where other replicas' hook changes are announced (Postgres); None when this process
    /// is the store's only writer (SQLite).
    changes: Option<Arc<Hub>>,
    /// Bumped after every change made through this process.
    local_epoch: AtomicU64,
    /// Whether hook lists are cached at all.
    caching: bool,
    cache: RwLock<HookCache>,
}

/// A stored hook as the cache keeps it: the record, and its matcher compiled once.
struct Listed {
    rec: HookRecord,
    matcher: Option<Matcher>,
}

/// Whether `hook` (with its compiled `matcher`) applies in `ctx` and sees `name`.
fn sees(hook: &Hook, matcher: Option<&Matcher>, ctx: &HookContext<'_>, name: Option<&str>) -> bool {
    hook.in_scope(ctx.scope_agent_id, ctx.environment_id) && sees_name(matcher, name)
}

/// The stored hooks of one (workspace, event), when they were read.
type Entry = (Instant, Arc<Vec<Listed>>);

/// Cached hook lists, all read in one epoch (see [`Hooks::epoch`]), by workspace and event.
#[derive(Default)]
struct HookCache {
    epoch: (u64, u64),
    lists: HashMap<String, HashMap<HookEvent, Entry>>,
}

/// Where a hook is asked: the session, thread and agent it concerns. Scopes match on the
/// agent and environment.
#[derive(Debug, Clone, Copy)]
pub struct HookContext<'a> {
    pub workspace_id: &'a str,
    pub session_id: &'a str,
    pub thread_id: &'a str,
    /// The agent the thread runs (what the hook is told).
    pub agent_id: &'a str,
    /// The agent whose agent-scoped hooks apply: the thread's own, or for an agent the model
    /// defined (an inline delegate, the advisor) the coordinator that defined it (see
    /// [`crate::delegation::governing_agent`]).
    pub scope_agent_id: &'a str,
    pub environment_id: &'a str,
}

impl HookContext<'_> {
    /// The signed body for `hook`: what every event carries, then the event's own `fields`.
    fn payload(&self, hook: &Hook, fields: Value) -> Value {
        let mut p = json!({
            "type": "hook_event",
            "hook_id": hook.id,
            "event": hook.event.as_str(),
            "session_id": self.session_id,
            "thread_id": self.thread_id,
            "agent_id": self.agent_id,
            "environment_id": self.environment_id,
        });
        if let (Some(p), Value::Object(fields)) = (p.as_object_mut(), fields) {
            p.extend(fields);
        }
        p
    }
}

/// A hook to ask, with its signing secret (or why it cannot be opened).
type Asked = (Hook, Result<SigningSecret, String>);

impl Hooks {
    /// The service over `store`, sealing with `cipher` (or refusing to create hooks, saying
    /// why, when the server has no key); calls go through `guard`.
    pub fn new(store: Arc<dyn Store>, cipher: Result<Cipher, String>, guard: NetGuard) -> Self {
        Hooks {
            store,
            cipher,
            poster: SignedPoster::new(guard),
            configured: Vec::new(),
            changes: None,
            local_epoch: AtomicU64::new(0),
            caching: true,
            cache: RwLock::new(HookCache::default()),
        }
    }

    /// Adds the config file's hooks.
    pub fn with_configured(mut self, configured: Vec<ConfiguredHook>) -> Self {
        self.configured = configured
            .into_iter()
            .map(|c| {
                let m = c.hook.compiled_matcher();
                (c, m)
            })
            .collect();
        self
    }

    /// Caches only while `hub` hears every hook change other replicas make (Postgres).
    pub fn with_changes(mut self, hub: Arc<Hub>) -> Self {
        self.changes = Some(hub);
        self
    }

    /// Reads the store for every hook lookup, caching no list (`MAST_CACHES=off`).
    pub fn without_cache(mut self) -> Self {
        self.caching = false;
        self
    }

    /// Validates and stores a new hook; the response (only this one) carries its secret.
    pub async fn create(&self, workspace_id: &str, body: HookCreate) -> Result<Hook, OpError> {
        let mut hook = body.validate()?;
        self.poster
            .check_url(&hook.url)
            .map_err(|why| Invalid::new(format!("`url`: {why}")))?;
        let cipher = self.cipher.as_ref().map_err(|why| {
            Invalid::with_code(
                "secret_key_unavailable",
                format!(
                    "this server has no key to encrypt hook signing secrets with ({why}); \
                     its operator sets MAST_SECRET_KEY or MAST_SECRET_KEY_FILE"
                ),
            )
        })?;
        let now = self.store.clock().now();
        hook.id = new_id("hook");
        hook.created_at = time::format(now);
        let secret = SigningSecret::generate().expose();
        let rec = HookRecord {
            hook: hook.clone(),
            sealed_secret: cipher.seal(secret.as_bytes(), &hook.id),
        };
        let stored = self.store.insert_hook(workspace_id, &rec, now).await;
        self.local_epoch.fetch_add(1, Ordering::SeqCst);
        stored?;
        hook.signing_secret = Some(secret);
        Ok(hook)
    }

    /// Deletes a hook of the workspace.
    pub async fn delete(&self, workspace_id: &str, id: &str) -> Result<(), OpError> {
        let deleted = self.store.delete_hook(workspace_id, id).await;
        self.local_epoch.fetch_add(1, Ordering::SeqCst);
        if !deleted? {
            return Err(OpError::HookNotFound(id.to_string()));
        }
        Ok(())
    }

    /// One hook of the workspace, without its signing secret.
    pub async fn get(&self, workspace_id: &str, id: &str) -> Result<Hook, OpError> {
        self.store
            .get_hook(workspace_id, id)
            .await?
            .map(|r| r.hook)
            .ok_or_else(|| OpError::HookNotFound(id.to_string()))
    }

    /// A page of the workspace's hooks.
    pub async fn list(
        &self,
        workspace_id: &str,
        scan: &Scan<String>,
    ) -> Result<Vec<Hook>, OpError> {
        Ok(self.store.list_hooks(workspace_id, scan).await?)
    }

    /// Whether the workspace has any hook of `event` at all (whatever its scope or matcher).
    pub async fn any(&self, workspace_id: &str, event: HookEvent) -> StoreResult<bool> {
        Ok(self.configured.iter().any(|(c, _)| c.hook.event == event)
            || !self.stored(workspace_id, event).await?.is_empty())
    }

    /// The hooks of `event` that apply in `ctx` and see `name`, with their secrets: the
    /// config file's first, then the workspace's oldest first.
    async fn applying(
        &self,
        ctx: &HookContext<'_>,
        event: HookEvent,
        name: Option<&str>,
    ) -> StoreResult<Vec<Asked>> {
        let stored = self.stored(ctx.workspace_id, event).await?;
        let configured = self
            .configured
            .iter()
            .filter(|(c, m)| c.hook.event == event && sees(&c.hook, m.as_ref(), ctx, name))
            .map(|(c, _)| (c.hook.clone(), Ok(c.secret.clone())));
        // Secrets are opened only for the hooks that will be asked.
        let stored = stored
            .iter()
            .filter(|l| sees(&l.rec.hook, l.matcher.as_ref(), ctx, name))
            .map(|l| (l.rec.hook.clone(), self.secret_of(&l.rec)));
        Ok(configured.chain(stored).collect())
    }

    /// The epoch hook lists are cached in: this process's changes, and (Postgres) the
    /// announced ones; None while announcements cannot be heard (nothing may be cached).
    fn epoch(&self) -> Option<(u64, u64)> {
        if !self.caching {
            return None;
        }
        let local = self.local_epoch.load(Ordering::SeqCst);
        match &self.changes {
            None => Some((local, 0)),
            Some(hub) => hub.hooks_epoch().map(|remote| (local, remote)),
        }
    }

    /// The workspace's stored hooks of `event`, oldest first, from the cache when it holds
    /// them for the current epoch (and not for longer than [`CACHE_TTL`]).
    async fn stored(&self, ws: &str, event: HookEvent) -> StoreResult<Arc<Vec<Listed>>> {
        // Read before the lookup: a change announced while it runs makes its answer stale.
        let epoch = self.epoch();
        if let Some(e) = epoch {
            let cache = self.cache.read().expect("hook cache");
            if cache.epoch == e
                && let Some((at, list)) = cache.lists.get(ws).and_then(|l| l.get(&event))
                && at.elapsed() < CACHE_TTL
            {
                return Ok(list.clone());
            }
        }
        metrics::counter!(crate::telemetry::HOOK_LIST_READS).increment(1);
        let read_at = Instant::now();
        let list: Vec<Listed> = self
            .store
            .hooks_for_event(ws, event.as_str())
            .await?
            .into_iter()
            .map(|rec| {
                let matcher = rec.hook.compiled_matcher();
                Listed { rec, matcher }
            })
            .collect();
        let list = Arc::new(list);
        if let Some(e) = epoch
            && self.epoch() == Some(e)
        {
            let mut cache = self.cache.write().expect("hook cache");
            if cache.epoch != e || cache.lists.len() >= CACHE_WORKSPACES {
                cache.lists.clear();
                cache.epoch = e;
            }
            cache
                .lists
                .entry(ws.to_string())
                .or_default()
                .insert(event, (read_at, list.clone()));
        }
        Ok(list)
    }

    /// A stored hook's signing secret, opened with the server's key.
    fn secret_of(&self, rec: &HookRecord) -> Result<SigningSecret, String> {
        let cipher = self
            .cipher
            .as_ref()
            .map_err(|why| format!("no key: {why}"))?;
        cipher
            .open(&rec.sealed_secret, &rec.hook.id)
            .map_err(|e| format!("its secret could not be opened: {e}"))
            .and_then(|plain| {
                SigningSecret::parse(&String::from_utf8_lossy(&plain))
                    .map_err(|_| "its secret is damaged".to_string())
            })
    }

    /// POSTs `payload` signed with the hook's secret; the 2xx answer's body, or why not.
    async fn call(&self, asked: &Asked, payload: &Value) -> Result<String, String> {
        let (hook, secret) = asked;
        let secret = secret.clone()?;
        let body = serde_json::to_vec(payload).map_err(|e| e.to_string())?;
        let msg_id = new_id("msg");
        let answer = self
            .poster
            .post_reading(
                &hook.url,
                &msg_id,
                &body,
                &[secret],
                Duration::from_millis(hook.timeout_ms),
                ANSWER_LIMIT,
            )
            .await
            .map_err(|u| u.message)?;
        if !(200..300).contains(&answer.status) {
            return Err(format!("it answered HTTP {}", answer.status));
        }
        Ok(answer.body)
    }
}
