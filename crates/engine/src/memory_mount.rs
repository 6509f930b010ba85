//! Memory stores attached to a session, mounted in its sandbox at `/mnt/memory/<slug>/`.
//!
//! Each store is a directory on the host (under the session's mounts directory) bound into
//! the sandbox, writable only when attached `read_write`. The store stays the truth:
//! - **before each sandbox tool call** the directory is made to match the store: memories
//!   that changed since the last call (another session, the API) are written, ones deleted
//!   are removed, and anything else left in the directory goes. What is then on disk is the
//!   call's *baseline*: each file's memory id and `content_sha256`, kept beside the directory
//!   (out of the sandbox's reach), so it survives a runner restart.
//! - **after the call** the directory is compared with the baseline, whoever changed it
//!   (`write`, `edit` or `bash`): new files become memories, changed ones `modified`
//!   versions and removed ones deletions, each by a `session_actor` and each guarded by the
//!   baseline's `content_sha256`. A write another writer beat is refused by the store, never
//!   applied over theirs: the call's result becomes an error naming the memory, and the next
//!   call's sync brings the winner's content back to the mount.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::Inner;
use mast_domain::ids::new_id;
use mast_domain::memory::{Actor, MAX_CONTENT_BYTES, Memory, check_path};
use mast_domain::memory_resource::{Access, MAX_MEMORIES_PER_STORE, MemoryStoreResource, attached};
use mast_domain::session::SessionBody;
use mast_sandbox::memory_dir;
use mast_sandbox::mounts::{Mount, MountTable};
use mast_sandbox::{Approval, SessionTools, ToolOutput};
use mast_store::memory::{MemoryChange, MemoryWrite, MemoryWriteOutcome};

/// The built-in tools that see the sandbox's files, around which mounts are synced.
const FILE_TOOLS: &[&str] = &["bash", "read", "write", "edit", "glob", "grep"];

/// Memories read from the store per query while syncing.
const LIST_BATCH: i64 = 200;

/// The note the agent's system prompt gets about the stores it has, or `None` when the
/// session attached none. It goes after the agent's own system prompt.
pub(super) fn system_prompt(system: Option<&str>, resources: &[Value]) -> Option<String> {
    let stores = attached(resources);
    if stores.is_empty() {
        return system.map(str::to_string);
    }
    let mut note = String::from(
        "# Memory\n\nMemory stores are mounted in your sandbox as directories of text files. \
         They persist across sessions: read them before you start, and keep what future \
         sessions should know there (one topic per file, short and current).\n",
    );
    for s in &stores {
        note.push_str(&format!(
            "\n- `{}/` — \"{}\" ({}){}",
            s.mount_path,
            s.name,
            match s.access {
                Access::ReadWrite => "read-write",
                Access::ReadOnly => "read-only: do not try to change it",
            },
            if s.description.is_empty() {
                String::new()
            } else {
                format!(": {}", s.description)
            }
        ));
        if let Some(i) = s.instructions.as_deref().filter(|i| !i.is_empty()) {
            note.push_str(&format!("\n  Instructions: {i}"));
        }
    }
    note.push_str(
        "\n\nAnother session may change a store while you work: your changes to a file are \
         saved after each tool call, and a change made over someone else's newer one is \
         refused (the tool result says so) and the file shows their version again.",
    );
    Some(match system {
        Some(s) if !s.is_empty() => format!("{s}\n\n{note}"),
        _ => note,
    })
}

/// Runs a built-in tool with the session's memory mounts synced around it: changes left
/// unsaved (a call cut short) are saved and the mounts brought up to date before, the call's
/// changes saved after. What could not be saved turns the result into an error that says so.
pub(super) async fn run_synced(
    inner: &Inner,
    sid: &str,
    body: &SessionBody,
    tools: &SessionTools,
    name: &str,
    input: &Value,
    approval: Approval,
) -> ToolOutput {
    if !FILE_TOOLS.contains(&name) || attached(&body.resources).is_empty() {
        return tools.run(name, input, approval).await;
    }
    let mut problems = after_call(inner, sid, body).await;
    if let Err(e) = before_call(inner, sid, body, tools.user).await {
        problems.push(e);
        return with_problems(ToolOutput::error("the tool did not run."), problems);
    }
    let out = tools.run(name, input, approval).await;
    problems.extend(after_call(inner, sid, body).await);
    with_problems(out, problems)
}

