//! Forking a session (`POST /v1/sessions/{id}/fork`, Mast's own): a new idle session whose
//! history is a clean prefix of the original's log (see [`crate::fork_point`]), with
//! the same agent snapshot, environment, resources and vaults, and the workspace as it was
//! at that point (see [`mast_sandbox::checkpoints`]). The original is only read.
//!
//! The copied events and threads get new ids, and every id of the copied set that a body
//! names (tool-use ids, which are event ids; thread ids; the delegation calls) is rewritten
//! to its copy, so the fork's log is self-contained; each copy records the original event's
//! id in the store (`events.forked_from`). The fork starts with zero usage and stats: what
//! the shared history cost was spent by the original, and stays counted there once.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;

use serde_json::Value;

use super::{OpError, views};
use crate::Engine;
use crate::fork_point;
use crate::state::{EngineState, ThreadRun, ThreadStatus};
use mast_domain::environment::EnvironmentConfig;
use mast_domain::events::kind;
use mast_domain::fork::{FORK_REQUESTED_EVENT, FORKED_AT_EVENT, FORKED_FROM_SESSION, ForkRequest};
use mast_domain::ids::new_id;
use mast_domain::invalid::Invalid;
use mast_domain::metadata;
use mast_domain::prices::Spend;
use mast_domain::session::{Session, SessionBody, SessionStatus, SessionUsage};
use mast_domain::time::Micros;
use mast_sandbox::checkpoints::Source;
use mast_store::{
    EventRecord, ForkedEvent, NewEvent, Scan, SessionFork, SessionRecord, StoreError, ThreadRecord,
};

/// Events read per store call while reading the original's log.
const PAGE: i64 = 1000;

impl Engine {
    /// Forks session `id` of workspace `ws` at `req.event_id` (default: its latest event).
    pub async fn fork_session(
        &self,
        ws: &str,
        id: &str,
        req: ForkRequest,
    ) -> Result<Session, OpError> {
        let store = &self.inner.store;
        let orig = store
            .get_session(ws, id)
            .await?
            .ok_or_else(|| OpError::SessionNotFound(id.to_string()))?;
        if let Some(e) = &req.event_id
            && !e.starts_with("sevt_")
        {
            return Err(
                Invalid::new(format!("event_id `{e}` is not an event id (`sevt_…`)")).into(),
            );
        }
        // What is committed now; a running original goes on without affecting the fork.
        let events = self.whole_log(id).await?;
        let requested = match &req.event_id {
            Some(eid) => events
                .iter()
                .find(|e| &e.id == eid)
                .map(|e| e.seq)
                .ok_or_else(|| OpError::EventNotFound {
                    event: eid.clone(),
                    session: id.to_string(),
                })?,
            None => events.last().map_or(0, |e| e.seq),
        };
        let end = fork_point::snap(&events, requested);
        let prefix = &events[..events.partition_point(|e| e.seq <= end)];
        let body: SessionBody = serde_json::from_str(&orig.body).map_err(StoreError::from)?;
        let self_hosted = matches!(body.environment, EnvironmentConfig::SelfHosted);
        // Where the workspace comes from, decided before anything is written.
        let source = if self_hosted {
            None
        } else {
            let cps = self.inner.toolbox.checkpoints();
            let sid = id.to_string();
            let found = tokio::task::spawn_blocking(move || cps.source_at(&sid, end))
                .await
                .map_err(|e| StoreError::Internal(e.into()))?
                .map_err(|e| StoreError::Internal(e.into()))?;
            match found {
                Ok(s) => Some(s),
                Err(gone) => {
                    return Err(Invalid::new(format!(
                        "the workspace as of this point is no longer kept: its checkpoint (at \
                         `{}`) was removed by retention (MAST_WORKSPACE_CHECKPOINTS); fork at a \
                         later event",
                        gone.event_id
                    ))
                    .into());
                }
            }
        };

        let threads = self.original_threads(id).await?;
        let requested_id = events
            .iter()
            .find(|e| e.seq == requested)
            .map(|e| e.id.as_str());
        let plan = plan(
            &orig,
            body,
            &threads,
            prefix,
            (requested, requested_id),
            self.now(),
        )?;
        let fork_id = plan.fork.session.id.clone();
        if let Some(source) = source {
            self.copy_workspace(id, &fork_id, source, end, &plan.ids)
                .await?;
        }
        if let Err(e) = store.insert_fork(&plan.fork).await {
            self.inner.toolbox.remove_session(&fork_id).await;
            return Err(e.into());
        }
        let mut rec = plan.fork.session;
        rec.last_seq = end;
        Ok(views::session(&rec, self.now())?)
    }

