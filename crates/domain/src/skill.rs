//! Skills: the wire objects, and the `skills` entries of an agent.

use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::agent::{Skill, SkillKind};
use super::fields::{Obj, must_be, tag};
use super::invalid::{Invalid, Valid, join};
use super::tools::Tool;
use crate::type_tag;

type_tag!(
    /// `"type": "skill"`.
    SkillTag = "skill"
);
type_tag!(
    /// `"type": "skill_version"`.
    SkillVersionTag = "skill_version"
);
type_tag!(
    /// `"type": "skill_deleted"`.
    SkillDeletedTag = "skill_deleted"
);
type_tag!(
    /// `"type": "skill_version_deleted"`.
    SkillVersionDeletedTag = "skill_version_deleted"
);

/// Most skills one agent may carry (the upstream limit).
pub const MAX_AGENT_SKILLS: usize = 20;
/// What an agent's `version` means when none is pinned: the newest version.
pub const LATEST: &str = "latest";
/// The `source` of skills an operator installed under an Anthropic skill's id.
pub const ANTHROPIC_SOURCE: &str = "anthropic";
/// Where hosted sandboxes show a skill's files: `<SKILLS_ROOT>/<name>/`.
pub const SKILLS_ROOT: &str = "/mnt/skills";

/// Who published a skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct SkillSource {
    /// `custom` for skills uploaded to this server.
    #[serde(rename = "type")]
    pub kind: String,
}

/// A skill as every skill endpoint returns it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct SkillObject {
    #[serde(rename = "type")]
    pub tag: SkillTag,
    pub id: String,
    pub display_name: String,
    pub source: SkillSource,
    /// The newest version: what `latest` resolves to.
    pub latest_version_id: String,
    pub created_at: String,
    pub updated_at: String,
}

/// One immutable version of a skill.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, ToSchema)]
pub struct SkillVersionObject {
    #[serde(rename = "type")]
    pub tag: SkillVersionTag,
    pub id: String,
    pub skill_id: String,
    /// The slug from `SKILL.md`: the directory the files are mounted in.
    pub name: String,
    /// From `SKILL.md`: what the model reads to decide whether the skill fits a task.
    pub description: String,
    pub created_at: String,
}

/// The answer of `DELETE /v1/skills/{id}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DeletedSkill {
    pub id: String,
    #[serde(rename = "type")]
    pub tag: SkillDeletedTag,
}

/// The answer of `DELETE /v1/skills/{id}/versions/{version}`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct DeletedSkillVersion {
    pub id: String,
    #[serde(rename = "type")]
    pub tag: SkillVersionDeletedTag,
}

/// Why a `type: anthropic` skill that no operator installed is refused.
const ANTHROPIC_WHY: &str = "Anthropic's pre-built skills are not shipped with Mast; upload the bundle as a custom skill \
     (`POST /v1/skills` with the folder's files) and reference it as `{\"type\": \"custom\", \"skill_id\": \"skill_…\"}`, \
     or have the operator install it under this id (`mast skills install-anthropic DIR --id ID`)";

/// The refusal of Anthropic skill `skill_id` at `at` (an agent's `skills[i]`) when this
/// server has no bundle installed under that id.
pub fn anthropic_not_installed(at: &str, skill_id: &str) -> Invalid {
    Invalid::unsupported(
        &join(at, "type"),
        "anthropic_skills",
        &format!("Anthropic skill `{skill_id}` is not installed here: {ANTHROPIC_WHY}"),
    )
}

/// Reads an agent's `skills` list (absent or `null`: none). Entries are checked for shape
/// only here; whether they exist (custom ones uploaded, Anthropic ones installed by the
/// operator) is the store's question ([`Skill`] `version` is `latest` when none was pinned).
/// Skills are read with the `read` tool, so an agent with skills must have it enabled.
pub fn parse_agent_skills(at: &str, v: Option<&Value>, tools: &[Tool]) -> Valid<Vec<Skill>> {
    let list = match v {
        None | Some(Value::Null) => return Ok(vec![]),
        Some(Value::Array(a)) => a,
        Some(other) => return Err(must_be(at, "a list", other)),
    };
    if list.len() > MAX_AGENT_SKILLS {
        return Err(Invalid::new(format!(
            "`{at}` may hold at most {MAX_AGENT_SKILLS} skills, not {}",
            list.len()
        )));
    }
    let mut out: Vec<Skill> = Vec::with_capacity(list.len());
    for (i, entry) in list.iter().enumerate() {
        let here = format!("{at}[{i}]");
        let kind = tag(&here, entry, &["anthropic", "custom"])?;
        let o = Obj::new(&here, entry, "a skill", &["type", "skill_id", "version"])?;
        let skill_id = o.req_str("skill_id")?.to_string();
        let version = match o.raw("version") {
            None | Some(Value::Null) => LATEST.to_string(),
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
            Some(other) => {
                return Err(must_be(
                    &o.path("version"),
                    "a version id or `latest`",
                    other,
                ));
            }
        };
        if out.iter().any(|s| s.skill_id == skill_id) {
            return Err(Invalid::new(format!(
                "`{here}.skill_id`: skill `{skill_id}` is listed twice"
            )));
        }
        out.push(Skill {
            kind: if kind == "anthropic" {
                SkillKind::Anthropic
            } else {
                SkillKind::Custom
            },
            skill_id,
            version,
        });
    }
    require_read(at, &out, tools)?;
    Ok(out)
}