fn with_problems(mut out: ToolOutput, problems: Vec<String>) -> ToolOutput {
    if problems.is_empty() {
        return out;
    }
    out.is_error = true;
    out.content.push(mast_domain::content::text(format!(
        "Memory: {}",
        problems.join("\n")
    )));
    out
}

/// One attached store's place on the host.
struct Place {
    res: MemoryStoreResource,
    /// The directory bound at the mount path.
    dir: PathBuf,
    /// Where its baseline is kept.
    baseline: PathBuf,
}

fn places(mounts_dir: &Path, body: &SessionBody) -> Vec<Place> {
    let root = mounts_dir.join("memory");
    attached(&body.resources)
        .into_iter()
        .map(|res| Place {
            dir: root.join(&res.memory_store_id),
            baseline: root.join(format!("{}.baseline.json", res.memory_store_id)),
            res,
        })
        .collect()
}

/// `table` with the session's memory stores added; their directories are created (empty
/// until the first call's sync fills them).
pub(super) fn with_mounts(
    inner: &Inner,
    sid: &str,
    body: &SessionBody,
    table: MountTable,
    owner: Option<u32>,
) -> Result<MountTable, String> {
    let places = places(&inner.toolbox.mounts_dir(sid), body);
    if places.is_empty() {
        return Ok(table);
    }
    let mut entries = table.entries().to_vec();
    for p in places {
        create_dir(
            &p.dir,
            (p.res.access == Access::ReadWrite)
                .then_some(owner)
                .flatten(),
        )
        .map_err(|e| {
            format!(
                "memory store `{}` could not be mounted at {}: {e}",
                p.res.memory_store_id, p.res.mount_path
            )
        })?;
        entries.push(Mount {
            sandbox: p.res.mount_path.clone(),
            host: p.dir,
            read_only: p.res.access == Access::ReadOnly,
        });
    }
    Ok(MountTable::new(entries))
}

/// Creates a store's directory (and its parents, readable by the sandbox's user so it can
/// be bound), given to `owner` when the sandbox may write it.
fn create_dir(dir: &Path, owner: Option<u32>) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::create_dir_all(dir)?;
    let mut p = dir.parent();
    for _ in 0..2 {
        if let Some(d) = p {
            std::fs::set_permissions(d, std::fs::Permissions::from_mode(0o755))?;
            p = d.parent();
        }
    }
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))?;
    if let Some(uid) = owner {
        std::os::unix::fs::chown(dir, Some(uid), Some(uid))?;
    }
    Ok(())
}

/// A file of the mount as the store had it when the mount last matched it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Known {
    id: String,
    sha: String,
}

/// Path (relative, `a/b.md`) → what the store had there.
type Baseline = BTreeMap<String, Known>;

