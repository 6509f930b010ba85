//! Vaults: named containers of credentials a session can be given by id
//! (`vault_ids`); the credentials themselves are in [`super::credential`].

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::invalid::{Invalid, Valid, check_len};
use super::metadata::{self, Metadata, MetadataPatch};
use super::patch::Patch;
use crate::type_tag;

type_tag!(
    /// `"type": "vault"`.
    VaultTag = "vault"
);

/// A Managed Agents `vault`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Vault {
    #[serde(rename = "type")]
    pub tag: VaultTag,
    pub id: String,
    pub display_name: String,
    pub metadata: Metadata,
    pub created_at: String,
    pub updated_at: String,
    pub archived_at: Option<String>,
}

/// `POST /v1/vaults` body. Unknown keys are refused (400 `unknown_field`).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "a vault object")]
pub struct VaultCreate {
    /// 1–255 characters.
    pub display_name: String,
    #[serde(default)]
    pub metadata: Option<Metadata>,
}

/// `POST /v1/vaults/{id}` body. Unknown keys are refused (400 `unknown_field`).
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields, expecting = "a vault update object")]
pub struct VaultUpdate {
    /// 1–255 characters; `null` keeps the stored name (a vault always has one).
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub display_name: Patch<String>,
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<MetadataPatch>,
}

/// Checks a display name: 1–255 characters, not only blanks.
pub fn check_display_name(name: &str) -> Valid<()> {
    check_len("display_name", name, 1, 255)?;
    if name.trim().is_empty() {
        return Err(Invalid::new("`display_name` must not be blank"));
    }
    Ok(())
}

/// The 400 for writing to an archived vault.
pub fn archived(id: &str, what: &str) -> Invalid {
    Invalid::with_code(
        "vault_archived",
        format!("vault `{id}` is archived: {what}"),
    )
}

impl VaultCreate {
    /// Validates the body into a new vault's name and metadata.
    pub fn into_parts(self) -> Valid<(String, Metadata)> {
        check_display_name(&self.display_name)?;
        let metadata = self.metadata.unwrap_or_default();
        metadata::validate(&metadata)?;
        Ok((self.display_name, metadata))
    }
}

impl VaultUpdate {
    /// Applies the update to `current`; `None` when it changes nothing. An archived vault
    /// is kept for reference and takes no changes.
    pub fn apply(self, current: &Vault) -> Valid<Option<(String, Metadata)>> {
        if current.archived_at.is_some() {
            return Err(archived(&current.id, "it cannot be updated"));
        }
        let name = match self.display_name {
            Patch::Value(n) => {
                check_display_name(&n)?;
                n
            }
            Patch::Absent | Patch::Null => current.display_name.clone(),
        };
        let metadata = match &self.metadata {
            Some(p) => metadata::apply_patch(&current.metadata, p, false)?,
            None => current.metadata.clone(),
        };
        Ok(
            (name != current.display_name || metadata != current.metadata)
                .then_some((name, metadata)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn vault() -> Vault {
        serde_json::from_value(json!({"type":"vault","id":"vlt_1","display_name":"a",
            "metadata":{"k":"v"},"created_at":"t","updated_at":"t","archived_at":null}))
        .unwrap()
    }

    #[test]
    fn create_checks_name_and_metadata() {
        let c = |v| {
            serde_json::from_value::<VaultCreate>(v)
                .unwrap()
                .into_parts()
        };
        assert!(c(json!({"display_name":"x"})).is_ok());
        assert!(c(json!({"display_name":""})).is_err());
        assert!(c(json!({"display_name":"x".repeat(256)})).is_err());
        assert!(
            serde_json::from_value::<VaultCreate>(json!({"display_name":"x","nme":1})).is_err()
        );
    }

    #[test]
    fn update_patches_and_refuses_archived() {
        let u = |v| serde_json::from_value::<VaultUpdate>(v).unwrap();
        let (n, m) = u(json!({"display_name":"b","metadata":{"k":null,"j":"w"}}))
            .apply(&vault())
            .unwrap()
            .unwrap();
        assert_eq!(n, "b");
        assert_eq!(m.get("j").map(String::as_str), Some("w"));
        assert!(!m.contains_key("k"));
        assert_eq!(
            u(json!({"display_name":null})).apply(&vault()).unwrap(),
            None
        );
        let mut a = vault();
        a.archived_at = Some("t".into());
        assert_eq!(
            u(json!({})).apply(&a).unwrap_err().code,
            Some("vault_archived")
        );
    }
}
