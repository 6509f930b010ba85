//! Skills and their versions as the API serves them: a bundle's upload becomes a stored
//! version, versions are found by id or `latest`, and a skill keeps at least one version.
//! What a session does with its skills is in [`crate::skills`].

use super::OpError;
use crate::Engine;
use mast_domain::agent::Skill;
use mast_domain::ids::new_id;
use mast_domain::invalid::Invalid;
use mast_domain::query::Scan;
use mast_domain::session::SessionBody;
use mast_domain::skill::{
    LATEST, SkillObject, SkillSource, SkillTag, SkillVersionObject, SkillVersionTag,
};
use mast_domain::skill_bundle;
use mast_domain::time::{self, Micros};
use mast_store::{
    NewSkillVersion, SkillRecord, SkillVersionDelete, SkillVersionRecord, StoreError,
};

/// The files of one uploaded bundle: each file's path (its folder first) and bytes.
pub type Upload = Vec<(String, Vec<u8>)>;

impl Engine {
    /// Saves a skill with its first version, made from `files`; its display name is
    /// `display_name` or the name SKILL.md gives. A bundle over the size limit is refused
    /// with the `skill_too_large` code.
    pub async fn create_skill(
        &self,
        ws: &str,
        display_name: Option<String>,
        files: Upload,
    ) -> Result<SkillObject, OpError> {
        let id = new_id("skill");
        let first = new_version(&id, files, self.now())?;
        let v = &first.version;
        let skill = SkillRecord {
            id,
            workspace_id: ws.to_string(),
            display_name: display_name.unwrap_or_else(|| v.name.clone()),
            source: "custom".into(),
            name: v.name.clone(),
            latest_version_id: v.id.clone(),
            created_at: v.created_at,
            updated_at: v.created_at,
        };
        self.inner.store.insert_skill(&skill, &first).await?;
        Ok(skill_view(&skill))
    }

    /// One skill of the workspace.
    pub async fn skill(&self, ws: &str, id: &str) -> Result<SkillObject, OpError> {
        self.inner
            .store
            .get_skill(ws, id)
            .await?
            .map(|s| skill_view(&s))
            .ok_or_else(|| OpError::SkillNotFound(id.to_string()))
    }

    /// A page of the workspace's skills, of one source when `source` is given.
    pub async fn list_skills(
        &self,
        ws: &str,
        source: Option<&str>,
        scan: &Scan<String>,
    ) -> Result<Vec<SkillObject>, OpError> {
        let rows = self.inner.store.list_skills(ws, source, scan).await?;
        Ok(rows.iter().map(skill_view).collect())
    }

    /// Deletes a skill with all its versions.
    pub async fn delete_skill(&self, ws: &str, id: &str) -> Result<(), OpError> {
        if !self.inner.store.delete_skill(ws, id).await? {
            return Err(OpError::SkillNotFound(id.to_string()));
        }
        Ok(())
    }

    /// Saves a new version of `skill_id` from `files`; it becomes the skill's latest.
    pub async fn create_skill_version(
        &self,
        ws: &str,
        skill_id: &str,
        files: Upload,
    ) -> Result<SkillVersionObject, OpError> {
        let new = new_version(skill_id, files, self.now())?;
        match self.inner.store.insert_skill_version(ws, &new).await {
            Ok(_) => Ok(version_view(&new.version)),
            Err(StoreError::NotFound) => Err(OpError::SkillNotFound(skill_id.to_string())),
            Err(e) => Err(e.into()),
        }
    }

    /// A page of the skill's versions; not found when the skill is not.
    pub async fn list_skill_versions(
        &self,
        ws: &str,
        skill_id: &str,
        scan: &Scan<String>,
    ) -> Result<Vec<SkillVersionObject>, OpError> {
        let store = &self.inner.store;
        if store.get_skill(ws, skill_id).await?.is_none() {
            return Err(OpError::SkillNotFound(skill_id.to_string()));
        }
        let rows = store.list_skill_versions(ws, skill_id, scan).await?;
        Ok(rows.iter().map(version_view).collect())
    }

    /// The version `version` (an id or `latest`) of a skill of the workspace.
    pub async fn skill_version(
        &self,
        ws: &str,
        skill_id: &str,
        version: &str,
    ) -> Result<SkillVersionObject, OpError> {
        Ok(version_view(
            &self.find_version(ws, skill_id, version).await?,
        ))
    }

    /// A version's name and its files as a zip archive whose entries are `<name>/<path>`.
    pub async fn skill_version_archive(
        &self,
        ws: &str,
        skill_id: &str,
        version: &str,
    ) -> Result<(String, Vec<u8>), OpError> {
        let v = self.find_version(ws, skill_id, version).await?;
        let files = self.inner.store.skill_files(&v.id).await?;
        let zip = skill_bundle::to_zip(&v.name, &files);
        Ok((v.name, zip))
    }