fn load(path: &Path) -> Baseline {
    std::fs::read(path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .unwrap_or_default()
}

fn save(path: &Path, b: &Baseline) -> std::io::Result<()> {
    let tmp = path.with_extension("json.part");
    std::fs::write(&tmp, serde_json::to_vec(b)?)?;
    std::fs::rename(tmp, path)
}

/// Every memory of a store, by path.
async fn list_all(
    inner: &Inner,
    ws: &str,
    store_id: &str,
) -> Result<BTreeMap<String, Memory>, String> {
    let mut out = BTreeMap::new();
    let mut from: Option<String> = None;
    loop {
        let rows = inner
            .store
            .list_memories(ws, store_id, "/", from.as_deref(), LIST_BATCH)
            .await
            .map_err(|e| format!("memory store `{store_id}` could not be read: {e}"))?;
        let done = (rows.len() as i64) < LIST_BATCH;
        for m in rows {
            from = Some(format!("{}\u{1}", m.path));
            out.insert(m.path.clone(), m);
        }
        if done {
            return Ok(out);
        }
    }
}

async fn workspace_of(inner: &Inner, sid: &str) -> Result<String, String> {
    inner
        .store
        .get_session_by_id(sid)
        .await
        .map_err(|e| format!("the session could not be read: {e}"))?
        .map(|r| r.workspace_id)
        .ok_or_else(|| "the session no longer exists".to_string())
}

/// Before a sandbox call: each mount made to match its store, and the baseline recorded.
pub(super) async fn before_call(
    inner: &Inner,
    sid: &str,
    body: &SessionBody,
    owner: Option<u32>,
) -> Result<(), String> {
    let places = places(&inner.toolbox.mounts_dir(sid), body);
    if places.is_empty() {
        return Ok(());
    }
    let ws = workspace_of(inner, sid).await?;
    for p in places {
        let server = list_all(inner, &ws, &p.res.memory_store_id).await?;
        let owner = (p.res.access == Access::ReadWrite)
            .then_some(owner)
            .flatten();
        let dir = p.dir.clone();
        let baseline = tokio::task::spawn_blocking(move || materialise(&dir, &server, owner))
            .await
            .map_err(|e| format!("the memory sync stopped: {e}"))?
            .map_err(|e| {
                format!(
                    "memory store `{}` could not be synced to {}: {e}",
                    p.res.memory_store_id, p.res.mount_path
                )
            })?;
        save(&p.baseline, &baseline).map_err(|e| format!("the memory baseline: {e}"))?;
    }
    Ok(())
}

/// Makes `dir` hold exactly `server`'s memories; returns what it then holds.
fn materialise(
    dir: &Path,
    server: &BTreeMap<String, Memory>,
    owner: Option<u32>,
) -> std::io::Result<Baseline> {
    let tree = memory_dir::walk(dir, MAX_CONTENT_BYTES as u64)?;
    let mut baseline = Baseline::new();
    for (path, m) in server {
        let rel = path.trim_start_matches('/');
        let content = m.content.as_deref().unwrap_or("");
        let on_disk = tree.files.get(rel).map(|b| sha256_hex_bytes(b));
        if on_disk.as_deref() != Some(m.content_sha256.as_str())
            && let Err(e) = memory_dir::put(dir, rel, content.as_bytes(), owner)
        {
            // A path the disk cannot hold (`/a` beside `/a/b`): left out of the mount and
            // of the baseline, so it is never taken for a deletion.
            tracing::warn!(path, error = %e, "a memory could not be written to its mount");
            continue;
        }
        baseline.insert(
            rel.to_string(),
            Known {
                id: m.id.clone(),
                sha: m.content_sha256.clone(),
            },
        );
    }
    let stale = tree
        .files
        .keys()
        .chain(&tree.too_big)
        .chain(&tree.skipped)
        .filter(|rel| !baseline.contains_key(rel.as_str()));
    for rel in stale {
        if let Err(e) = memory_dir::remove(dir, rel) {
            tracing::warn!(rel, error = %e, "a stale entry could not be removed from a memory mount");
        }
    }
    Ok(baseline)
}

fn sha256_hex_bytes(b: &[u8]) -> String {
    use sha2::Digest as _;
    sha2::Sha256::digest(b)
        .iter()
        .map(|x| format!("{x:02x}"))
        .collect()
}

/// After a sandbox call: what changed under each `read_write` mount written to its store.
/// Returns what could not be saved, worded for the model (empty when all was).
pub(super) async fn after_call(inner: &Inner, sid: &str, body: &SessionBody) -> Vec<String> {
    let places: Vec<Place> = places(&inner.toolbox.mounts_dir(sid), body)
        .into_iter()
        .filter(|p| p.res.access == Access::ReadWrite)
        .collect();
    if places.is_empty() {
        return vec![];
    }
    let ws = match workspace_of(inner, sid).await {
        Ok(ws) => ws,
        Err(e) => return vec![e],
    };
    let mut problems = Vec::new();
    for p in places {
        let dir = p.dir.clone();
        let tree = match tokio::task::spawn_blocking(move || {
            memory_dir::walk(&dir, MAX_CONTENT_BYTES as u64)
        })
        .await
        {
            Ok(Ok(t)) => t,
            Ok(Err(e)) => {
                problems.push(format!(
                    "{} could not be read to save its changes: {e}",
                    p.res.mount_path
                ));
                continue;
            }
            Err(e) => {
                problems.push(format!("the memory sync stopped: {e}"));
                continue;
            }
        };
        let mut baseline = load(&p.baseline);
        let sync = StoreSync {
            inner,
            ws: &ws,
            sid,
            place: &p,
        };
        sync.push(&tree, &mut baseline, &mut problems).await;
        if let Err(e) = save(&p.baseline, &baseline) {
            problems.push(format!("the memory baseline could not be saved: {e}"));
        }
    }
    problems
}

/// One store's after-call sync.
struct StoreSync<'a> {
    inner: &'a Inner,
    ws: &'a str,
    sid: &'a str,
    place: &'a Place,
}

