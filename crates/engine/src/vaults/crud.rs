//! Vaults themselves, and the credential operations that touch no secret: create, read,
//! update, list, archive and delete. An archived vault takes no changes; deleting a vault
//! deletes its credentials.

use super::Vaults;
use crate::ops::OpError;
use mast_domain::credential::Credential;
use mast_domain::ids::new_id;
use mast_domain::query::Scan;
use mast_domain::time;
use mast_domain::vault::{Vault, VaultCreate, VaultTag, VaultUpdate};

impl Vaults {
    /// Saves a new vault.
    pub async fn create_vault(&self, ws: &str, create: VaultCreate) -> Result<Vault, OpError> {
        let (display_name, metadata) = create.into_parts()?;
        let now = self.store.clock().now();
        let vault = Vault {
            tag: VaultTag::Tag,
            id: new_id("vlt"),
            display_name,
            metadata,
            created_at: time::format(now),
            updated_at: time::format(now),
            archived_at: None,
        };
        self.store.insert_vault(ws, &vault, now).await?;
        Ok(vault)
    }

    /// One vault of the workspace.
    pub async fn get_vault(&self, ws: &str, id: &str) -> Result<Vault, OpError> {
        self.vault(ws, id).await
    }

    /// Applies `update` (a patch); an update that changes nothing writes nothing.
    pub async fn update_vault(
        &self,
        ws: &str,
        id: &str,
        update: VaultUpdate,
    ) -> Result<Vault, OpError> {
        let mut vault = self.vault(ws, id).await?;
        let Some((display_name, metadata)) = update.apply(&vault)? else {
            return Ok(vault);
        };
        let now = self.store.clock().now();
        vault.display_name = display_name;
        vault.metadata = metadata;
        vault.updated_at = time::format(now);
        self.store.update_vault(ws, &vault, now, false).await?;
        Ok(vault)
    }

    /// A page of the workspace's vaults.
    pub async fn list_vaults(
        &self,
        ws: &str,
        include_archived: bool,
        scan: &Scan<String>,
    ) -> Result<Vec<Vault>, OpError> {
        Ok(self.store.list_vaults(ws, include_archived, scan).await?)
    }

    /// Archives the vault; archiving twice is a no-op.
    pub async fn archive_vault(&self, ws: &str, id: &str) -> Result<Vault, OpError> {
        let mut vault = self.vault(ws, id).await?;
        if vault.archived_at.is_some() {
            return Ok(vault);
        }
        let now = self.store.clock().now();
        vault.archived_at = Some(time::format(now));
        vault.updated_at = time::format(now);
        self.store.update_vault(ws, &vault, now, true).await?;
        Ok(vault)
    }

    /// Deletes the vault with its credentials.
    pub async fn delete_vault(&self, ws: &str, id: &str) -> Result<(), OpError> {
        if !self.store.delete_vault(ws, id).await? {
            return Err(OpError::VaultNotFound(id.to_string()));
        }
        Ok(())
    }

    /// One credential of the vault, without its secrets.
    pub async fn get_credential(
        &self,
        ws: &str,
        vault_id: &str,
        id: &str,
    ) -> Result<Credential, OpError> {
        Ok(self.credential(ws, vault_id, id).await?.credential)
    }

    /// A page of the vault's credentials, without their secrets.
    pub async fn list_credentials(
        &self,
        ws: &str,
        vault_id: &str,
        include_archived: bool,
        scan: &Scan<String>,
    ) -> Result<Vec<Credential>, OpError> {
        self.vault(ws, vault_id).await?;
        let rows = self
            .store
            .list_credentials(ws, vault_id, include_archived, scan)
            .await?;
        Ok(rows.into_iter().map(|r| r.credential).collect())
    }

    /// Deletes a credential and its secrets.
    pub async fn delete_credential(
        &self,
        ws: &str,
        vault_id: &str,
        id: &str,
    ) -> Result<(), OpError> {
        self.vault(ws, vault_id).await?;
        if !self.store.delete_credential(ws, vault_id, id).await? {
            return Err(OpError::CredentialNotFound(id.to_string()));
        }
        Ok(())
    }
}
