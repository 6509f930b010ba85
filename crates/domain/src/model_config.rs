//! An agent's `model`: the id plus effort, speed and inference geography.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::fields::{Obj, must_be, one_of, quoted, tag};
use super::invalid::{Invalid, Valid, check_len, join};
use super::patch::Patch;

/// Reasoning effort level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum EffortLevel {
    Low,
    Medium,
    High,
    Xhigh,
    Max,
}

/// Effort in its response (object) form: `{"type": "high"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Effort {
    #[serde(rename = "type")]
    pub level: EffortLevel,
}

/// Output speed tier.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Speed {
    #[default]
    Standard,
    Fast,
}

/// The resolved model configuration stored on agents and sessions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ModelConfig {
    /// Model id, e.g. `claude-opus-4-7` or `mast-scripted`.
    pub id: String,
    pub effort: Option<Effort>,
    pub speed: Option<Speed>,
    pub inference_geo: Option<String>,
}

/// The effort levels, in their wire names.
const EFFORT_LEVELS: [&str; 5] = ["low", "medium", "high", "xhigh", "max"];

fn effort_level(path: &str, name: &str) -> Valid<EffortLevel> {
    Ok(match name {
        "low" => EffortLevel::Low,
        "medium" => EffortLevel::Medium,
        "high" => EffortLevel::High,
        "xhigh" => EffortLevel::Xhigh,
        "max" => EffortLevel::Max,
        other => return Err(one_of(path, &EFFORT_LEVELS, other)),
    })
}

/// `model` as a request sends it: a bare id, or an object with `id` and optional `effort`
/// (`"high"` or `{"type": "high"}`), `speed` and `inference_geo`.
#[derive(Debug, Clone, PartialEq)]
pub struct ModelParam {
    pub id: String,
    pub effort: Patch<EffortLevel>,
    pub speed: Option<Speed>,
    pub inference_geo: Option<String>,
}

/// The effort a model gets when none is chosen.
pub fn default_effort(_model_id: &str) -> Effort {
    Effort {
        level: EffortLevel::High,
    }
}

impl ModelParam {
    /// Reads and checks the `model` value at `at`.
    pub fn parse(at: &str, v: &Value) -> Valid<Self> {
        let param = match v {
            Value::String(id) => ModelParam {
                id: id.clone(),
                effort: Patch::Absent,
                speed: None,
                inference_geo: None,
            },
            Value::Object(_) => {
                let o = Obj::new(
                    at,
                    v,
                    "a model config",
                    &["id", "effort", "speed", "inference_geo"],
                )?;
                let id = o
                    .str("id")?
                    .ok_or_else(|| Invalid::new(format!("`{}` is required", o.path("id"))))?;
                let effort_at = o.path("effort");
                let effort = match o.raw("effort") {
                    None => Patch::Absent,
                    Some(Value::Null) => Patch::Null,
                    Some(Value::String(level)) => Patch::Value(effort_level(&effort_at, level)?),
                    Some(e @ Value::Object(_)) => {
                        let levels = EFFORT_LEVELS;
                        let level = tag(&effort_at, e, &levels)?;
                        Obj::new(&effort_at, e, "an effort", &["type"])?;
                        Patch::Value(effort_level(&join(&effort_at, "type"), level)?)
                    }
                    Some(other) => {
                        return Err(must_be(
                            &effort_at,
                            &format!(
                                "one of {} or an object {{\"type\": <level>}}",
                                quoted(&EFFORT_LEVELS)
                            ),
                            other,
                        ));
                    }
                };
                let speed = match o.str("speed")? {
                    None => None,
                    Some("standard") => Some(Speed::Standard),
                    Some("fast") => Some(Speed::Fast),
                    Some(other) => {
                        return Err(one_of(&o.path("speed"), &["standard", "fast"], other));
                    }
                };
                ModelParam {
                    id: id.to_string(),
                    effort,
                    speed,
                    inference_geo: o.str("inference_geo")?.map(str::to_string),
                }
            }
            other => {
                return Err(must_be(
                    at,
                    "a model id string or an object with `id`",
                    other,
                ));
            }
        };
        let id_at = if v.is_string() {
            at.to_string()
        } else {
            join(at, "id")
        };
        check_len(&id_at, param.id.trim(), 1, 256)?;
        if let Some(geo) = &param.inference_geo {
            check_len(&join(at, "inference_geo"), geo, 1, 64)?;
        }
        Ok(param)
    }

    /// Resolves to the stored form. `previous` is the stored config on update: an omitted
    /// effort keeps the stored level when the model id is unchanged, as upstream does.
    pub fn resolve(&self, previous: Option<&ModelConfig>) -> ModelConfig {
        let effort = match &self.effort {
            Patch::Value(level) => Effort { level: *level },
            Patch::Null => default_effort(&self.id),
            Patch::Absent => match previous {
                Some(p) if p.id == self.id => p.effort.unwrap_or_else(|| default_effort(&self.id)),
                _ => default_effort(&self.id),
            },
        };
        ModelConfig {
            id: self.id.trim().to_string(),
            effort: Some(effort),
            speed: Some(self.speed.unwrap_or_default()),
            inference_geo: self.inference_geo.clone(),
        }
    }
}

impl ModelConfig {
    /// Fails with a clear message when `id` is empty; used where a model override is required.
    pub fn require_id(id: &str) -> Valid<()> {
        if id.trim().is_empty() {
            return Err(Invalid::new("`model.id` must not be empty"));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(v: serde_json::Value) -> ModelParam {
        ModelParam::parse("model", &v).unwrap()
    }

    #[test]
    fn bare_id_gets_defaults() {
        let m = parse(serde_json::json!("claude-opus-4-7")).resolve(None);
        assert_eq!(
            m.effort,
            Some(Effort {
                level: EffortLevel::High
            })
        );
        assert_eq!(m.speed, Some(Speed::Standard));
    }

    #[test]
    fn effort_kept_on_same_model_and_reset_on_change() {
        let stored = parse(serde_json::json!({"id":"a","effort":"low"})).resolve(None);
        assert_eq!(stored.effort.unwrap().level, EffortLevel::Low);
        let same = parse(serde_json::json!({"id":"a"})).resolve(Some(&stored));
        assert_eq!(same.effort.unwrap().level, EffortLevel::Low);
        let changed = parse(serde_json::json!("b")).resolve(Some(&stored));
        assert_eq!(changed.effort.unwrap().level, EffortLevel::High);
        let object = parse(serde_json::json!({"id":"a","effort":{"type":"max"}})).resolve(None);
        assert_eq!(object.effort.unwrap().level, EffortLevel::Max);
    }

    #[test]
    fn shape_errors_name_the_path() {
        let err = |v: serde_json::Value| ModelParam::parse("model", &v).unwrap_err().message;
        assert_eq!(
            err(serde_json::json!(5)),
            "`model` must be a model id string or an object with `id` (got an integer)"
        );
        assert_eq!(
            err(serde_json::json!({"effort": "low"})),
            "`model.id` is required"
        );
        assert!(
            err(serde_json::json!({"id": "a", "efort": "low"})).contains("did you mean `effort`?")
        );
        assert!(
            err(serde_json::json!({"id": "a", "effort": "extreme"}))
                .contains("`model.effort` must be one of")
        );
        assert!(
            err(serde_json::json!({"id": "a", "speed": "ludicrous"})).contains("`model.speed`")
        );
        assert_eq!(err(serde_json::json!("")), "`model` must not be empty");
    }
}