impl StoreSync<'_> {
    async fn push(
        &self,
        tree: &memory_dir::Tree,
        baseline: &mut Baseline,
        problems: &mut Vec<String>,
    ) {
        let shown = |rel: &str| format!("{}/{rel}", self.place.res.mount_path);
        for rel in &tree.too_big {
            problems.push(format!(
                "{} was not saved to memory: a memory holds at most {MAX_CONTENT_BYTES} bytes; \
                 split it into smaller files",
                shown(rel)
            ));
        }
        for rel in &tree.skipped {
            if !baseline.contains_key(rel) {
                problems.push(format!(
                    "{} was not saved to memory: only regular text files (and directories) \
                     are memories, not links or special files",
                    shown(rel)
                ));
            }
        }
        let mut count = baseline.len();
        for (rel, bytes) in &tree.files {
            let known = baseline.get(rel).cloned();
            let sha = sha256_hex_bytes(bytes);
            if known.as_ref().is_some_and(|k| k.sha == sha) {
                continue;
            }
            let Ok(content) = String::from_utf8(bytes.clone()) else {
                problems.push(format!(
                    "{} was not saved to memory: it is not UTF-8 text",
                    shown(rel)
                ));
                continue;
            };
            let path = format!("/{rel}");
            if let Err(e) = check_path(&path) {
                problems.push(format!(
                    "{} was not saved to memory: {}",
                    shown(rel),
                    e.message
                ));
                continue;
            }
            let (change, expected) = match &known {
                Some(k) => (
                    MemoryChange::Update {
                        id: k.id.clone(),
                        path: None,
                        content: Some(content),
                    },
                    Some(k.sha.clone()),
                ),
                None if count >= MAX_MEMORIES_PER_STORE => {
                    problems.push(format!(
                        "{} was not saved to memory: a mounted store holds at most \
                         {MAX_MEMORIES_PER_STORE} memories",
                        shown(rel)
                    ));
                    continue;
                }
                None => (
                    MemoryChange::Create {
                        id: new_id("mem"),
                        path,
                        content,
                    },
                    None,
                ),
            };
            match self.write(change, expected).await {
                Ok(Some(m)) => {
                    if known.is_none() {
                        count += 1;
                    }
                    baseline.insert(
                        rel.clone(),
                        Known {
                            id: m.id,
                            sha: m.content_sha256,
                        },
                    );
                }
                Ok(None) => {}
                Err(why) => problems.push(format!("{} was not saved to memory: {why}", shown(rel))),
            }
        }
        let gone: Vec<(String, Known)> = baseline
            .iter()
            .filter(|(rel, _)| !tree.files.contains_key(*rel) && !tree.too_big.contains(rel))
            .map(|(r, k)| (r.clone(), k.clone()))
            .collect();
        for (rel, k) in gone {
            match self
                .write(
                    MemoryChange::Delete { id: k.id.clone() },
                    Some(k.sha.clone()),
                )
                .await
            {
                Ok(_) => {
                    baseline.remove(&rel);
                }
                Err(why) => problems.push(format!(
                    "the deletion of {} was not saved to memory: {why}",
                    shown(&rel)
                )),
            }
        }
    }

    /// One write as this session; the memory as it now is, or why it was refused.
    async fn write(
        &self,
        change: MemoryChange,
        expected_sha256: Option<String>,
    ) -> Result<Option<Memory>, String> {
        let deleting = matches!(change, MemoryChange::Delete { .. });
        let w = MemoryWrite {
            store_id: self.place.res.memory_store_id.clone(),
            change,
            expected_sha256,
            version_id: new_id("memver"),
            actor: Some(Actor::SessionActor {
                session_id: self.sid.to_string(),
            }),
            at: self.inner.now(),
        };
        let outcome = self
            .inner
            .store
            .write_memory(self.ws, &w)
            .await
            .map_err(|e| format!("the store failed: {e}"))?;
        let conflict = "conflict: another session (or an API client) changed this memory after \
                        your copy was made, and its change was kept. Your change was not saved; \
                        the file will show their version from your next tool call on — read it \
                        and apply your change to it again";
        match outcome {
            MemoryWriteOutcome::Written { memory, .. } => Ok(memory),
            MemoryWriteOutcome::Unchanged(m) => Ok(Some(m)),
            MemoryWriteOutcome::MemoryNotFound if deleting => Ok(None),
            MemoryWriteOutcome::MemoryNotFound => Err(
                "conflict: another session (or an API client) deleted this memory after your \
                 copy was made; your change was not saved (write the file again to re-create it)"
                    .into(),
            ),
            MemoryWriteOutcome::PreconditionFailed { .. } => Err(conflict.into()),
            MemoryWriteOutcome::PathTaken { memory_id } => Err(format!(
                "conflict: another session (or an API client) created a memory at this path \
                 (`{memory_id}`) after your copy was made, and it was kept; your file was not \
                 saved and will show theirs from your next tool call on"
            )),
            MemoryWriteOutcome::StoreFull => Err(format!(
                "memory store `{}` holds {MAX_MEMORIES_PER_STORE} memories, the most it may; \
                 this file was not saved",
                self.place.res.memory_store_id
            )),
            MemoryWriteOutcome::StoreArchived => Err(format!(
                "memory store `{}` was archived; it takes no more changes",
                self.place.res.memory_store_id
            )),
            MemoryWriteOutcome::StoreNotFound => Err(format!(
                "memory store `{}` no longer exists",
                self.place.res.memory_store_id
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_note_names_each_store_with_its_access_and_instructions() {
        let res = vec![
            json!({"type": "file", "id": "sesrsc_1", "file_id": "f", "mount_path": "/mnt/x"}),
            json!({"type": "memory_store", "memory_store_id": "memstore_1", "access": "read_only",
                   "instructions": "Check prefs first.", "name": "User prefs", "description": "",
                   "mount_path": "/mnt/memory/user-prefs"}),
        ];
        let s = system_prompt(Some("You help."), &res).unwrap();
        assert!(s.starts_with("You help.\n\n# Memory"));
        assert!(s.contains("`/mnt/memory/user-prefs/` — \"User prefs\" (read-only"));
        assert!(s.contains("Instructions: Check prefs first."));
        assert_eq!(system_prompt(Some("x"), &res[..1]).as_deref(), Some("x"));
        assert_eq!(system_prompt(None, &[]), None);
    }
}
