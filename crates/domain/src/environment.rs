//! Environments: where sessions run — `cloud` (tools run by this server in a
//! sandbox) or `self_hosted` (tools run by the user's workers).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::fields::{Obj, must_be, one_of, tag};
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

/// `POST /v1/environments` body. A key unknown at any depth is refused (400
/// `unknown_field`).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "an environment object")]
pub struct EnvironmentCreate {
    pub name: String,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub config: Option<Value>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub metadata: Option<Metadata>,
    /// Only `organization` is supported.
    #[serde(default)]
    #[schema(value_type = Option<Scope>)]
    pub scope: Option<Value>,
}

/// `POST /v1/environments/{id}` body. A key unknown at any depth is refused (400
/// `unknown_field`).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "an environment update object")]
pub struct EnvironmentUpdate {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub description: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<MetadataPatch>,
    /// Only `organization` is supported.
    #[serde(default)]
    #[schema(value_type = Option<Scope>)]
    pub scope: Option<Value>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub config: Option<Value>,
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

/// The package managers of `config.packages`, in wire order.
const MANAGERS: [&str; 6] = ["apt", "cargo", "gem", "go", "npm", "pip"];

/// Packages one manager may list.
const MAX_PACKAGES: usize = 100;

/// Checks one package spec: the manager's own syntax (`pandas==2.2.0`, `left-pad@1.3.0`,
/// `hello=2.10-3`) is passed through, but never whitespace, quotes or shell characters, and
/// never a leading `-`, which an installer would read as an option.
fn check_spec(at: &str, spec: &str) -> Valid<()> {
    let ok = !spec.is_empty()
        && spec.len() <= 256
        && !spec.starts_with('-')
        && spec.chars().all(|c| {
            c.is_ascii_alphanumeric()
                || matches!(
                    c,
                    '.' | '-'
                        | '_'
                        | '='
                        | '<'
                        | '>'
                        | '!'
                        | '~'
                        | '@'
                        | '/'
                        | ':'
                        | '+'
                        | '['
                        | ']'
                        | ','
                        | '*'
                        | '^'
                )
        });
    if ok {
        Ok(())
    } else {
        Err(Invalid::new(format!(
            "`{at}` entry `{spec}` is not a package spec (a name with the manager's version syntax, 1 to 256 characters, no spaces or quotes, not starting with `-`)"
        )))
    }
}

/// Reads `config.packages`: per manager a list of specs, installed into the environment's
/// package layer (see `tools::packages`).
fn parse_packages(at: &str, v: &Value) -> Valid<Packages> {
    let mut known = vec!["type"];
    known.extend(MANAGERS);
    let o = Obj::new(at, v, "a packages config", &known)?;
    if let Some(t) = o.str("type")?
        && t != "packages"
    {
        return Err(Invalid::new(format!("`{at}.type` must be `packages`")));
    }
    let mut lists: Vec<Vec<String>> = Vec::new();
    for manager in MANAGERS {
        let list = o.strings(manager)?.unwrap_or_default();
        let path = o.path(manager);
        if list.len() > MAX_PACKAGES {
            return Err(Invalid::new(format!(
                "`{path}` has more than {MAX_PACKAGES} entries"
            )));
        }
        for spec in &list {
            check_spec(&path, spec)?;
        }
        lists.push(list);
    }
    let mut it = lists.into_iter();
    let mut next = || it.next().unwrap_or_default();
    Ok(Packages {
        tag: PackagesTag::Tag,
        apt: next(),
        cargo: next(),
        gem: next(),
        go: next(),
        npm: next(),
        pip: next(),
    })
}

impl Packages {
    /// Whether any manager lists a package.
    pub fn any(&self) -> bool {
        [
            &self.apt,
            &self.cargo,
            &self.gem,
            &self.go,
            &self.npm,
            &self.pip,
        ]
        .iter()
        .any(|l| !l.is_empty())
    }
}

fn parse_networking(at: &str, v: &Value) -> Valid<Networking> {
    match tag(at, v, &["unrestricted", "limited"])? {
        "unrestricted" => {
            Obj::new(at, v, "an unrestricted network config", &["type"])?;
            Ok(Networking::Unrestricted)
        }
        _ => {
            let o = Obj::new(
                at,
                v,
                "a limited network config",
                &[
                    "type",
                    "allowed_hosts",
                    "allow_package_managers",
                    "allow_mcp_servers",
                ],
            )?;
            let allowed_hosts = o.strings("allowed_hosts")?.unwrap_or_default();
            check_hosts(&allowed_hosts)?;
            Ok(Networking::Limited {
                allowed_hosts,
                allow_package_managers: o.bool("allow_package_managers")?.unwrap_or(false),
                allow_mcp_servers: o.bool("allow_mcp_servers")?.unwrap_or(false),
            })
        }
    }
}

/// Resolves a sent `config`, keeping stored cloud fields the body omits (on update).
fn resolve_config(
    v: Option<&Value>,
    stored: Option<&EnvironmentConfig>,
) -> Valid<EnvironmentConfig> {
    let at = "config";
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Ok(stored
            .cloned()
            .unwrap_or_else(EnvironmentConfig::default_cloud));
    };
    let config = match tag(at, v, &["cloud", "self_hosted"])? {
        "self_hosted" => {
            Obj::new(at, v, "a self-hosted environment config", &["type"])?;
            EnvironmentConfig::SelfHosted
        }
        _ => {
            let o = Obj::new(
                at,
                v,
                "a cloud environment config",
                &["type", "networking", "packages"],
            )?;
            let (old_net, old_pkgs) = match stored {
                Some(EnvironmentConfig::Cloud {
                    networking,
                    packages,
                }) => (Some(networking.clone()), Some(packages.clone())),
                _ => (None, None),
            };
            let networking = match o.get("networking") {
                Some(n) => parse_networking(&o.path("networking"), n)?,
                None => old_net.unwrap_or(Networking::Unrestricted),
            };
            let packages = match o.get("packages").filter(|p| !p.is_null()) {
                Some(p) => parse_packages(&o.path("packages"), p)?,
                None => old_pkgs.unwrap_or_default(),
            };
            if packages.any()
                && let Networking::Limited {
                    allow_package_managers: false,
                    ..
                } = networking
            {
                return Err(Invalid::new(
                    "`config.packages` needs `config.networking.allow_package_managers: true` under `limited` networking: installs reach the package registries",
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

/// Reads `scope`. Environments are visible to the whole workspace, so an `account` scope
/// (visible to its creator only) would promise what is not kept: refused.
fn parse_scope(v: Option<&Value>) -> Valid<Option<Scope>> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s == "organization" => Ok(Some(Scope::Organization)),
        Some(Value::String(s)) if s == "account" => Err(Invalid::unsupported(
            "scope",
            "account_scope",
            "environments are visible to the whole workspace; send `organization` or omit `scope`",
        )),
        Some(Value::String(s)) => Err(one_of("scope", &["organization", "account"], s)),
        Some(other) => Err(must_be("scope", "`organization` or `account`", other)),
    }
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
        let scope = parse_scope(self.scope.as_ref())?;
        Ok(EnvironmentSpec {
            name: self.name.trim().to_string(),
            description: self.description,
            config: resolve_config(self.config.as_ref(), None)?,
            metadata,
            scope: Some(scope.unwrap_or(Scope::Organization)),
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
        let scope = parse_scope(self.scope.as_ref())?;
        Ok(EnvironmentSpec {
            name,
            description,
            config: resolve_config(self.config.as_ref(), Some(&current.config))?,
            metadata,
            scope: scope.or(current.scope),
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
    fn packages_are_kept_checked_and_need_package_managers_under_limited() {
        let s = create(json!({"name":"e","config":{"type":"cloud","packages":{"pip":["six==1.16.0"],"npm":["is-number@7"]}}}))
            .unwrap();
        let EnvironmentConfig::Cloud { packages, .. } = s.config else {
            panic!("cloud")
        };
        assert_eq!(packages.pip, vec!["six==1.16.0"]);
        assert_eq!(packages.npm, vec!["is-number@7"]);
        assert!(create(json!({"name":"e","config":{"type":"cloud","packages":{"type":"packages","apt":[],"pip":null}}})).is_ok());
        for bad in ["--index-url=http://x", "a b", "x;rm", "it's", ""] {
            let e = create(json!({"name":"e","config":{"type":"cloud","packages":{"pip":[bad]}}}));
            assert!(e.is_err(), "{bad}");
        }
        let e = create(json!({"name":"e","config":{"type":"cloud","networking":{"type":"limited"},"packages":{"pip":["six"]}}}))
            .unwrap_err();
        assert!(
            e.message.contains("allow_package_managers"),
            "{}",
            e.message
        );
        assert!(create(json!({"name":"e","config":{"type":"cloud","networking":{"type":"limited","allow_package_managers":true},"packages":{"pip":["six"]}}})).is_ok());
    }

    #[test]
    fn config_keys_are_checked_at_every_level() {
        let field = |v| create(v).unwrap_err().details["field"].clone();
        assert_eq!(
            field(json!({"name":"e","config":{"type":"cloud","netwrking":{"type":"limited"}}})),
            "config.netwrking"
        );
        assert_eq!(
            field(
                json!({"name":"e","config":{"type":"cloud","networking":{"type":"unrestricted","allowed_hosts":[]}}})
            ),
            "config.networking.allowed_hosts"
        );
        assert_eq!(
            field(json!({"name":"e","config":{"type":"self_hosted","packages":{}}})),
            "config.packages"
        );
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
