//! The mount table of a session's sandbox, built from its resources: each `file` resource's
//! bytes are copied once from the file store into the session's mount directory on the host
//! (server-written, outside the workspace the sandbox can change) and bound read-only at its
//! `mount_path`.

use std::path::Path;

use futures_util::StreamExt as _;
use serde_json::Value;
use tokio::io::AsyncWriteExt as _;

use super::Inner;
use mast_domain::agent::Skill;
use mast_domain::session::SessionBody;
use mast_sandbox::mounts::{Mount, MountTable, is_file};

/// The session's mounts, copying in any file not yet on the host, and the thread agent's
/// `skills` (see [`super::skills`]). A file that has gone (deleted or expired since it was
/// added) fails the call with a message the model can relay.
pub(super) async fn prepare(
    inner: &Inner,
    sid: &str,
    body: &SessionBody,
    skills: &[Skill],
) -> Result<MountTable, String> {
    let files: Vec<&Value> = body
        .resources
        .iter()
        .filter(|r| r.get("type").and_then(Value::as_str) == Some("file"))
        .collect();
    if files.is_empty() && skills.is_empty() {
        return Ok(MountTable::default());
    }
    let ws = inner
        .store
        .get_session_by_id(sid)
        .await
        .map_err(|e| format!("the session could not be read: {e}"))?
        .map(|r| r.workspace_id)
        .ok_or_else(|| "the session no longer exists".to_string())?;
    let mut mounts = Vec::with_capacity(files.len() + skills.len());
    if !files.is_empty() {
        let Some(store) = inner.files.as_ref() else {
            return Err("file resources cannot be mounted: this engine has no file storage".into());
        };
        let dir = inner.toolbox.mounts_dir(sid);
        for r in files {
            let (Some(id), Some(file_id), Some(path)) = (
                r.get("id").and_then(Value::as_str),
                r.get("file_id").and_then(Value::as_str),
                r.get("mount_path").and_then(Value::as_str),
            ) else {
                continue;
            };
            let host = dir.join(id);
            if !is_file(&host) {
                copy_in(store, &ws, file_id, &dir, &host)
                    .await
                    .map_err(|e| {
                        format!("file `{file_id}` (mounted at {path}) could not be mounted: {e}")
                    })?;
            }
            mounts.push(Mount {
                sandbox: path.to_string(),
                host,
                read_only: true,
            });
        }
    }
    let root = inner.toolbox.skill_bundles_dir();
    mounts.extend(super::skills::mounts(&*inner.store, &ws, skills, &root).await?);
    Ok(MountTable::new(mounts))
}

/// Writes the file's bytes to a temporary name in `dir`, then renames it to `host`, so a
/// half-copied file is never mounted. Readable by every user: a sandbox with a host user of
/// its own must read it, and only the server can reach the directory's parents' listing.
async fn copy_in(
    files: &crate::files::Files,
    ws: &str,
    file_id: &str,
    dir: &Path,
    host: &Path,
) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    tokio::fs::create_dir_all(dir).await?;
    tokio::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).await?;
    let (_, mut bytes) = files
        .open_content(ws, file_id)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))?;
    let tmp = dir.join(format!(".{}.part", mast_domain::ids::new_id("tmp")));
    let result = async {
        let mut out = tokio::fs::File::create(&tmp).await?;
        while let Some(chunk) = bytes.next().await {
            out.write_all(&chunk?).await?;
        }
        out.sync_all().await?;
        drop(out);
        tokio::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o444)).await?;
        tokio::fs::rename(&tmp, host).await?;
        anyhow::Ok(())
    }
    .await;
    if result.is_err() {
        let _ = tokio::fs::remove_file(&tmp).await;
    }
    result
}
