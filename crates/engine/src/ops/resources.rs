//! Session resources: the files a session mounts and the repositories it
//! clones. They live in the session's
//! body, so every change is decided under the session's row lock together with the status
//! it depends on (resources change only while the session is idle), and the session object
//! shows the same list the resources endpoints do.

use serde_json::Value;

use super::OpError;
use super::txn::decide;
use crate::Engine;
use crate::intake;
use crate::state::status_of;
use mast_domain::environment::{Environment, EnvironmentConfig};
use mast_domain::ids::new_id;
use mast_domain::invalid::{Invalid, Valid};
use mast_domain::repository::{RepositoryParams, RepositoryResource, RepositoryResourceTag, Token};
use mast_domain::resource::{
    self, FileResource, FileResourceParams, FileResourceTag, MAX_FILE_RESOURCES, ResourceParams,
};
use mast_domain::session::SessionBody;
use mast_domain::time::{self, Micros};
use mast_store::{StoreError, TxnOutput};

/// The stored (and wire) form of a new file resource.
pub(super) fn file_resource(p: &FileResourceParams, now: Micros) -> Value {
    let at = time::format(now);
    serde_json::to_value(FileResource {
        tag: FileResourceTag::Tag,
        id: new_id("sesrsc"),
        file_id: p.file_id.clone(),
        mount_path: p.mount_path.clone(),
        created_at: at.clone(),
        updated_at: at,
    })
    .unwrap_or(Value::Null)
}

/// The stored (and wire) form of a new repository resource; its token is kept apart.
fn repository_resource(p: &RepositoryParams, now: Micros) -> Value {
    let at = time::format(now);
    serde_json::to_value(RepositoryResource {
        tag: RepositoryResourceTag::Tag,
        id: new_id("sesrsc"),
        url: p.url.clone(),
        mount_path: p.mount_path.clone(),
        checkout: p.checkout.clone(),
        created_at: at.clone(),
        updated_at: at,
    })
    .unwrap_or(Value::Null)
}

/// The stored form of a new resource, with its sealed token (repositories that have one)
/// for [`SessionBody::repository_tokens`].
pub(super) fn new_resource(
    engine: &Engine,
    p: &ResourceParams,
    now: Micros,
) -> Result<(Value, Option<String>), OpError> {
    match p {
        ResourceParams::File(f) => Ok((file_resource(f, now), None)),
        ResourceParams::Repository(r) => {
            let v = repository_resource(r, now);
            let sealed = match &r.token {
                Some(t) => Some(engine.seal_token(t, id_of(&v).unwrap_or_default())?),
                None => None,
            };
            Ok((v, sealed))
        }
    }
}

/// The id of a stored resource.
fn id_of(v: &Value) -> Option<&str> {
    v.get("id").and_then(Value::as_str)
}

/// Repositories are cloned by the server's sandbox; a self-hosted worker runs its own tools
/// (and the SDK's worker clones nothing). Files reach a worker through its work token.
fn refuse_self_hosted(config: &EnvironmentConfig, at: &str, r: &ResourceParams) -> Valid<()> {
    match (config, r) {
        (EnvironmentConfig::SelfHosted, ResourceParams::Repository(_)) => {
            Err(Invalid::unsupported(
                at,
                "repository_resources_self_hosted",
                "repositories are cloned only in `cloud` environments; a self-hosted worker runs its own tools \
                 and clones what it needs itself",
            ))
        }
        _ => Ok(()),
    }
}

impl Engine {
    /// Every file a creation mounts exists in the workspace and has not expired. A cloud
    /// session's sandbox mounts them; a self-hosted worker fetches them with its work token.
    pub(super) async fn check_resource_files(
        &self,
        ws: &str,
        env: &Environment,
        list: &[ResourceParams],
    ) -> Result<(), OpError> {
        for (i, r) in list.iter().enumerate() {
            refuse_self_hosted(&env.config, &format!("resources[{i}]"), r)?;
            if let ResourceParams::File(f) = r {
                self.check_file(ws, &f.file_id).await?;
            }
        }
        Ok(())
    }

    /// Seals a repository token for resource `rid` (base64, for the session body).
    pub(super) fn seal_token(&self, t: &Token, rid: &str) -> Result<String, OpError> {
        use base64::Engine as _;
        let cipher = self.inner.secrets.as_ref().map_err(|why| {
            Invalid::with_code(
                "secret_key_unavailable",
                format!(
                    "this server has no key to encrypt repository tokens with ({why}); \
                     its operator sets MAST_SECRET_KEY or MAST_SECRET_KEY_FILE"
                ),
            )
        })?;
        Ok(base64::engine::general_purpose::STANDARD.encode(cipher.seal(t.0.as_bytes(), rid)))
    }

    async fn check_file(&self, ws: &str, id: &str) -> Result<(), OpError> {
        match self.inner.store.get_file(ws, id).await? {
            Some(f) if f.expires_at.is_none_or(|t| t > self.now()) => Ok(()),
            _ => Err(OpError::FileNotFound(id.to_string())),
        }
    }

    /// The session's resources, in the order they were added.
    pub async fn resources(&self, ws: &str, sid: &str) -> Result<Vec<Value>, OpError> {
        let rec = self
            .inner
            .store
            .get_session(ws, sid)
            .await?
            .ok_or_else(|| OpError::SessionNotFound(sid.to_string()))?;
        let body: SessionBody = serde_json::from_str(&rec.body).map_err(StoreError::from)?;
        Ok(body.resources)
    }

