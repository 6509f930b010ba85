//! Skills, their versions and files (migration 0011).

use crate::SkillStore;
use async_trait::async_trait;
use sqlx::postgres::{PgRow, Postgres};
use sqlx::{QueryBuilder, Row};

use super::{PgStore, push_scan};
use crate::{
    NewSkillVersion, Scan, SkillRecord, SkillVersionDelete, SkillVersionRecord, StoreError,
    StoreResult, skills::wrong_name,
};
use mast_domain::skill_bundle::BundleFile;
use mast_domain::time::Micros;

const SKILL_COLS: &str =
    "id, workspace_id, display_name, source, name, latest_version_id, created_at, updated_at";
const VERSION_COLS: &str = "v.id, v.skill_id, v.name, v.description, v.created_at";

fn skill(r: &PgRow) -> Result<SkillRecord, sqlx::Error> {
    Ok(SkillRecord {
        id: r.try_get(0)?,
        workspace_id: r.try_get(1)?,
        display_name: r.try_get(2)?,
        source: r.try_get(3)?,
        name: r.try_get(4)?,
        latest_version_id: r.try_get(5)?,
        created_at: r.try_get(6)?,
        updated_at: r.try_get(7)?,
    })
}

fn version(r: &PgRow) -> Result<SkillVersionRecord, sqlx::Error> {
    Ok(SkillVersionRecord {
        id: r.try_get(0)?,
        skill_id: r.try_get(1)?,
        name: r.try_get(2)?,
        description: r.try_get(3)?,
        created_at: r.try_get(4)?,
    })
}

async fn insert_version(
    tx: &mut sqlx::Transaction<'_, Postgres>,
    new: &NewSkillVersion,
) -> StoreResult<()> {
    let v = &new.version;
    sqlx::query(
        "INSERT INTO skill_versions (id, skill_id, name, description, created_at) \
         VALUES ($1, $2, $3, $4, $5)",
    )
    .bind(&v.id)
    .bind(&v.skill_id)
    .bind(&v.name)
    .bind(&v.description)
    .bind(v.created_at)
    .execute(&mut **tx)
    .await?;
    for f in &new.files {
        sqlx::query(
            "INSERT INTO skill_files (version_id, path, executable, content) VALUES ($1, $2, $3, $4)",
        )
        .bind(&v.id)
        .bind(&f.path)
        .bind(f.executable)
        .bind(&f.content)
        .execute(&mut **tx)
        .await?;
    }
    Ok(())
}

