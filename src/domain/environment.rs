//! Environments (API.md §2.2): where sessions run — `cloud` (tools run by this server in a
//! sandbox) or `self_hosted` (tools run by the user's workers).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::invalid::{Invalid, Valid, check_len};
use super::metadata::{self, Metadata, MetadataPatch};
use super::patch::Patch;
use crate::type_tag;

type_tag!(
    /// `"type": "environment"`.
    EnvironmentTag = "environment"
);

type_tag!(
    /// `"type": "packages"`.
    PackagesTag = "packages"
);

/// Network access for a cloud environment's sandbox.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Networking {
    Unrestricted,
    Limited {
        allowed_hosts: Vec<String>,
        allow_package_managers: bool,
        allow_mcp_servers: bool,
    },
}

/// Packages installed into a cloud environment, by manager.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Packages {
    #[serde(rename = "type")]
    pub tag: PackagesTag,
    pub apt: Vec<String>,
    pub cargo: Vec<String>,
    pub gem: Vec<String>,
    pub go: Vec<String>,
    pub npm: Vec<String>,
    pub pip: Vec<String>,
}

impl Packages {
    fn is_empty(&self) -> bool {
        self.apt.is_empty()
            && self.cargo.is_empty()
            && self.gem.is_empty()
            && self.go.is_empty()
            && self.npm.is_empty()
            && self.pip.is_empty()
    }
}

/// An environment's resolved configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum EnvironmentConfig {
    Cloud {
        networking: Networking,
        packages: Packages,
    },
    SelfHosted,
}

impl EnvironmentConfig {
    /// The default for a new environment: cloud with unrestricted networking.
    pub fn default_cloud() -> Self {
        EnvironmentConfig::Cloud {
            networking: Networking::Unrestricted,
            packages: Packages::default(),
        }
    }

    /// The config type's wire name.
    pub fn kind(&self) -> &'static str {
        match self {
            EnvironmentConfig::Cloud { .. } => "cloud",
            EnvironmentConfig::SelfHosted => "self_hosted",
        }
    }
}

/// Who an environment is visible to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    Organization,
    Account,
}

/// A Managed Agents `environment`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Environment {
    #[serde(rename = "type")]
    pub tag: EnvironmentTag,
    pub id: String,
    pub name: String,
    pub description: Option<String>,
    pub config: EnvironmentConfig,
    pub metadata: Metadata,
    pub scope: Option<Scope>,
    pub created_at: String,
    pub updated_at: String,
    pub archived_at: Option<String>,
}

/// `config.networking` as a request sends it.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum NetworkingParams {
    Unrestricted,
    Limited {
        #[serde(default)]
        allowed_hosts: Option<Vec<String>>,
        #[serde(default)]
        allow_package_managers: Option<bool>,
        #[serde(default)]
        allow_mcp_servers: Option<bool>,
    },
}

/// `config.packages` as a request sends it.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct PackagesParams {
    #[serde(default, rename = "type")]
    tag: Option<String>,
    #[serde(default)]
    apt: Option<Vec<String>>,
    #[serde(default)]
    cargo: Option<Vec<String>>,
    #[serde(default)]
    gem: Option<Vec<String>>,
    #[serde(default)]
    go: Option<Vec<String>>,
    #[serde(default)]
    npm: Option<Vec<String>>,
    #[serde(default)]
    pip: Option<Vec<String>>,
}

/// `config` as a request sends it.
#[derive(Debug, Clone, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ConfigParams {
    Cloud {
        #[serde(default)]
        networking: Option<NetworkingParams>,
        #[serde(default)]
        packages: Option<PackagesParams>,
    },
    SelfHosted,
}

/// `POST /v1/environments` body.
#[derive(Debug, Clone, Deserialize, ToSchema)]
pub struct EnvironmentCreate {
    pub name: String,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub config: Option<ConfigParams>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub metadata: Option<Metadata>,
    #[serde(default)]
    pub scope: Option<Scope>,
}

/// `POST /v1/environments/{id}` body.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
pub struct EnvironmentUpdate {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub description: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<MetadataPatch>,
    #[serde(default)]
    pub scope: Option<Scope>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub config: Option<ConfigParams>,
}

