//! An agent's skills in a session: each `type: custom` entry resolves to a stored version
//! (`latest` is pinned when the session is created), is unpacked once per version into a
//! directory under the data directory and bound read-only at `/mnt/skills/<name>/`, and is
//! named in the system prompt so the model reads its `SKILL.md` when a task fits.

use std::path::{Path, PathBuf};

use mast_domain::agent::{Skill, SkillKind};
use mast_domain::skill::{LATEST, SKILLS_ROOT, SkillNote};
use mast_domain::skill_bundle::BundleFile;
use mast_sandbox::mounts::Mount;
use mast_store::{SkillVersionRecord, Store, StoreResult};

/// The version `skill` names in the workspace (`latest`: the skill's newest); `None` when the
/// skill or that version is gone, or the skill is of the other kind (custom skills are
/// uploaded; Anthropic ones installed by the operator with `mast skills install-anthropic`).
pub async fn resolve(
    store: &dyn Store,
    ws: &str,
    skill: &Skill,
) -> StoreResult<Option<SkillVersionRecord>> {
    let Some(s) = store.get_skill(ws, &skill.skill_id).await? else {
        return Ok(None);
    };
    let anthropic = s.source == mast_domain::skill::ANTHROPIC_SOURCE;
    if anthropic != (skill.kind == SkillKind::Anthropic) {
        return Ok(None);
    }
    let version = if skill.version == LATEST {
        s.latest_version_id
    } else {
        skill.version.clone()
    };
    store.get_skill_version(ws, &skill.skill_id, &version).await
}

/// What went wrong with one of an agent's skills.
pub fn missing(skill: &Skill) -> String {
    if skill.version == LATEST {
        format!("skill `{}` not found", skill.skill_id)
    } else {
        format!(
            "skill `{}` has no version `{}`",
            skill.skill_id, skill.version
        )
    }
}

/// Pins every `latest` to the version it is now, as a session starts (like the agent's own
/// version); a skill that is gone fails the call with its message.
pub async fn pin(store: &dyn Store, ws: &str, skills: &mut [Skill]) -> Result<(), String> {
    for s in skills.iter_mut() {
        match resolve(store, ws, s).await {
            Ok(Some(v)) => s.version = v.id,
            Ok(None) => return Err(missing(s)),
            Err(e) => return Err(format!("skill `{}` could not be read: {e}", s.skill_id)),
        }
    }
    Ok(())
}

/// The versions of the agent's skills, in its order: each found, or the message saying it is
/// gone (deleted since the session pinned it).
async fn versions(
    store: &dyn Store,
    ws: &str,
    skills: &[Skill],
) -> StoreResult<Vec<Result<SkillVersionRecord, String>>> {
    let mut out = Vec::with_capacity(skills.len());
    for s in skills {
        out.push(resolve(store, ws, s).await?.ok_or_else(|| missing(s)));
    }
    Ok(out)
}

/// Where the model finds a skill's folder: under `/mnt/skills` in Mast's sandbox; for a
/// self-hosted environment, where the SDK's worker unpacks it (`skills/<name>` under its
/// working directory, which its file tools resolve relative paths against).
fn skill_dir(name: &str, self_hosted: bool) -> String {
    if self_hosted {
        format!("skills/{name}")
    } else {
        format!("{SKILLS_ROOT}/{name}")
    }
}

/// The system prompt's note for the agent's skills; skills that are gone are named as
/// unavailable, so neither the model nor a reader of the prompt is left guessing.
pub async fn note(
    store: &dyn Store,
    ws: &str,
    skills: &[Skill],
    self_hosted: bool,
) -> StoreResult<Option<String>> {
    if skills.is_empty() {
        return Ok(None);
    }
    let mut notes = Vec::with_capacity(skills.len());
    let mut gone = Vec::new();
    for v in versions(store, ws, skills).await? {
        match v {
            Ok(v) => notes.push(SkillNote {
                dir: skill_dir(&v.name, self_hosted),
                name: v.name,
                description: v.description,
            }),
            Err(m) => gone.push(m),
        }
    }
    let mut text = mast_domain::skill::system_note(&notes).unwrap_or_default();
    for m in gone {
        text.push_str(&format!(
            "\n(Unavailable: {m}; it was deleted after this session started.)\n"
        ));
    }
    Ok((!text.is_empty()).then_some(text))
}

