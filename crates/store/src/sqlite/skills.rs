//! Skills, their versions and files (migration 0011). Each write runs in the writer's
//! transaction, so a version and its files appear together.

use super::SqliteStore;
use crate::SkillStore;
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, Row, params};

use super::rows::Query;
use crate::{
    NewSkillVersion, Scan, SkillRecord, SkillVersionDelete, SkillVersionRecord, StoreError,
    StoreResult, skills::wrong_name,
};
use mast_domain::skill_bundle::BundleFile;
use mast_domain::time::Micros;

const SKILL_COLS: &str =
    "id, workspace_id, display_name, source, name, latest_version_id, created_at, updated_at";
const VERSION_COLS: &str = "v.id, v.skill_id, v.name, v.description, v.created_at";

fn skill(r: &Row<'_>) -> rusqlite::Result<SkillRecord> {
    Ok(SkillRecord {
        id: r.get(0)?,
        workspace_id: r.get(1)?,
        display_name: r.get(2)?,
        source: r.get(3)?,
        name: r.get(4)?,
        latest_version_id: r.get(5)?,
        created_at: r.get(6)?,
        updated_at: r.get(7)?,
    })
}

fn version(r: &Row<'_>) -> rusqlite::Result<SkillVersionRecord> {
    Ok(SkillVersionRecord {
        id: r.get(0)?,
        skill_id: r.get(1)?,
        name: r.get(2)?,
        description: r.get(3)?,
        created_at: r.get(4)?,
    })
}

fn insert_version(conn: &Connection, new: &NewSkillVersion) -> StoreResult<()> {
    let v = &new.version;
    conn.prepare_cached(
        "INSERT INTO skill_versions (id, skill_id, name, description, created_at) \
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        v.id,
        v.skill_id,
        v.name,
        v.description,
        v.created_at
    ])?;
    let mut ins = conn.prepare_cached(
        "INSERT INTO skill_files (version_id, path, executable, content) VALUES (?1, ?2, ?3, ?4)",
    )?;
    for f in &new.files {
        ins.execute(params![v.id, f.path, f.executable, f.content])?;
    }
    Ok(())
}

pub(super) fn insert(
    conn: &Connection,
    s: &SkillRecord,
    first: &NewSkillVersion,
) -> StoreResult<()> {
    conn.prepare_cached(
        "INSERT INTO skills (id, workspace_id, display_name, source, name, latest_version_id, \
         created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    )?
    .execute(params![
        s.id,
        s.workspace_id,
        s.display_name,
        s.source,
        s.name,
        s.latest_version_id,
        s.created_at,
        s.updated_at
    ])?;
    insert_version(conn, first)
}

pub(super) fn get(conn: &Connection, ws: &str, id: &str) -> StoreResult<Option<SkillRecord>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {SKILL_COLS} FROM skills WHERE workspace_id = ?1 AND id = ?2"
        ))?
        .query_row([ws, id], skill)
        .optional()?)
}

pub(super) fn insert_version_of(
    conn: &Connection,
    ws: &str,
    new: &NewSkillVersion,
) -> StoreResult<SkillRecord> {
    let v = &new.version;
    let mut s = get(conn, ws, &v.skill_id)?.ok_or(StoreError::NotFound)?;
    if s.name != v.name {
        return Err(wrong_name(&s, &v.name).into());
    }
    insert_version(conn, new)?;
    s.latest_version_id = v.id.clone();
    s.updated_at = v.created_at;
    conn.prepare_cached("UPDATE skills SET latest_version_id = ?1, updated_at = ?2 WHERE id = ?3")?
        .execute(params![s.latest_version_id, s.updated_at, s.id])?;
    Ok(s)
}

pub(super) fn list(
    conn: &Connection,
    ws: &str,
    source: Option<&str>,
    scan: &Scan<String>,
) -> StoreResult<Vec<SkillRecord>> {
    let mut q = Query::new(&format!(
        "SELECT {SKILL_COLS} FROM skills WHERE workspace_id = "
    ));
    q.bind(ws.to_string());
    if let Some(src) = source {
        q.push(" AND source = ").bind(src.to_string());
    }
    q.scan("id", scan);
    Ok(q.all(conn, skill)?)
}

pub(super) fn delete(conn: &Connection, ws: &str, id: &str) -> StoreResult<bool> {
    if get(conn, ws, id)?.is_none() {
        return Ok(false);
    }
    conn.prepare_cached(
        "DELETE FROM skill_files WHERE version_id IN (SELECT id FROM skill_versions WHERE skill_id = ?1)",
    )?
    .execute([id])?;
    conn.prepare_cached("DELETE FROM skill_versions WHERE skill_id = ?1")?
        .execute([id])?;
    conn.prepare_cached("DELETE FROM skills WHERE id = ?1")?
        .execute([id])?;
    Ok(true)
}

pub(super) fn get_version(
    conn: &Connection,
    ws: &str,
    skill_id: &str,
    id: &str,
) -> StoreResult<Option<SkillVersionRecord>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {VERSION_COLS} FROM skill_versions v JOIN skills s ON s.id = v.skill_id \
             WHERE s.workspace_id = ?1 AND v.skill_id = ?2 AND v.id = ?3"
        ))?
        .query_row([ws, skill_id, id], version)
        .optional()?)
}