fn check_hosts(hosts: &[String]) -> Valid<()> {
    if hosts.len() > 256 {
        return Err(Invalid::new(
            "`config.networking.allowed_hosts` has more than 256 entries",
        ));
    }
    for h in hosts {
        let bare = h.strip_prefix("*.").unwrap_or(h);
        let ok = !bare.is_empty()
            && bare.len() <= 253
            && bare
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'));
        if !ok {
            return Err(Invalid::new(format!(
                "`config.networking.allowed_hosts` entry `{h}` is not a hostname or IP address"
            )));
        }
    }
    Ok(())
}

fn resolve_packages(p: PackagesParams) -> Valid<Packages> {
    if let Some(t) = &p.tag
        && t != "packages"
    {
        return Err(Invalid::new("`config.packages.type` must be `packages`"));
    }
    let lists = [&p.apt, &p.cargo, &p.gem, &p.go, &p.npm, &p.pip];
    for spec in lists.into_iter().flatten().flatten() {
        if spec.trim().is_empty() || spec.len() > 256 || spec.contains(['\n', '\0']) {
            return Err(Invalid::new(format!(
                "`config.packages` entry `{spec}` is not a package spec"
            )));
        }
    }
    Ok(Packages {
        tag: PackagesTag::Tag,
        apt: p.apt.unwrap_or_default(),
        cargo: p.cargo.unwrap_or_default(),
        gem: p.gem.unwrap_or_default(),
        go: p.go.unwrap_or_default(),
        npm: p.npm.unwrap_or_default(),
        pip: p.pip.unwrap_or_default(),
    })
}

fn resolve_networking(n: NetworkingParams) -> Valid<Networking> {
    Ok(match n {
        NetworkingParams::Unrestricted => Networking::Unrestricted,
        NetworkingParams::Limited {
            allowed_hosts,
            allow_package_managers,
            allow_mcp_servers,
        } => {
            let allowed_hosts = allowed_hosts.unwrap_or_default();
            check_hosts(&allowed_hosts)?;
            Networking::Limited {
                allowed_hosts,
                allow_package_managers: allow_package_managers.unwrap_or(false),
                allow_mcp_servers: allow_mcp_servers.unwrap_or(false),
            }
        }
    })
}

/// Resolves a sent config, keeping stored cloud fields the body omits (on update).
fn resolve_config(
    p: Option<ConfigParams>,
    stored: Option<&EnvironmentConfig>,
) -> Valid<EnvironmentConfig> {
    let config = match p {
        None => {
            return Ok(stored
                .cloned()
                .unwrap_or_else(EnvironmentConfig::default_cloud));
        }
        Some(ConfigParams::SelfHosted) => EnvironmentConfig::SelfHosted,
        Some(ConfigParams::Cloud {
            networking,
            packages,
        }) => {
            let (old_net, old_pkgs) = match stored {
                Some(EnvironmentConfig::Cloud {
                    networking,
                    packages,
                }) => (Some(networking.clone()), Some(packages.clone())),
                _ => (None, None),
            };
            let networking = match networking {
                Some(n) => resolve_networking(n)?,
                None => old_net.unwrap_or(Networking::Unrestricted),
            };
            let packages = match packages {
                Some(p) => resolve_packages(p)?,
                None => old_pkgs.unwrap_or_default(),
            };
            if let Networking::Limited {
                allow_package_managers: false,
                ..
            } = &networking
                && !packages.is_empty()
            {
                return Err(Invalid::new(
                    "`config.packages` needs `config.networking.allow_package_managers: true` under limited networking",
                ));
            }
            EnvironmentConfig::Cloud {
                networking,
                packages,
            }
        }
    };
    if let Some(stored) = stored
        && stored.kind() != config.kind()
    {
        return Err(Invalid::with_code(
            "invalid_config_type_change",
            format!(
                "`config.type` cannot change from `{}` to `{}`",
                stored.kind(),
                config.kind()
            ),
        ));
    }
    Ok(config)
}

fn check_env_name(name: &str) -> Valid<()> {
    check_len("name", name.trim(), 1, 256)
}