    /// Deletes one version; the skill's latest moves to the newest one left. The last
    /// version cannot go: the skill itself is deleted instead.
    pub async fn delete_skill_version(
        &self,
        ws: &str,
        skill_id: &str,
        version: &str,
    ) -> Result<(), OpError> {
        let store = &self.inner.store;
        match store
            .delete_skill_version(ws, skill_id, version, self.now())
            .await?
        {
            SkillVersionDelete::Deleted => Ok(()),
            SkillVersionDelete::Last => Err(Invalid::new(format!(
                "`{version}` is the only version of skill `{skill_id}` and a skill keeps at least one; delete the skill instead"
            ))
            .into()),
            SkillVersionDelete::NotFound if store.get_skill(ws, skill_id).await?.is_none() => {
                Err(OpError::SkillNotFound(skill_id.to_string()))
            }
            SkillVersionDelete::NotFound => Err(version_not_found(skill_id, version)),
        }
    }

    /// Whether the agent of session `session_id` (or an agent of its roster) names the
    /// skill: what a self-hosted worker of that session may download.
    pub async fn session_names_skill(
        &self,
        ws: &str,
        session_id: &str,
        skill_id: &str,
    ) -> Result<bool, OpError> {
        let session = self
            .inner
            .store
            .get_session(ws, session_id)
            .await?
            .ok_or_else(|| OpError::SessionNotFound(session_id.to_string()))?;
        let body: SessionBody = serde_json::from_str(&session.body).map_err(StoreError::from)?;
        Ok(names_skill(&body, skill_id))
    }

    async fn find_version(
        &self,
        ws: &str,
        skill_id: &str,
        version: &str,
    ) -> Result<SkillVersionRecord, OpError> {
        let store = &self.inner.store;
        let id = if version == LATEST {
            store
                .get_skill(ws, skill_id)
                .await?
                .ok_or_else(|| OpError::SkillNotFound(skill_id.to_string()))?
                .latest_version_id
        } else {
            version.to_string()
        };
        match store.get_skill_version(ws, skill_id, &id).await? {
            Some(v) => Ok(v),
            None if store.get_skill(ws, skill_id).await?.is_none() => {
                Err(OpError::SkillNotFound(skill_id.to_string()))
            }
            None => Err(version_not_found(skill_id, version)),
        }
    }
}

fn version_not_found(skill_id: &str, version: &str) -> OpError {
    OpError::NotFound(format!("skill `{skill_id}` has no version `{version}`"))
}

/// Checks the uploaded files and makes them a stored version of `skill_id`.
fn new_version(skill_id: &str, files: Upload, now: Micros) -> Result<NewSkillVersion, OpError> {
    let bundle = skill_bundle::parse(files)?;
    Ok(NewSkillVersion {
        version: SkillVersionRecord {
            id: new_id("skillver"),
            skill_id: skill_id.to_string(),
            name: bundle.name,
            description: bundle.description,
            created_at: now,
        },
        files: bundle.files,
    })
}

fn skill_view(r: &SkillRecord) -> SkillObject {
    SkillObject {
        tag: SkillTag::Tag,
        id: r.id.clone(),
        display_name: r.display_name.clone(),
        source: SkillSource {
            kind: r.source.clone(),
        },
        latest_version_id: r.latest_version_id.clone(),
        created_at: time::format(r.created_at),
        updated_at: time::format(r.updated_at),
    }
}

fn version_view(v: &SkillVersionRecord) -> SkillVersionObject {
    SkillVersionObject {
        tag: SkillVersionTag::Tag,
        id: v.id.clone(),
        skill_id: v.skill_id.clone(),
        name: v.name.clone(),
        description: v.description.clone(),
        created_at: time::format(v.created_at),
    }
}

/// Whether the session's agent (or an agent of its roster) names the skill.
fn names_skill(body: &SessionBody, skill_id: &str) -> bool {
    let listed = |skills: &[Skill]| skills.iter().any(|s| s.skill_id == skill_id);
    listed(&body.agent.skills)
        || body
            .agent
            .multiagent
            .as_ref()
            .is_some_and(|m| mentions(m, skill_id))
}

/// Whether a roster (full agent snapshots) holds a skill entry with this id.
fn mentions(v: &serde_json::Value, skill_id: &str) -> bool {
    match v {
        serde_json::Value::Object(o) => {
            o.get("skill_id").and_then(|s| s.as_str()) == Some(skill_id)
                || o.values().any(|v| mentions(v, skill_id))
        }
        serde_json::Value::Array(a) => a.iter().any(|v| mentions(v, skill_id)),
        _ => false,
    }
}
