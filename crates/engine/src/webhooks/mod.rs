//! Webhooks: managing a workspace's endpoints (their signing secrets sealed with the
//! server's key, like vault credentials) and sending the outbox's deliveries ([`sender`]).
//!
//! Events reach the outbox inside the store's transactions (see [`mast_store::webhooks`]);
//! this module only reads it, so a change and its webhook commit or fail together.

mod config;
mod endpoints;
pub mod sender;

use std::sync::Arc;

use crate::ops::OpError;
use crate::secrets::Cipher;
use crate::standard_webhooks::{SignedPoster, SigningSecret};
use mast_domain::ids::new_id;
use mast_domain::invalid::Invalid;
use mast_domain::time::{self, Micros};
use mast_domain::webhook::{self, WebhookEndpoint, WebhookEndpointCreate, WebhookEndpointUpdate};
use mast_sandbox::netguard::NetGuard;
use mast_store::Store;
use mast_store::webhooks::EndpointRecord;

pub use config::{ConfiguredWebhook, WebhooksConfig};

/// The webhook service; cheap to share behind an `Arc`.
pub struct Webhooks {
    store: Arc<dyn Store>,
    /// The key secrets are sealed with, or why there is none (endpoints are then refused).
    cipher: Result<Cipher, String>,
    poster: SignedPoster,
    config: WebhooksConfig,
}

impl Webhooks {
    /// The service over `store`; deliveries pass `guard` (the tools' egress rules).
    pub fn new(
        store: Arc<dyn Store>,
        cipher: Result<Cipher, String>,
        guard: NetGuard,
        config: WebhooksConfig,
    ) -> Self {
        Webhooks {
            store,
            cipher,
            poster: SignedPoster::new(guard),
            config,
        }
    }

    fn cipher(&self) -> Result<&Cipher, OpError> {
        self.cipher.as_ref().map_err(|why| {
            Invalid::with_code(
                "secret_key_unavailable",
                format!(
                    "this server has no key to encrypt webhook signing secrets with ({why}); \
                     its operator sets MAST_SECRET_KEY or MAST_SECRET_KEY_FILE"
                ),
            )
            .into()
        })
    }

    fn seal(&self, secret: &SigningSecret, endpoint_id: &str) -> Result<Vec<u8>, OpError> {
        Ok(self.cipher()?.seal(secret.expose().as_bytes(), endpoint_id))
    }

    /// The secrets an endpoint signs with now: its current one and, during a rotation's
    /// overlap, the one before.
    fn signing_secrets(
        &self,
        e: &EndpointRecord,
        now: Micros,
    ) -> Result<Vec<SigningSecret>, String> {
        let cipher = self.cipher.as_ref().map_err(Clone::clone)?;
        let open = |sealed: &[u8]| -> Result<SigningSecret, String> {
            let plain = cipher
                .open(sealed, &e.id)
                .map_err(|_| format!("endpoint `{}`: its signing secret does not decrypt", e.id))?;
            SigningSecret::parse(&String::from_utf8_lossy(&plain))
        };
        let mut out = vec![open(&e.secret)?];
        if let (Some(prev), Some(until)) = (&e.previous_secret, e.previous_until)
            && until > now
        {
            out.push(open(prev)?);
        }
        Ok(out)
    }

    /// Checks an endpoint URL against the egress rules (a literal private address is refused
    /// here; a name is checked again whenever it is resolved).
    fn check_url(&self, url: &str) -> Result<(), OpError> {
        check_len_url(url)?;
        self.poster.check_url(url).map_err(|why| {
            OpError::Invalid(Invalid::new(format!(
                "`url`: {why} (private and loopback addresses are allowed only when the \
                 operator sets MAST_ALLOW_PRIVATE_NETWORK or MAST_ALLOW_PRIVATE_HOSTS)"
            )))
        })?;
        Ok(())
    }

    /// Creates an endpoint; the response carries its signing secret, shown this once.
    pub async fn create(
        &self,
        ws: &str,
        body: WebhookEndpointCreate,
    ) -> Result<WebhookEndpoint, OpError> {
        self.check_url(&body.url)?;
        webhook::check_event_types(&body.event_types)?;
        if let Some(d) = &body.description {
            webhook::check_description(d)?;
        }
        let secret = match &body.signing_secret {
            Some(text) => SigningSecret::parse(text)
                .map_err(|why| Invalid::new(format!("`signing_secret`: {why}")))?,
            None => SigningSecret::generate(),
        };
        let now = self.store.clock().now();
        let id = new_id("whep");
        let rec = EndpointRecord {
            secret: self.seal(&secret, &id)?,
            id,
            workspace_id: ws.to_string(),
            url: body.url,
            event_types: body.event_types,
            description: body.description,
            enabled: body.enabled.unwrap_or(true),
            previous_secret: None,
            previous_until: None,
            created_at: now,
            updated_at: now,
        };
        self.store.insert_webhook_endpoint(&rec).await?;
        let mut out = wire(&rec, self.store.clock().now());
        out.signing_secret = Some(secret.expose());
        Ok(out)
    }

