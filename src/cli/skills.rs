//! `mast skills install-anthropic DIR`: installs a bundle under the short id of one of
//! Anthropic's pre-built skills (`xlsx`, `pdf`, …), which Mast cannot ship, so agents may name
//! it as `{"type": "anthropic", "skill_id": "xlsx"}`. Run again with a newer bundle, it adds
//! a version.

use std::path::Path;

use anyhow::Context as _;

use super::StoreArgs;
use crate::domain::ids::new_id;
use crate::domain::skill::ANTHROPIC_SOURCE as ANTHROPIC;
use crate::domain::skill_bundle;
use crate::store::{NewSkillVersion, SkillRecord, SkillVersionRecord};

/// Installs the skill folder `dir` as Anthropic skill `id` (default: its SKILL.md `name`) of
/// `workspace`; prints the id and the new version's id.
pub async fn install_anthropic(
    store: &StoreArgs,
    workspace: &str,
    dir: &Path,
    id: Option<&str>,
) -> anyhow::Result<()> {
    let folder = dir
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| anyhow::anyhow!("{} does not name a folder", dir.display()))?
        .to_string();
    let mut files = Vec::new();
    collect(dir, &folder, &mut files)?;
    let bundle = skill_bundle::parse(files).map_err(|e| anyhow::anyhow!("{e}"))?;
    let id = id.unwrap_or(&bundle.name).to_string();
    if id.starts_with("skill_") || id.is_empty() || id.contains('/') {
        anyhow::bail!(
            "`{id}` is not an Anthropic skill id: use its short name, such as `xlsx` (ids starting `skill_` are custom skills')"
        );
    }
    let opened = store.open_existing().await?;
    let at = opened.store.clock().now();
    let new = NewSkillVersion {
        version: SkillVersionRecord {
            id: new_id("skillver"),
            skill_id: id.clone(),
            name: bundle.name.clone(),
            description: bundle.description.clone(),
            created_at: at,
        },
        files: bundle.files,
    };
    let existing = opened
        .store
        .get_skill(workspace, &id)
        .await
        .map_err(|e| anyhow::anyhow!("{e}"))
        .with_context(|| format!("reading skill {id} from {}", opened.place))?;
    match existing {
        Some(s) if s.source != ANTHROPIC => {
            anyhow::bail!("skill `{id}` exists in {workspace} and is not an Anthropic skill")
        }
        Some(_) => {
            opened
                .store
                .insert_skill_version(workspace, &new)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
        None => {
            let skill = SkillRecord {
                id: id.clone(),
                workspace_id: workspace.to_string(),
                display_name: bundle.name,
                source: ANTHROPIC.into(),
                name: new.version.name.clone(),
                latest_version_id: new.version.id.clone(),
                created_at: at,
                updated_at: at,
            };
            opened
                .store
                .insert_skill(&skill, &new)
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
        }
    }
    println!("{id} {}", new.version.id);
    Ok(())
}

/// Every regular file below `dir` as `(folder/relative path, bytes)`; symbolic links are
/// refused rather than followed out of the folder.
fn collect(dir: &Path, prefix: &str, out: &mut Vec<(String, Vec<u8>)>) -> anyhow::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .with_context(|| format!("reading {}", dir.display()))?
        .collect::<Result<_, _>>()?;
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e
            .file_name()
            .into_string()
            .map_err(|n| anyhow::anyhow!("{n:?} in {} is not UTF-8", dir.display()))?;
        let path = format!("{prefix}/{name}");
        let kind = e.file_type()?;
        if kind.is_symlink() {
            anyhow::bail!(
                "{} is a symbolic link: bundles hold plain files",
                e.path().display()
            );
        } else if kind.is_dir() {
            collect(&e.path(), &path, out)?;
        } else {
            out.push((path, std::fs::read(e.path())?));
        }
    }
    Ok(())
}