/// Skills are read with the `read` tool: an agent with skills must have it enabled.
pub fn require_read(at: &str, skills: &[Skill], tools: &[Tool]) -> Valid<()> {
    if !skills.is_empty() && !read_enabled(tools) {
        return Err(Invalid::new(format!(
            "`{at}` needs the `read` tool: the model reads a skill's SKILL.md with it; add an \
             `agent_toolset_20260401` to `tools` with `read` enabled"
        )));
    }
    Ok(())
}

fn read_enabled(tools: &[Tool]) -> bool {
    tools
        .iter()
        .any(|t| t.builtin_config("read").is_some_and(|(enabled, _)| enabled))
}

/// A mounted skill as the system prompt names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillNote {
    pub name: String,
    pub description: String,
    /// Where its files are, as the model addresses them.
    pub dir: String,
}

/// The system prompt's note on the agent's skills (progressive disclosure: the model sees
/// each skill's name, description and place, and reads its `SKILL.md` only when a task
/// fits); `None` without skills.
pub fn system_note(skills: &[SkillNote]) -> Option<String> {
    if skills.is_empty() {
        return None;
    }
    let mut s = String::from(
        "# Skills\n\nThese skills are installed, read-only. Each is a folder of instructions, scripts and \
         resources for one kind of task. When a task matches a skill's description, first read the \
         skill's SKILL.md with the `read` tool and follow it; read other files of the skill only as \
         SKILL.md points to them.\n",
    );
    for k in skills {
        s.push_str(&format!(
            "\n<skill>\n<name>{}</name>\n<description>{}</description>\n<location>{}/SKILL.md</location>\n</skill>\n",
            k.name, k.description, k.dir
        ));
    }
    Some(s)
}

/// `system` with the skills note appended (the note alone when there is no prompt).
pub fn with_note(system: Option<String>, note: Option<String>) -> Option<String> {
    match (system, note) {
        (s, None) => s,
        (None, Some(n)) => Some(n),
        (Some(s), Some(n)) if s.is_empty() => Some(n),
        (Some(s), Some(n)) => Some(format!("{s}\n\n{n}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::resolve_tools;
    use serde_json::json;

    fn toolset(read: bool) -> Vec<Tool> {
        resolve_tools(&[json!({"type": "agent_toolset_20260401",
            "configs": [{"name": "read", "enabled": read}]})])
        .unwrap()
    }

    #[test]
    fn custom_skills_default_to_latest_and_need_read() {
        let v = json!([{"type": "custom", "skill_id": "skill_1"}, {"type": "custom", "skill_id": "skill_2", "version": "v9"}]);
        let s = parse_agent_skills("skills", Some(&v), &toolset(true)).unwrap();
        assert_eq!(s[0].version, "latest");
        assert_eq!(s[1].version, "v9");
        let e = parse_agent_skills("skills", Some(&v), &toolset(false)).unwrap_err();
        assert!(e.message.contains("`read` tool"), "{}", e.message);
        assert!(parse_agent_skills("skills", Some(&v), &[]).is_err());
    }

    #[test]
    fn anthropic_entries_duplicates_and_unknown_keys() {
        let t = toolset(true);
        let s = parse_agent_skills(
            "skills",
            Some(&json!([{"type": "anthropic", "skill_id": "xlsx"}])),
            &t,
        )
        .unwrap();
        assert_eq!(s[0].kind, SkillKind::Anthropic);
        let e = anthropic_not_installed("skills[0]", "xlsx");
        assert!(e.message.contains("not shipped with Mast"), "{}", e.message);
        assert_eq!(e.details["field"], "skills[0].type");
        let dup = json!([{"type": "custom", "skill_id": "a"}, {"type": "custom", "skill_id": "a"}]);
        assert!(parse_agent_skills("skills", Some(&dup), &t).is_err());
        let typo = json!([{"type": "custom", "skill_id": "a", "versoin": "1"}]);
        assert!(parse_agent_skills("skills", Some(&typo), &t).is_err());
        assert!(
            parse_agent_skills("skills", Some(&json!([])), &[])
                .unwrap()
                .is_empty()
        );
    }

    #[test]
    fn the_note_names_each_skill_and_its_skill_md() {
        let n = system_note(&[SkillNote {
            name: "pdf".into(),
            description: "Fill PDF forms".into(),
            dir: "/mnt/skills/pdf".into(),
        }])
        .unwrap();
        assert!(n.contains("<name>pdf</name>"));
        assert!(n.contains("<location>/mnt/skills/pdf/SKILL.md</location>"));
        assert_eq!(with_note(None, None), None);
        assert_eq!(
            with_note(Some("be brief".into()), Some("N".into())).unwrap(),
            "be brief\n\nN"
        );
    }
}