    /// One resource of the session.
    pub async fn resource(&self, ws: &str, sid: &str, rid: &str) -> Result<Value, OpError> {
        self.resources(ws, sid)
            .await?
            .into_iter()
            .find(|r| id_of(r) == Some(rid))
            .ok_or_else(|| OpError::ResourceNotFound(rid.to_string()))
    }

    /// Adds a file or a repository to an idle session; it is mounted (cloned) from the
    /// session's next tool call on.
    pub async fn add_resource(&self, ws: &str, sid: &str, body: &Value) -> Result<Value, OpError> {
        let params = resource::parse_resource("", body)?;
        if let ResourceParams::File(f) = &params {
            self.check_file(ws, &f.file_id).await?;
        }
        let (added, sealed) = new_resource(self, &params, self.now())?;
        let clock = self.inner.store.clock().clone();
        let committed = decide(&self.inner, ws, sid, move |rec| {
            let mut sb: SessionBody = serde_json::from_str(&rec.body)?;
            check_changeable(rec, "cannot take new resources")?;
            refuse_self_hosted(&sb.environment, "type", &params)?;
            if sb.resources.len() >= MAX_FILE_RESOURCES {
                return Err(Invalid::new(format!(
                    "a session holds at most {MAX_FILE_RESOURCES} file resources"
                ))
                .into());
            }
            resource::check_free(
                "",
                sb.resources
                    .iter()
                    .filter_map(|r| r.get("mount_path").and_then(Value::as_str)),
                params.mount_path(),
            )?;
            let now = clock.now();
            if let (Some(id), Some(sealed)) = (id_of(&added), &sealed) {
                sb.repository_tokens.insert(id.to_string(), sealed.clone());
            }
            sb.resources.push(added.clone());
            rec.body = serde_json::to_string(&sb)?.into();
            rec.updated_at = now;
            Ok((TxnOutput::default(), added))
        })
        .await?;
        Ok(committed.value)
    }

    /// `resources.update`: token rotation, which only repositories take.
    pub async fn update_resource(
        &self,
        ws: &str,
        sid: &str,
        rid: &str,
        body: &Value,
    ) -> Result<Value, OpError> {
        let token = resource::parse_update(body)?;
        let found = self.resource(ws, sid, rid).await?;
        let kind = found.get("type").and_then(Value::as_str).unwrap_or("file");
        if kind != "github_repository" {
            return Err(Invalid::new(format!(
                "resource `{rid}` is a `{kind}` resource; only `github_repository` resources take a new `authorization_token`"
            ))
            .into());
        }
        let sealed = self.seal_token(&token, rid)?;
        let wanted = rid.to_string();
        // Allowed while a turn runs: the token is read when a clone starts, so a rotation
        // reaches the next clone or retry.
        let clock = self.inner.store.clock().clone();
        let committed = decide(&self.inner, ws, sid, move |rec| {
            let mut sb: SessionBody = serde_json::from_str(&rec.body)?;
            if rec.archived_at.is_some() {
                return Err(intake::archived(&rec.id, "its resources cannot change").into());
            }
            let Some(r) = sb.resources.iter_mut().find(|r| id_of(r) == Some(&wanted)) else {
                return Ok((TxnOutput::default(), None));
            };
            let now = clock.now();
            r["updated_at"] = Value::String(time::format(now));
            let shown = r.clone();
            sb.repository_tokens.insert(wanted.clone(), sealed.clone());
            rec.body = serde_json::to_string(&sb)?.into();
            rec.updated_at = now;
            Ok((TxnOutput::default(), Some(shown)))
        })
        .await?;
        committed
            .value
            .ok_or_else(|| OpError::ResourceNotFound(rid.to_string()))
    }

    /// Removes a resource from an idle session: it is not mounted from the next tool call on.
    pub async fn delete_resource(&self, ws: &str, sid: &str, rid: &str) -> Result<(), OpError> {
        let wanted = rid.to_string();
        let clock = self.inner.store.clock().clone();
        let committed = decide(&self.inner, ws, sid, move |rec| {
            let mut sb: SessionBody = serde_json::from_str(&rec.body)?;
            let Some(at) = sb.resources.iter().position(|r| id_of(r) == Some(&wanted)) else {
                return Ok((TxnOutput::default(), None));
            };
            check_changeable(rec, "its resources cannot change")?;
            let gone = sb.resources.remove(at);
            sb.repository_tokens.remove(&wanted);
            let now = clock.now();
            rec.body = serde_json::to_string(&sb)?.into();
            rec.updated_at = now;
            Ok((TxnOutput::default(), Some(gone)))
        })
        .await?;
        let Some(gone) = committed.value else {
            return Err(OpError::ResourceNotFound(rid.to_string()));
        };
        if gone.get("type").and_then(Value::as_str) == Some("github_repository") {
            crate::repos::remove(&self.inner, sid, &gone).await;
        }
        Ok(())
    }
}

/// Resources change only on a session that is not archived and not running: a running
/// turn's sandbox keeps the mounts it started with.
fn check_changeable(rec: &mast_store::SessionRecord, consequence: &str) -> Result<(), StoreError> {
    if rec.archived_at.is_some() {
        return Err(intake::archived(&rec.id, consequence).into());
    }
    if status_of(rec).is_active() {
        return Err(StoreError::Conflict(format!(
            "session `{}` is running; its resources can only change while it is idle",
            rec.id
        )));
    }
    Ok(())
}