pub(super) fn list_versions(
    conn: &Connection,
    ws: &str,
    skill_id: &str,
    scan: &Scan<String>,
) -> StoreResult<Vec<SkillVersionRecord>> {
    let mut q = Query::new(&format!(
        "SELECT {VERSION_COLS} FROM skill_versions v JOIN skills s ON s.id = v.skill_id \
         WHERE s.workspace_id = "
    ));
    q.bind(ws.to_string());
    q.push(" AND v.skill_id = ").bind(skill_id.to_string());
    q.scan("v.id", scan);
    Ok(q.all(conn, version)?)
}

pub(super) fn delete_version(
    conn: &Connection,
    ws: &str,
    skill_id: &str,
    id: &str,
    at: Micros,
) -> StoreResult<SkillVersionDelete> {
    if get(conn, ws, skill_id)?.is_none() {
        return Ok(SkillVersionDelete::NotFound);
    }
    let ids: Vec<String> = conn
        .prepare_cached("SELECT id FROM skill_versions WHERE skill_id = ?1 ORDER BY id DESC")?
        .query_map([skill_id], |r| r.get(0))?
        .collect::<Result<_, _>>()?;
    if !ids.iter().any(|v| v == id) {
        return Ok(SkillVersionDelete::NotFound);
    }
    if ids.len() == 1 {
        return Ok(SkillVersionDelete::Last);
    }
    conn.prepare_cached("DELETE FROM skill_files WHERE version_id = ?1")?
        .execute([id])?;
    conn.prepare_cached("DELETE FROM skill_versions WHERE id = ?1")?
        .execute([id])?;
    let newest = ids.iter().find(|v| *v != id).cloned().unwrap_or_default();
    conn.prepare_cached("UPDATE skills SET latest_version_id = ?1, updated_at = ?2 WHERE id = ?3")?
        .execute(params![newest, at, skill_id])?;
    Ok(SkillVersionDelete::Deleted)
}

pub(super) fn files(conn: &Connection, version_id: &str) -> StoreResult<Vec<BundleFile>> {
    Ok(conn
        .prepare_cached(
            "SELECT path, executable, content FROM skill_files WHERE version_id = ?1 ORDER BY path",
        )?
        .query_map([version_id], |r| {
            Ok(BundleFile {
                path: r.get(0)?,
                executable: r.get(1)?,
                content: r.get(2)?,
            })
        })?
        .collect::<Result<_, _>>()?)
}

#[async_trait]
impl SkillStore for SqliteStore {
    async fn insert_skill(&self, skill: &SkillRecord, first: &NewSkillVersion) -> StoreResult<()> {
        let (s, f) = (skill.clone(), first.clone());
        self.db.write(move |c| insert(c, &s, &f)).await
    }

    async fn insert_skill_version(
        &self,
        ws: &str,
        new: &NewSkillVersion,
    ) -> StoreResult<SkillRecord> {
        let (ws, n) = (ws.to_string(), new.clone());
        self.db.write(move |c| insert_version_of(c, &ws, &n)).await
    }

    async fn get_skill(&self, ws: &str, id: &str) -> StoreResult<Option<SkillRecord>> {
        let (ws, id) = (ws.to_string(), id.to_string());
        self.db.read(move |c| get(c, &ws, &id)).await
    }

    async fn list_skills(
        &self,
        ws: &str,
        source: Option<&str>,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<SkillRecord>> {
        let (ws, src, scan) = (ws.to_string(), source.map(str::to_string), scan.clone());
        self.db
            .read(move |c| list(c, &ws, src.as_deref(), &scan))
            .await
    }

    async fn delete_skill(&self, ws: &str, id: &str) -> StoreResult<bool> {
        let (ws, id) = (ws.to_string(), id.to_string());
        self.db.write(move |c| delete(c, &ws, &id)).await
    }

    async fn get_skill_version(
        &self,
        ws: &str,
        skill_id: &str,
        id: &str,
    ) -> StoreResult<Option<SkillVersionRecord>> {
        let (ws, sid, id) = (ws.to_string(), skill_id.to_string(), id.to_string());
        self.db.read(move |c| get_version(c, &ws, &sid, &id)).await
    }

    async fn list_skill_versions(
        &self,
        ws: &str,
        skill_id: &str,
        scan: &Scan<String>,
    ) -> StoreResult<Vec<SkillVersionRecord>> {
        let (ws, sid, scan) = (ws.to_string(), skill_id.to_string(), scan.clone());
        self.db
            .read(move |c| list_versions(c, &ws, &sid, &scan))
            .await
    }

    async fn delete_skill_version(
        &self,
        ws: &str,
        skill_id: &str,
        id: &str,
        at: Micros,
    ) -> StoreResult<SkillVersionDelete> {
        let (ws, sid, id) = (ws.to_string(), skill_id.to_string(), id.to_string());
        self.db
            .write(move |c| delete_version(c, &ws, &sid, &id, at))
            .await
    }

    async fn skill_files(
        &self,
        version_id: &str,
    ) -> StoreResult<Vec<mast_domain::skill_bundle::BundleFile>> {
        let id = version_id.to_string();
        self.db.read(move |c| files(c, &id)).await
    }
}
