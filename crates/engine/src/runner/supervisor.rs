//! One session's runner: the primary thread's loop, and beside it a loop for every delegate
//! thread at work — all in the runner's task, under the session's one lease, so cancelling
//! the runner cancels every thread and no thread outlives its owner.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use tokio::sync::Notify;

use super::{Crew, Ended, Loop, Role, RunError};
use super::{InterruptsSeen, RunnerHandle};
use crate::Inner;
use crate::delegation::thread_agent;
use crate::shared_agent::SharedAgent;

use mast_store::{EventRecord, SessionRecord, StoreError};

type ChildRun<'a> = Pin<Box<dyn Future<Output = (String, Result<Ended, RunError>)> + Send + 'a>>;

/// Drives the session until it has no work (idle or terminated), the lease is lost, or the
/// process shuts down. `handed` are the events of the transaction that committed `rec`,
/// when the runner was handed them (see `engine::Handoff`); `armed`, the model request that
/// transaction started for the primary thread (`engine::fast_start`).
pub(super) async fn drive(
    inner: &Inner,
    handle: &RunnerHandle,
    rec: SessionRecord,
    seen: &InterruptsSeen,
    handed: Option<Vec<EventRecord>>,
    armed: Option<String>,
) -> Result<Ended, RunError> {
    let crew = Crew {
        spawn: Default::default(),
        changed: Notify::new(),
        mcp: crate::mcp::McpSet::new(&inner.shutdown),
        texts: Default::default(),
    };
    let body = inner.bodies.get(&rec.id, &rec.body)?;
    let sid = rec.id.clone();
    let mut primary = Loop::new(
        inner,
        handle,
        &crew,
        &rec,
        seen.count(&body.primary_thread_id),
        body.primary_thread_id.clone(),
        SharedAgent::Session(body.clone()),
        Role::Primary,
    )?;
    primary.fast.armed = armed;
    // Events that directly follow what the primary's last loop knew make the row and them
    // its whole view: it reads neither again.
    let first = match handed {
        Some(events) => {
            primary.carry(rec.clone(), &events, seen.count(&body.primary_thread_id));
            primary.fast.carried.is_none().then_some(rec)
        }
        None => Some(rec),
    };
    let span = tracing::info_span!("thread", thread_id = %body.primary_thread_id);
    let main = tracing::Instrument::instrument(primary.run(first), span);
    tokio::pin!(main);
    let mut children: FuturesUnordered<ChildRun<'_>> = FuturesUnordered::new();
    let mut running: HashSet<String> = HashSet::new();
    loop {
        tokio::select! {
            ended = &mut main => return ended,
            asked = crew.spawn.take() => {
                for tid in asked {
                    if running.insert(tid.clone()) {
                        let span = tracing::info_span!("thread", thread_id = %tid);
                        children.push(Box::pin(tracing::Instrument::instrument(
                            run_child(inner, handle, &crew, &sid, tid),
                            span,
                        )));
                    }
                }
            }
            Some((tid, ended)) = children.next(), if !children.is_empty() => {
                running.remove(&tid);
                crew.changed.notify_one();
                match ended {
                    Ok(_) => {}
                    // The whole runner is done for: the next owner resumes every thread.
                    Err(e @ (RunError::LeaseLost | RunError::Shutdown | RunError::Gone)) => return Err(e),
                    Err(e) => tracing::warn!(session_id = %sid, thread_id = %tid, error = %e, "delegate thread loop stopped"),
                }
            }
        }
    }
}

/// A delegate thread's loop, until the thread has no work.
async fn run_child<'a>(
    inner: &'a Inner,
    handle: &'a RunnerHandle,
    crew: &'a Crew,
    sid: &'a str,
    tid: String,
) -> (String, Result<Ended, RunError>) {
    let result = async {
        // Counted before the row is read, as every iteration of the loop does.
        let seen = handle.interrupt_count(&tid);
        let rec = inner
            .store
            .get_session_by_id(sid)
            .await
            .map_err(super::store_err)?
            .ok_or(RunError::Gone)?;
        handle.saw_seq(rec.last_seq);
        let thread = inner
            .store
            .get_thread(&rec.id, &tid)
            .await
            .map_err(super::store_err)?
            .ok_or(RunError::Gone)?;
        let agent = thread_agent(&thread.body)
            .ok_or_else(|| StoreError::Internal(anyhow::anyhow!("thread {tid} has no agent")))?;
        let stored = serde_json::from_str::<serde_json::Value>(&thread.body).ok();
        let name = stored
            .as_ref()
            .and_then(|b| {
                b.get("agent_name")
                    .and_then(|n| n.as_str())
                    .map(str::to_string)
            })
            .unwrap_or_else(|| agent.name.clone());
        let workflow_run = stored
            .as_ref()
            .is_some_and(|b| b.get("workflow_run_id").is_some_and(|r| r.is_string()));
        let mut lp = Loop::new(
            inner,
            handle,
            crew,
            &rec,
            seen,
            tid.clone(),
            SharedAgent::Own(Arc::new(agent)),
            Role::Child { name },
        )?;
        lp.scope.workflow_run = workflow_run;
        lp.run(Some(rec)).await
    }
    .await;
    (tid, result)
}
