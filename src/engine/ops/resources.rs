//! Session resources (API.md §2.6): the files a session mounts. They live in the session's
//! body, so every change is decided under the session's row lock together with the status
//! it depends on (resources change only while the session is idle), and the session object
//! shows the same list the resources endpoints do.

use serde_json::Value;

use super::OpError;
use super::txn::decide;
use crate::domain::ids::new_id;
use crate::domain::invalid::Invalid;
use crate::domain::resource::{
    self, FileResource, FileResourceParams, FileResourceTag, MAX_FILE_RESOURCES,
};
use crate::domain::session::SessionBody;
use crate::domain::time::{self, Micros};
use crate::engine::Engine;
use crate::engine::intake;
use crate::engine::state::status_of;
use crate::store::{StoreError, TxnOutput};

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

/// The id of a stored resource.
fn id_of(v: &Value) -> Option<&str> {
    v.get("id").and_then(Value::as_str)
}

impl Engine {
    /// Every file a creation mounts exists in the workspace and has not expired. A cloud
    /// session's sandbox mounts them; a self-hosted worker fetches them with its work token.
    pub(super) async fn check_resource_files(
        &self,
        ws: &str,
        list: &[FileResourceParams],
    ) -> Result<(), OpError> {
        for r in list {
            self.check_file(ws, &r.file_id).await?;
        }
        Ok(())
    }

    async fn check_file(&self, ws: &str, id: &str) -> Result<(), OpError> {
        match self.inner.store.get_file(ws, id).await? {
            Some(f) if f.expires_at.is_none_or(|t| t > time::now()) => Ok(()),
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

    /// Adds a file to an idle session; it is mounted from the session's next tool call on.
    pub async fn add_resource(
        &self,
        ws: &str,
        sid: &str,
        body: &Value,
    ) -> Result<FileResource, OpError> {
        let params = resource::parse_resource("", body)?;
        self.check_file(ws, &params.file_id).await?;
        let committed = decide(&self.inner, ws, sid, move |rec| {
            let mut sb: SessionBody = serde_json::from_str(&rec.body)?;
            check_changeable(rec, "cannot take new resources")?;
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
                &params.mount_path,
            )?;
            let now = time::now();
            let added = file_resource(&params, now);
            sb.resources.push(added.clone());
            rec.body = serde_json::to_string(&sb)?;
            rec.updated_at = now;
            Ok((TxnOutput::default(), added))
        })
        .await?;
        Ok(serde_json::from_value(committed.value).map_err(StoreError::from)?)
    }

    /// `resources.update`: token rotation, which only repositories take.
    pub async fn update_resource(
        &self,
        ws: &str,
        sid: &str,
        rid: &str,
        body: &Value,
    ) -> Result<Value, OpError> {
        resource::parse_update(body)?;
        let found = self.resource(ws, sid, rid).await?;
        let kind = found.get("type").and_then(Value::as_str).unwrap_or("file");
        Err(Invalid::new(format!(
            "resource `{rid}` is a `{kind}` resource; only `github_repository` resources take a new `authorization_token`"
        ))
        .into())
    }

    /// Removes a resource from an idle session: it is not mounted from the next tool call on.
    pub async fn delete_resource(&self, ws: &str, sid: &str, rid: &str) -> Result<(), OpError> {
        let wanted = rid.to_string();
        let committed = decide(&self.inner, ws, sid, move |rec| {
            let mut sb: SessionBody = serde_json::from_str(&rec.body)?;
            let Some(at) = sb.resources.iter().position(|r| id_of(r) == Some(&wanted)) else {
                return Ok((TxnOutput::default(), false));
            };
            check_changeable(rec, "its resources cannot change")?;
            sb.resources.remove(at);
            let now = time::now();
            rec.body = serde_json::to_string(&sb)?;
            rec.updated_at = now;
            Ok((TxnOutput::default(), true))
        })
        .await?;
        if !committed.value {
            return Err(OpError::ResourceNotFound(rid.to_string()));
        }
        Ok(())
    }
}

/// Resources change only on a session that is not archived and not running: a running
/// turn's sandbox keeps the mounts it started with.
fn check_changeable(
    rec: &crate::store::SessionRecord,
    consequence: &str,
) -> Result<(), StoreError> {
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