#[async_trait]
impl SkillStore for PgStore {
    async fn insert_skill(&self, s: &SkillRecord, first: &NewSkillVersion) -> StoreResult<()> {
        let mut tx = self.pool.begin().await?;
        sqlx::query(
            "INSERT INTO skills (id, workspace_id, display_name, source, name, latest_version_id, \
             created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&s.id)
        .bind(&s.workspace_id)
        .bind(&s.display_name)
        .bind(&s.source)
        .bind(&s.name)
        .bind(&s.latest_version_id)
        .bind(s.created_at)
        .bind(s.updated_at)
        .execute(&mut *tx)
        .await?;
        insert_version(&mut tx, first).await?;
        tx.commit().await?;
        Ok(())
    }

    async fn insert_skill_version(
        &self,
        ws: &str,
        new: &NewSkillVersion,
    ) -> StoreResult<SkillRecord> {
        let v = &new.version;
        let mut tx = self.pool.begin().await?;
        // The row lock orders concurrent uploads, so `latest` is the last committed.
        let row = sqlx::query(&format!(
            "SELECT {SKILL_COLS} FROM skills WHERE workspace_id = $1 AND id = $2 FOR UPDATE"
        ))
        .bind(ws)
        .bind(&v.skill_id)
        .fetch_optional(&mut *tx)
        .await?;
        let mut s = row
            .as_ref()
            .map(skill)
            .transpose()?
            .ok_or(StoreError::NotFound)?;
        if s.name != v.name {
            return Err(wrong_name(&s, &v.name).into());
        }
        insert_version(&mut tx, new).await?;
        s.latest_version_id = v.id.clone();
        s.updated_at = v.created_at;
        sqlx::query("UPDATE skills SET latest_version_id = $1, updated_at = $2 WHERE id = $3")
            .bind(&s.latest_version_id)
            .bind(s.updated_at)
            .bind(&s.id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(s)
    }

    async fn get_skill(&self, ws: &str, id: &str) -> StoreResult<Option<SkillRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {SKILL_COLS} FROM skills WHERE workspace_id = $1 AND id = $2"
        ))
        .bind(ws)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(skill).transpose()?)
    }

    async fn list_skills(
        &self,
        ws: &str,
        source: Option<&str>,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<SkillRecord>> {
        let mut qb = QueryBuilder::<Postgres>::new(format!(
            "SELECT {SKILL_COLS} FROM skills WHERE workspace_id = "
        ));
        qb.push_bind(ws.to_string());
        if let Some(src) = source {
            qb.push(" AND source = ").push_bind(src.to_string());
        }
        push_scan(&mut qb, "id", scan);
        let rows = qb.build().fetch_all(&self.pool).await?;
        Ok(rows.iter().map(skill).collect::<Result<_, _>>()?)
    }

    async fn delete_skill(&self, ws: &str, id: &str) -> StoreResult<bool> {
        let done = sqlx::query("DELETE FROM skills WHERE workspace_id = $1 AND id = $2")
            .bind(ws)
            .bind(id)
            .execute(&self.pool)
            .await?;
        Ok(done.rows_affected() > 0)
    }

    async fn get_skill_version(
        &self,
        ws: &str,
        skill_id: &str,
        id: &str,
    ) -> StoreResult<Option<SkillVersionRecord>> {
        let row = sqlx::query(&format!(
            "SELECT {VERSION_COLS} FROM skill_versions v JOIN skills s ON s.id = v.skill_id \
             WHERE s.workspace_id = $1 AND v.skill_id = $2 AND v.id = $3"
        ))
        .bind(ws)
        .bind(skill_id)
        .bind(id)
        .fetch_optional(&self.pool)
        .await?;
        Ok(row.as_ref().map(version).transpose()?)
    }

    async fn list_skill_versions(
        &self,
        ws: &str,
        skill_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<SkillVersionRecord>> {
        let mut qb = QueryBuilder::<Postgres>::new(format!(
            "SELECT {VERSION_COLS} FROM skill_versions v JOIN skills s ON s.id = v.skill_id \
             WHERE s.workspace_id = "
        ));
        qb.push_bind(ws.to_string());
        qb.push(" AND v.skill_id = ")
            .push_bind(skill_id.to_string());
        push_scan(&mut qb, "v.id", scan);
        let rows = qb.build().fetch_all(&self.pool).await?;
        Ok(rows.iter().map(version).collect::<Result<_, _>>()?)
    }

    async fn delete_skill_version(
        &self,
        ws: &str,
        skill_id: &str,
        id: &str,
        at: Micros,
    ) -> StoreResult<SkillVersionDelete> {
        let mut tx = self.pool.begin().await?;
        let found =
            sqlx::query("SELECT 1 FROM skills WHERE workspace_id = $1 AND id = $2 FOR UPDATE")
                .bind(ws)
                .bind(skill_id)
                .fetch_optional(&mut *tx)
                .await?;
        if found.is_none() {
            return Ok(SkillVersionDelete::NotFound);
        }
        let ids: Vec<String> = sqlx::query_scalar(
            "SELECT id FROM skill_versions WHERE skill_id = $1 ORDER BY id DESC",
        )
        .bind(skill_id)
        .fetch_all(&mut *tx)
        .await?;
        if !ids.iter().any(|v| v == id) {
            return Ok(SkillVersionDelete::NotFound);
        }
        if ids.len() == 1 {
            return Ok(SkillVersionDelete::Last);
        }
        sqlx::query("DELETE FROM skill_versions WHERE id = $1")
            .bind(id)
            .execute(&mut *tx)
            .await?;
        let newest = ids.iter().find(|v| *v != id).cloned().unwrap_or_default();
        sqlx::query("UPDATE skills SET latest_version_id = $1, updated_at = $2 WHERE id = $3")
            .bind(newest)
            .bind(at)
            .bind(skill_id)
            .execute(&mut *tx)
            .await?;
        tx.commit().await?;
        Ok(SkillVersionDelete::Deleted)
    }

    async fn skill_files(&self, version_id: &str) -> StoreResult<Vec<BundleFile>> {
        let rows = sqlx::query(
            "SELECT path, executable, content FROM skill_files WHERE version_id = $1 ORDER BY path",
        )
        .bind(version_id)
        .fetch_all(&self.pool)
        .await?;
        Ok(rows
            .iter()
            .map(|r| {
                Ok(BundleFile {
                    path: r.try_get(0)?,
                    executable: r.try_get(1)?,
                    content: r.try_get(2)?,
                })
            })
            .collect::<Result<_, sqlx::Error>>()?)
    }
}
