//! Records of the Skills API (`/v1/skills`, migration 0011): skills, their versions and each
//! version's files.

use mast_domain::invalid::Invalid;
use mast_domain::skill_bundle::BundleFile;
use mast_domain::time::Micros;

/// One skill's row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillRecord {
    /// `skill_…`.
    pub id: String,
    pub workspace_id: String,
    pub display_name: String,
    /// `custom` (uploaded through the API).
    pub source: String,
    /// The slug every version shares (from the first version's SKILL.md).
    pub name: String,
    pub latest_version_id: String,
    pub created_at: Micros,
    pub updated_at: Micros,
}

/// One immutable version's row (its files apart).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillVersionRecord {
    /// `skillver_…`: ids sort in creation order, so the greatest is the newest.
    pub id: String,
    pub skill_id: String,
    pub name: String,
    pub description: String,
    pub created_at: Micros,
}

/// What deleting a version did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SkillVersionDelete {
    Deleted,
    /// No such version of a skill of the workspace.
    NotFound,
    /// It is the skill's only version: a skill always has one (delete the skill instead).
    Last,
}

/// A version with its files, as a new skill or a new version of one stores it.
#[derive(Debug, Clone)]
pub struct NewSkillVersion {
    pub version: SkillVersionRecord,
    pub files: Vec<BundleFile>,
}

/// A version whose SKILL.md names another skill.
pub fn wrong_name(s: &SkillRecord, got: &str) -> Invalid {
    Invalid::new(format!(
        "this bundle's SKILL.md names the skill `{got}`, but skill `{}` is `{}`: every version of a skill keeps its name",
        s.id, s.name
    ))
}