    /// Changes an endpoint's URL, event types, description or enabled flag.
    pub async fn update(
        &self,
        ws: &str,
        id: &str,
        body: WebhookEndpointUpdate,
    ) -> Result<WebhookEndpoint, OpError> {
        let Some(mut rec) = self.store.get_webhook_endpoint(ws, id).await? else {
            return Err(OpError::WebhookEndpointNotFound(id.to_string()));
        };
        if let Some(url) = body.url {
            self.check_url(&url)?;
            rec.url = url;
        }
        if let Some(types) = body.event_types {
            webhook::check_event_types(&types)?;
            rec.event_types = types;
        }
        match body.description {
            mast_domain::patch::Patch::Absent => {}
            mast_domain::patch::Patch::Null => rec.description = None,
            mast_domain::patch::Patch::Value(d) => {
                webhook::check_description(&d)?;
                rec.description = Some(d);
            }
        }
        if let Some(enabled) = body.enabled {
            rec.enabled = enabled;
        }
        rec.updated_at = self.store.clock().now();
        if !self.store.update_webhook_endpoint(&rec).await? {
            return Err(OpError::WebhookEndpointNotFound(id.to_string()));
        }
        Ok(wire(&rec, self.store.clock().now()))
    }

    /// Gives an endpoint a new secret, shown this once; the old one keeps signing (beside
    /// it) for the configured overlap, so receivers can switch without losing a delivery.
    pub async fn rotate(&self, ws: &str, id: &str) -> Result<WebhookEndpoint, OpError> {
        let Some(mut rec) = self.store.get_webhook_endpoint(ws, id).await? else {
            return Err(OpError::WebhookEndpointNotFound(id.to_string()));
        };
        let secret = SigningSecret::generate();
        let now = self.store.clock().now();
        rec.previous_secret = Some(std::mem::replace(&mut rec.secret, self.seal(&secret, id)?));
        rec.previous_until = Some(now + self.config.rotation_overlap.as_micros() as Micros);
        rec.updated_at = now;
        if !self.store.update_webhook_endpoint(&rec).await? {
            return Err(OpError::WebhookEndpointNotFound(id.to_string()));
        }
        let mut out = wire(&rec, self.store.clock().now());
        out.signing_secret = Some(secret.expose());
        Ok(out)
    }

    /// Puts the config file's endpoints in place (at start): each is created under its fixed
    /// id, or brought back to what the file says (URL, types, description, enabled flag,
    /// secret) when it exists. Checked like an API request; the first bad one is the error.
    pub async fn put_configured(&self, list: &[ConfiguredWebhook]) -> Result<(), OpError> {
        for c in list {
            let e = &c.endpoint;
            let at = |why: String| Invalid::new(format!("`{}`: {why}", c.id));
            self.check_url(&e.url)?;
            webhook::check_event_types(&e.event_types)?;
            if let Some(d) = &e.description {
                webhook::check_description(d)?;
            }
            let secret = SigningSecret::parse(e.signing_secret.as_deref().unwrap_or_default())
                .map_err(|why| at(format!("`signing_secret`: {why}")))?;
            let now = self.store.clock().now();
            let existing = self.store.get_webhook_endpoint(&c.workspace, &c.id).await?;
            let mut rec = existing.clone().unwrap_or_else(|| EndpointRecord {
                id: c.id.clone(),
                workspace_id: c.workspace.clone(),
                url: String::new(),
                event_types: vec![],
                description: None,
                enabled: true,
                secret: vec![],
                previous_secret: None,
                previous_until: None,
                created_at: now,
                updated_at: now,
            });
            rec.url = e.url.clone();
            rec.event_types = e.event_types.clone();
            rec.description = e.description.clone();
            rec.enabled = e.enabled.unwrap_or(true);
            // Sealing is randomised: keep the stored secret when it opens to the same one.
            let same_secret = existing.as_ref().is_some_and(|x| {
                self.cipher.as_ref().is_ok_and(|cipher| {
                    cipher.open(&x.secret, &c.id).is_ok_and(|plain| {
                        SigningSecret::parse(&String::from_utf8_lossy(&plain)).ok()
                            == Some(secret.clone())
                    })
                })
            });
            if !same_secret {
                rec.secret = self.seal(&secret, &c.id)?;
            }
            if existing.as_ref() == Some(&rec) {
                continue;
            }
            rec.updated_at = now;
            if existing.is_some() {
                self.store.update_webhook_endpoint(&rec).await?;
            } else {
                self.store.insert_webhook_endpoint(&rec).await?;
            }
        }
        Ok(())
    }

    /// The settings deliveries run with.
    pub fn config(&self) -> &WebhooksConfig {
        &self.config
    }
}

/// URLs are bounded like other stored strings.
fn check_len_url(url: &str) -> Result<(), OpError> {
    mast_domain::invalid::check_len("url", url, 1, 2048).map_err(OpError::from)
}

/// The endpoint as clients see it (never its secret).
pub fn wire(rec: &EndpointRecord, now: Micros) -> WebhookEndpoint {
    WebhookEndpoint {
        tag: webhook::EndpointTag::Tag,
        id: rec.id.clone(),
        url: rec.url.clone(),
        event_types: rec.event_types.clone(),
        description: rec.description.clone(),
        enabled: rec.enabled,
        signing_secret: None,
        previous_secret_expires_at: rec.previous_until.filter(|u| *u > now).map(time::format),
        created_at: time::format(rec.created_at),
        updated_at: time::format(rec.updated_at),
    }
}
