//! Vault credentials in use: sealing and opening their secrets, creating and updating them,
//! refreshing OAuth tokens, probing a credential (`mcp_oauth_validate`) and handing the MCP
//! connector its bearer tokens ([`bearers`]).
//!
//! Secrets are sealed here, before the store sees them, and opened here, only to be sent to
//! the credential's own MCP server or token endpoint. Nothing is cached beyond one call: an
//! archived or deleted vault or credential takes effect on a session's next MCP request.

mod bearers;
mod crud;
mod oauth;
mod outbound;
mod probe;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::ops::OpError;
use crate::secrets::Cipher;
use mast_domain::credential::{
    Credential, CredentialCreate, CredentialSpec, CredentialTag, CredentialUpdate, Secrets,
    normalize_url,
};
use mast_domain::ids::new_id;
use mast_domain::time::{self, Micros};
use mast_domain::vault;
use mast_sandbox::netguard::NetGuard;
use mast_store::{CredentialRecord, Store, StoreError};

pub use bearers::VaultBearers;

/// The vault operations that touch secrets; cheap to share behind an `Arc`.
pub struct Vaults {
    store: Arc<dyn Store>,
    /// The key, or why there is none (credentials are then refused, never stored in clear).
    cipher: Result<Cipher, String>,
    http: outbound::Outbound,
    /// One refresh at a time per credential (in this process; across replicas the store's
    /// compare-and-set keeps the first refresh and the others reread it).
    refreshing: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
}

impl Vaults {
    /// The service over `store`, sealing with `cipher`; outbound requests (token endpoints,
    /// MCP probes) pass the same address guard as the built-in tools.
    pub fn new(store: Arc<dyn Store>, cipher: Cipher, guard: NetGuard) -> Self {
        Self::with_key(store, Ok(cipher), guard)
    }

    /// The service when no key could be had (`why`): vaults work, credentials are refused.
    pub fn without_key(store: Arc<dyn Store>, why: String, guard: NetGuard) -> Self {
        Self::with_key(store, Err(why), guard)
    }

    fn with_key(store: Arc<dyn Store>, cipher: Result<Cipher, String>, guard: NetGuard) -> Self {
        Vaults {
            store,
            cipher,
            http: outbound::Outbound::new(guard),
            refreshing: Mutex::new(HashMap::new()),
        }
    }

    /// The server's secret key, for other secrets the engine keeps (repository tokens), or
    /// why there is none.
    pub fn secret_cipher(&self) -> Result<Cipher, String> {
        self.cipher.clone()
    }

    fn cipher(&self) -> Result<&Cipher, OpError> {
        self.cipher.as_ref().map_err(|why| {
            mast_domain::invalid::Invalid::with_code(
                "secret_key_unavailable",
                format!(
                    "this server has no key to encrypt vault credentials with ({why}); \
                     its operator sets MAST_SECRET_KEY or MAST_SECRET_KEY_FILE"
                ),
            )
            .into()
        })
    }

    fn seal(&self, secrets: &Secrets, credential_id: &str) -> Result<Vec<u8>, OpError> {
        let plain = serde_json::to_vec(secrets).map_err(|e| OpError::Store(e.into()))?;
        Ok(self.cipher()?.seal(&plain, credential_id))
    }

    fn open(&self, rec: &CredentialRecord) -> Result<Secrets, OpError> {
        let id = &rec.credential.id;
        let plain = self.cipher()?.open(&rec.sealed, id).map_err(|e| {
            OpError::Store(StoreError::Internal(anyhow::anyhow!(
                "credential `{id}`: {e}"
            )))
        })?;
        // serde's message could quote the plaintext, so it is not kept.
        serde_json::from_slice(&plain).map_err(|_| {
            OpError::Store(StoreError::Internal(anyhow::anyhow!(
                "credential `{id}`: its decrypted secrets are not readable"
            )))
        })
    }

    /// The vault, which must exist in the workspace.
    async fn vault(&self, ws: &str, vault_id: &str) -> Result<vault::Vault, OpError> {
        self.store
            .get_vault(ws, vault_id)
            .await?
            .ok_or_else(|| OpError::VaultNotFound(vault_id.to_string()))
    }

    /// The credential, which must exist in the vault.
    pub async fn credential(
        &self,
        ws: &str,
        vault_id: &str,
        id: &str,
    ) -> Result<CredentialRecord, OpError> {
        self.vault(ws, vault_id).await?;
        self.store
            .get_credential(ws, vault_id, id)
            .await?
            .ok_or_else(|| OpError::CredentialNotFound(id.to_string()))
    }

    fn record(
        &self,
        credential: Credential,
        secrets: &Secrets,
    ) -> Result<CredentialRecord, OpError> {
        Ok(CredentialRecord {
            server_url: normalize_url(credential.auth.server_url()),
            sealed: self.seal(secrets, &credential.id)?,
            credential,
        })
    }