    /// The session's whole log, in sequence order.
    async fn whole_log(&self, id: &str) -> Result<Vec<EventRecord>, OpError> {
        let mut out: Vec<EventRecord> = Vec::new();
        loop {
            let after = out.last().map_or(0, |e| e.seq);
            let page = self.inner.store.events_after(id, after, &[], PAGE).await?;
            let n = page.len() as i64;
            out.extend(page);
            if n < PAGE {
                return Ok(out);
            }
        }
    }

    /// Every thread row of the session.
    async fn original_threads(&self, id: &str) -> Result<Vec<ThreadRecord>, OpError> {
        let mut out: Vec<ThreadRecord> = Vec::new();
        loop {
            let scan = Scan {
                after: out.last().map(|t| t.id.clone()),
                direction: mast_store::Direction::Ascending,
                limit: 100,
            };
            let page = self.inner.store.list_threads(id, &scan).await?;
            let n = page.len();
            out.extend(page);
            if n < 100 {
                return Ok(out);
            }
        }
    }

    /// Gives a fork its workspace (restored from a checkpoint's snapshot, or copied from the
    /// live workspace) and the markers of repositories cloned into it (so they are not cloned
    /// over it), then its original's checkpoints before the fork point.
    async fn copy_workspace(
        &self,
        original: &str,
        fork: &str,
        source: Source,
        end: i64,
        ids: &HashMap<String, String>,
    ) -> Result<(), OpError> {
        let toolbox = self.inner.toolbox.clone();
        let to = toolbox.workspace_dir(fork);
        let (repos_from, repos_to) = (
            toolbox.mounts_dir(original).join(".repos"),
            toolbox.mounts_dir(fork).join(".repos"),
        );
        let live = toolbox.workspace_dir(original);
        let ids = ids.clone();
        let (original, fork) = (original.to_string(), fork.to_string());
        let copied = tokio::task::spawn_blocking(move || -> std::io::Result<()> {
            let checkpoints = toolbox.checkpoints();
            let from = match source {
                Source::Snapshot(key) => {
                    checkpoints.restore(&key, &to)?;
                    None
                }
                Source::Copy(dir) => Some(dir),
                Source::Live => Some(live),
            };
            match from {
                Some(from) if from.exists() => {
                    mast_sandbox::tree_copy::copy_tree(&from, &to)?;
                    copy_markers(&repos_from, &repos_to)?;
                }
                Some(_) => {}
                None => copy_markers(&repos_from, &repos_to)?,
            }
            checkpoints.inherit(&original, &fork, end, |e| ids.get(e).cloned())
        })
        .await
        .map_err(|e| StoreError::Internal(e.into()))?;
        copied.map_err(|e| {
            OpError::Store(StoreError::Internal(
                anyhow::Error::new(e).context("the session's workspace could not be copied"),
            ))
        })
    }
}

/// Copies the repository clone markers (small files) of a session's mounts directory.
fn copy_markers(from: &Path, to: &Path) -> std::io::Result<()> {
    let Ok(dir) = std::fs::read_dir(from) else {
        return Ok(());
    };
    std::fs::create_dir_all(to)?;
    for entry in dir.flatten() {
        if entry.file_type().is_ok_and(|t| t.is_file()) {
            std::fs::copy(entry.path(), to.join(entry.file_name()))?;
        }
    }
    Ok(())
}