/// The resolved content of a new or updated environment.
#[derive(Debug, Clone, PartialEq)]
pub struct EnvironmentSpec {
    pub name: String,
    pub description: Option<String>,
    pub config: EnvironmentConfig,
    pub metadata: Metadata,
    pub scope: Option<Scope>,
}

impl EnvironmentCreate {
    /// Validates the body and fills in defaults.
    pub fn into_spec(self) -> Valid<EnvironmentSpec> {
        check_env_name(&self.name)?;
        if let Some(d) = &self.description {
            check_len("description", d, 0, 2048)?;
        }
        let metadata = self.metadata.unwrap_or_default();
        metadata::validate(&metadata)?;
        Ok(EnvironmentSpec {
            name: self.name.trim().to_string(),
            description: self.description,
            config: resolve_config(self.config, None)?,
            metadata,
            scope: Some(self.scope.unwrap_or(Scope::Organization)),
        })
    }
}

impl EnvironmentUpdate {
    /// Applies the update to the stored environment (which must not be archived).
    pub fn apply(self, current: &Environment) -> Valid<EnvironmentSpec> {
        if current.archived_at.is_some() {
            return Err(Invalid::with_code(
                "environment_archived",
                "archived environments cannot be updated",
            ));
        }
        let name = match self.name {
            Some(n) => {
                check_env_name(&n)?;
                n.trim().to_string()
            }
            None => current.name.clone(),
        };
        let description = match self.description {
            Patch::Absent => current.description.clone(),
            Patch::Null => None,
            Patch::Value(d) => {
                check_len("description", &d, 0, 2048)?;
                Some(d)
            }
        };
        let metadata = match &self.metadata {
            Some(p) => metadata::apply_patch(&current.metadata, p, true)?,
            None => current.metadata.clone(),
        };
        Ok(EnvironmentSpec {
            name,
            description,
            config: resolve_config(self.config, Some(&current.config))?,
            metadata,
            scope: self.scope.or(current.scope),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn create(v: serde_json::Value) -> Valid<EnvironmentSpec> {
        serde_json::from_value::<EnvironmentCreate>(v)
            .unwrap()
            .into_spec()
    }

    #[test]
    fn default_config_is_cloud_unrestricted_with_all_arrays() {
        let s = create(json!({"name":"e"})).unwrap();
        let v = serde_json::to_value(&s.config).unwrap();
        assert_eq!(
            v,
            json!({"type":"cloud","networking":{"type":"unrestricted"},
            "packages":{"type":"packages","apt":[],"cargo":[],"gem":[],"go":[],"npm":[],"pip":[]}})
        );
    }

    #[test]
    fn limited_packages_need_package_managers() {
        assert!(create(json!({"name":"e","config":{"type":"cloud","networking":{"type":"limited"},"packages":{"pip":["x"]}}})).is_err());
        assert!(create(json!({"name":"e","config":{"type":"cloud","networking":{"type":"limited","allow_package_managers":true},"packages":{"pip":["x"]}}})).is_ok());
    }

    #[test]
    fn update_keeps_omitted_cloud_fields_and_refuses_type_change() {
        let s = create(json!({"name":"e","config":{"type":"cloud","networking":{"type":"limited","allowed_hosts":["a.com"]}}})).unwrap();
        let env = Environment {
            tag: EnvironmentTag::Tag,
            id: "env_1".into(),
            name: s.name,
            description: None,
            config: s.config.clone(),
            metadata: Metadata::new(),
            scope: s.scope,
            created_at: String::new(),
            updated_at: String::new(),
            archived_at: None,
        };
        let u: EnvironmentUpdate =
            serde_json::from_value(json!({"config":{"type":"cloud","packages":{"apt":["x"]}}}))
                .unwrap();
        assert!(
            u.apply(&env).is_err(),
            "limited networking kept, so packages need package managers"
        );
        let u: EnvironmentUpdate =
            serde_json::from_value(json!({"config":{"type":"cloud"}})).unwrap();
        assert_eq!(u.apply(&env).unwrap().config, s.config);
        let u: EnvironmentUpdate =
            serde_json::from_value(json!({"config":{"type":"self_hosted"}})).unwrap();
        assert_eq!(
            u.apply(&env).unwrap_err().code,
            Some("invalid_config_type_change")
        );
    }
}