    /// Adds a credential to a vault that is not archived.
    pub async fn create_credential(
        &self,
        ws: &str,
        vault_id: &str,
        req: CredentialCreate,
    ) -> Result<Credential, OpError> {
        let now = self.store.clock().now();
        let spec = req.into_spec(now)?;
        let v = self.vault(ws, vault_id).await?;
        if v.archived_at.is_some() {
            return Err(vault::archived(vault_id, "no credentials can be added to it").into());
        }
        let CredentialSpec {
            auth,
            secrets,
            display_name,
            metadata,
        } = spec;
        let at = time::format(now);
        let credential = Credential {
            tag: CredentialTag::Tag,
            id: new_id("vcrd"),
            vault_id: vault_id.to_string(),
            display_name,
            auth,
            metadata,
            created_at: at.clone(),
            updated_at: at,
            archived_at: None,
        };
        let rec = self.record(credential, &secrets)?;
        self.store
            .insert_credential(ws, &rec, now)
            .await
            .map_err(|e| duplicate(e, &rec))?;
        Ok(rec.credential)
    }

    /// Changes a credential's secrets, expiry, refresh settings, name or metadata.
    pub async fn update_credential(
        &self,
        ws: &str,
        vault_id: &str,
        id: &str,
        req: CredentialUpdate,
    ) -> Result<Credential, OpError> {
        let rec = self.credential(ws, vault_id, id).await?;
        let secrets = self.open(&rec)?;
        let now = self.store.clock().now();
        let spec = req.apply(&rec.credential, &secrets, now)?;
        if spec.auth == rec.credential.auth
            && spec.secrets == secrets
            && spec.display_name == rec.credential.display_name
            && spec.metadata == rec.credential.metadata
        {
            return Ok(rec.credential);
        }
        let mut credential = rec.credential.clone();
        credential.auth = spec.auth;
        credential.display_name = spec.display_name;
        credential.metadata = spec.metadata;
        credential.updated_at = time::format(now);
        let new = self.record(credential, &spec.secrets)?;
        if !self
            .store
            .update_credential(ws, &new, now, false, None)
            .await?
        {
            return Err(OpError::CredentialNotFound(id.to_string()));
        }
        Ok(new.credential)
    }

    /// Archives a credential: kept for reference, never used again.
    pub async fn archive_credential(
        &self,
        ws: &str,
        vault_id: &str,
        id: &str,
    ) -> Result<Credential, OpError> {
        let mut rec = self.credential(ws, vault_id, id).await?;
        if rec.credential.archived_at.is_some() {
            return Ok(rec.credential);
        }
        let now = self.store.clock().now();
        rec.credential.archived_at = Some(time::format(now));
        rec.credential.updated_at = time::format(now);
        self.store
            .update_credential(ws, &rec, now, true, None)
            .await?;
        Ok(rec.credential)
    }

    /// The lock that keeps refreshes of one credential one at a time in this process.
    fn refresh_lock(&self, id: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut map = self.refreshing.lock().expect("refresh locks");
        // Locks nobody holds or waits for are dropped, so the map stays small.
        map.retain(|_, l| Arc::strong_count(l) > 1);
        map.entry(id.to_string()).or_default().clone()
    }

    /// Stores refreshed tokens unless another refresh got there first (then its result is
    /// read back). Returns the record now stored and its secrets.
    async fn store_refresh(
        &self,
        ws: &str,
        old: &CredentialRecord,
        tokens: oauth::Tokens,
        secrets: &Secrets,
        now: Micros,
    ) -> Result<(CredentialRecord, Secrets), OpError> {
        let mut credential = old.credential.clone();
        if let mast_domain::credential::CredentialAuth::McpOauth { expires_at, .. } =
            &mut credential.auth
        {
            *expires_at = tokens.expires_in.map(|s| time::format(now + s * 1_000_000));
        }
        credential.updated_at = time::format(now);
        let new_secrets = Secrets {
            token: tokens.access_token,
            refresh_token: tokens
                .refresh_token
                .or_else(|| secrets.refresh_token.clone()),
            client_secret: secrets.client_secret.clone(),
        };
        let new = self.record(credential, &new_secrets)?;
        if self
            .store
            .update_credential(ws, &new, now, false, Some(&old.sealed))
            .await?
        {
            return Ok((new, new_secrets));
        }
        // Changed meanwhile (another replica refreshed, or a client updated it): use that.
        let cur = self
            .store
            .get_credential(ws, &old.credential.vault_id, &old.credential.id)
            .await?
            .ok_or_else(|| OpError::CredentialNotFound(old.credential.id.clone()))?;
        let s = self.open(&cur)?;
        Ok((cur, s))
    }
}

/// A second live credential for the same server in one vault.
fn duplicate(e: StoreError, rec: &CredentialRecord) -> OpError {
    match e {
        StoreError::Conflict(_) => OpError::Conflict(format!(
            "vault `{}` already has a credential for `{}` that is not archived; update or archive it first",
            rec.credential.vault_id,
            rec.credential.auth.server_url()
        )),
        e => e.into(),
    }
}
