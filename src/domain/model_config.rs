//! An agent's `model`: the id plus effort, speed and inference geography (API.md §2.1).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::invalid::{Invalid, Valid, check_len};
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

/// Effort as a request may send it: `"high"` or `{"type": "high"}`.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum EffortParam {
    Level(EffortLevel),
    Object(Effort),
}

impl EffortParam {
    fn level(&self) -> EffortLevel {
        match self {
            EffortParam::Level(l) => *l,
            EffortParam::Object(e) => e.level,
        }
    }
}

/// Model configuration as a request may send it.
#[derive(Debug, Clone, Deserialize)]
pub struct ModelConfigParams {
    pub id: String,
    #[serde(default)]
    pub effort: Patch<EffortParam>,
    #[serde(default)]
    pub speed: Option<Speed>,
    #[serde(default)]
    pub inference_geo: Option<String>,
}

/// `model` in a request body: a bare id or a configuration object.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum ModelParam {
    Id(String),
    Config(ModelConfigParams),
}

/// The effort a model gets when none is chosen.
pub fn default_effort(_model_id: &str) -> Effort {
    Effort {
        level: EffortLevel::High,
    }
}

impl ModelParam {
    /// Resolves to the stored form. `previous` is the stored config on update: an omitted
    /// effort keeps the stored level when the model id is unchanged (API.md §2.1).
    pub fn resolve(&self, previous: Option<&ModelConfig>) -> Valid<ModelConfig> {
        let params = match self {
            ModelParam::Id(id) => ModelConfigParams {
                id: id.clone(),
                effort: Patch::Absent,
                speed: None,
                inference_geo: None,
            },
            ModelParam::Config(c) => c.clone(),
        };
        check_len("model.id", params.id.trim(), 1, 256)?;
        if let Some(geo) = &params.inference_geo {
            check_len("model.inference_geo", geo, 1, 64)?;
        }
        let effort = match &params.effort {
            Patch::Value(e) => Effort { level: e.level() },
            Patch::Null => default_effort(&params.id),
            Patch::Absent => match previous {
                Some(p) if p.id == params.id => {
                    p.effort.unwrap_or_else(|| default_effort(&params.id))
                }
                _ => default_effort(&params.id),
            },
        };
        Ok(ModelConfig {
            id: params.id.trim().to_string(),
            effort: Some(effort),
            speed: Some(params.speed.unwrap_or_default()),
            inference_geo: params.inference_geo,
        })
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
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn bare_id_gets_defaults() {
        let m = parse(serde_json::json!("claude-opus-4-7"))
            .resolve(None)
            .unwrap();
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
        let stored = parse(serde_json::json!({"id":"a","effort":"low"}))
            .resolve(None)
            .unwrap();
        assert_eq!(stored.effort.unwrap().level, EffortLevel::Low);
        let same = parse(serde_json::json!({"id":"a"}))
            .resolve(Some(&stored))
            .unwrap();
        assert_eq!(same.effort.unwrap().level, EffortLevel::Low);
        let changed = parse(serde_json::json!("b"))
            .resolve(Some(&stored))
            .unwrap();
        assert_eq!(changed.effort.unwrap().level, EffortLevel::High);
        let object = parse(serde_json::json!({"id":"a","effort":{"type":"max"}}))
            .resolve(None)
            .unwrap();
        assert_eq!(object.effort.unwrap().level, EffortLevel::Max);
    }
}