/// What a fork writes, and the original ids its copies took the place of.
struct Plan {
    fork: SessionFork,
    ids: HashMap<String, String>,
}

/// Builds the fork's rows from the original's row, threads and log prefix.
fn plan(
    orig: &SessionRecord,
    body: SessionBody,
    threads: &[ThreadRecord],
    prefix: &[EventRecord],
    (requested, requested_id): (i64, Option<&str>),
    now: Micros,
) -> Result<Plan, OpError> {
    let fork_id = new_id("sesn");
    // Threads that exist at the fork point: the primary, and delegates created in the prefix.
    let created: Vec<&str> = prefix
        .iter()
        .filter(|e| e.kind == kind::THREAD_CREATED)
        .filter_map(|e| e.body.get("session_thread_id").and_then(Value::as_str))
        .collect();
    let kept: Vec<&ThreadRecord> = threads
        .iter()
        .filter(|t| t.id == body.primary_thread_id || created.contains(&t.id.as_str()))
        .collect();
    let mut ids: HashMap<String, String> = HashMap::new();
    ids.insert(orig.id.clone(), fork_id.clone());
    for t in &kept {
        ids.insert(t.id.clone(), new_id("sthr"));
    }
    for e in prefix {
        ids.insert(e.id.clone(), new_id("sevt"));
    }

    // The session row: same agent, environment, resources and vaults; a title and metadata
    // that say where it came from; idle, with nothing pending and zero usage.
    let mut body_v = serde_json::to_value(&body).map_err(StoreError::from)?;
    remap(&mut body_v, &ids);
    let mut sb: SessionBody = serde_json::from_value(body_v).map_err(StoreError::from)?;
    let origin = sb.title.clone().unwrap_or_else(|| orig.id.clone());
    sb.title = Some(truncate(&format!("Fork of {origin}"), 512));
    sb.deployment_id = None;
    sb.metadata
        .insert(FORKED_FROM_SESSION.into(), orig.id.clone());
    let end = prefix.last();
    match end {
        Some(e) => sb.metadata.insert(FORKED_AT_EVENT.into(), e.id.clone()),
        None => sb.metadata.remove(FORKED_AT_EVENT),
    };
    sb.metadata.remove(FORK_REQUESTED_EVENT);
    if end.map_or(0, |e| e.seq) != requested
        && let Some(asked) = requested_id
    {
        sb.metadata
            .insert(FORK_REQUESTED_EVENT.into(), asked.to_string());
    }
    metadata::validate(&sb.metadata).map_err(|e| {
        Invalid::with_code(
            "invalid_metadata",
            format!(
                "the fork's metadata would break the metadata limits ({}): it adds the `mast.` \
                 keys that record its origin; remove keys from the original first",
                e
            ),
        )
    })?;

    let before = EngineState::of(orig)?;
    let end_time = end.map_or(orig.created_at, |e| e.created_at);
    let mut st = EngineState {
        budget_cents: before.budget_cents,
        spend: Spend {
            tokens: 0,
            unpriced: before.spend.unpriced,
        },
        ..Default::default()
    };
    let mut new_threads = Vec::with_capacity(kept.len());
    for t in &kept {
        let primary = t.id == body.primary_thread_id;
        let terminated = prefix.iter().any(|e| {
            e.kind == kind::THREAD_STATUS_TERMINATED
                && e.thread_id.as_deref() == Some(t.id.as_str())
        });
        let status = if terminated {
            ThreadStatus::Terminated
        } else {
            ThreadStatus::Idle
        };
        let archived_at = t.archived_at.filter(|a| *a <= end_time);
        let new_id = ids[&t.id].clone();
        if !primary {
            let was = before.threads.get(&t.id);
            let mut run = ThreadRun::new(
                was.map_or("", |r| r.agent_name.as_str()),
                was.is_some_and(|r| r.advisor),
                now,
            );
            run.status = status;
            run.running_since = None;
            run.started_at = was.and_then(|r| r.started_at);
            run.archived_at = archived_at;
            run.workflow_run = was.and_then(|r| r.workflow_run.clone());
            st.threads.insert(new_id.clone(), run);
        }
        let mut tb: Value = serde_json::from_str(&t.body).map_err(StoreError::from)?;
        remap(&mut tb, &ids);
        new_threads.push(ThreadRecord {
            id: new_id,
            session_id: fork_id.clone(),
            parent_thread_id: t.parent_thread_id.as_ref().map(|p| mapped(&ids, p)),
            spawning_event_id: t.spawning_event_id.as_ref().map(|p| mapped(&ids, p)),
            status: if primary {
                SessionStatus::Idle.as_str().into()
            } else {
                status.as_str().into()
            },
            body: serde_json::to_string(&tb).map_err(StoreError::from)?,
            created_at: t.created_at,
            updated_at: now,
            archived_at,
        });
    }
    // The primary first, then the delegates by id.
    new_threads.sort_by_key(|t| (t.parent_thread_id.is_some(), t.id.clone()));

    let events = prefix
        .iter()
        .map(|e| {
            let mut body = e.body.clone();
            remap(&mut body, &ids);
            let mut internal = e.internal.clone();
            if let Some(i) = internal.as_mut() {
                remap(i, &ids);
            }
            ForkedEvent {
                event: NewEvent {
                    id: ids[&e.id].clone(),
                    thread_id: e.thread_id.as_ref().map(|t| mapped(&ids, t)),
                    kind: e.kind.clone(),
                    body,
                    internal,
                    // Nothing in a fork is pending (the fork point is clean), so no answer
                    // can race another; the unique answer index has nothing to guard.
                    answers: None,
                    processed_at: e.processed_at,
                },
                forked_from: e.id.clone(),
            }
        })
        .collect();
    let mut session = SessionRecord {
        id: fork_id,
        workspace_id: orig.workspace_id.clone(),
        agent_id: orig.agent_id.clone(),
        agent_version: orig.agent_version,
        environment_id: orig.environment_id.clone(),
        status: SessionStatus::Idle.as_str().into(),
        body: serde_json::to_string(&sb).map_err(StoreError::from)?.into(),
        usage: serde_json::to_string(&SessionUsage::default()).map_err(StoreError::from)?,
        active_micros: 0,
        running_since: None,
        last_seq: 0,
        engine: String::new(),
        lease_owner: None,
        lease_expires_at: None,
        created_at: now,
        updated_at: now,
        archived_at: None,
        terminated_at: None,
        workflow_deadline_at: None,
        version: 0,
    };
    st.store(&mut session)?;
    Ok(Plan {
        fork: SessionFork {
            session,
            threads: new_threads,
            events,
        },
        ids,
    })
}

fn mapped(ids: &HashMap<String, String>, id: &str) -> String {
    ids.get(id).cloned().unwrap_or_else(|| id.to_string())
}

/// Rewrites every string of `v` that is an id of the copied set to its copy's id. Ids are
/// unique random strings, so a string equal to one is that id.
pub(crate) fn remap(v: &mut Value, ids: &HashMap<String, String>) {
    match v {
        Value::String(s) => {
            if let Some(n) = ids.get(s.as_str()) {
                *s = n.clone();
            }
        }
        Value::Array(a) => a.iter_mut().for_each(|x| remap(x, ids)),
        Value::Object(o) => {
            // Keys can be ids too (maps keyed by thread or resource).
            let renamed: BTreeMap<String, String> = o
                .keys()
                .filter_map(|k| ids.get(k).map(|n| (k.clone(), n.clone())))
                .collect();
            for (old, new) in renamed {
                if let Some(x) = o.remove(&old) {
                    o.insert(new, x);
                }
            }
            o.values_mut().for_each(|x| remap(x, ids));
        }
        _ => {}
    }
}

fn truncate(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}