/// Read-only mounts of the agent's skills, unpacking any version not yet on the host into
/// `root` (`<data dir>/skill-bundles`). A skill deleted since the session began is not
/// mounted (the system prompt says it is unavailable).
pub async fn mounts(
    store: &dyn Store,
    ws: &str,
    skills: &[Skill],
    root: &Path,
) -> Result<Vec<Mount>, String> {
    let found = versions(store, ws, skills)
        .await
        .map_err(|e| format!("the agent's skills could not be read: {e}"))?;
    let mut out = Vec::with_capacity(found.len());
    for v in found.into_iter().flatten() {
        let host = root.join(&v.id);
        if !tokio::fs::try_exists(&host).await.unwrap_or(false) {
            let files = store
                .skill_files(&v.id)
                .await
                .map_err(|e| format!("skill `{}` could not be read: {e}", v.skill_id))?;
            unpack(root, &host, &files)
                .await
                .map_err(|e| format!("skill `{}` could not be unpacked: {e}", v.skill_id))?;
        }
        out.push(Mount {
            sandbox: format!("{SKILLS_ROOT}/{}", v.name),
            host,
            read_only: true,
        });
    }
    Ok(out)
}

/// Writes the files into a fresh directory beside `host` and renames it into place, so a
/// half-unpacked version is never mounted (a racing unpack of the same version loses the
/// rename harmlessly). Readable by every user: sandboxes may run as users of their own.
async fn unpack(root: &Path, host: &Path, files: &[BundleFile]) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    let dir_mode = || std::fs::Permissions::from_mode(0o755);
    tokio::fs::create_dir_all(root).await?;
    let tmp: PathBuf = root.join(format!(".{}.part", mast_domain::ids::new_id("tmp")));
    let result = async {
        tokio::fs::create_dir(&tmp).await?;
        for f in files {
            // Paths were checked at upload (relative, no `..`); checked again as they leave
            // the database.
            let rel = Path::new(&f.path);
            if rel.is_absolute()
                || rel
                    .components()
                    .any(|c| !matches!(c, std::path::Component::Normal(_)))
            {
                anyhow::bail!("stored path `{}` is not a plain relative path", f.path);
            }
            let target = tmp.join(rel);
            if let Some(parent) = target.parent() {
                tokio::fs::create_dir_all(parent).await?;
            }
            tokio::fs::write(&target, &f.content).await?;
            let mode = if f.executable { 0o555 } else { 0o444 };
            tokio::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode)).await?;
        }
        set_dir_modes(&tmp, &dir_mode()).await?;
        match tokio::fs::rename(&tmp, host).await {
            Ok(()) => Ok(()),
            // Another session unpacked the same version first.
            Err(_) if tokio::fs::try_exists(host).await.unwrap_or(false) => {
                let _ = tokio::fs::remove_dir_all(&tmp).await;
                Ok(())
            }
            Err(e) => Err(e.into()),
        }
    }
    .await;
    if result.is_err() {
        let _ = tokio::fs::remove_dir_all(&tmp).await;
    }
    result
}

async fn set_dir_modes(dir: &Path, mode: &std::fs::Permissions) -> std::io::Result<()> {
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        tokio::fs::set_permissions(&d, mode.clone()).await?;
        let mut rd = tokio::fs::read_dir(&d).await?;
        while let Some(e) = rd.next_entry().await? {
            if e.file_type().await?.is_dir() {
                stack.push(e.path());
            }
        }
    }
    Ok(())
}
