//! Budgets, decided under the session's row lock: the list cost consumed so
//! far, the gate before each model request, and resuming the threads a budget stopped once
//! it is raised or removed.

use serde_json::{Value, json};

use super::intake::server_event;
use super::state::{EngineState, LeaseGrant, ThreadStatus, grant_lease, set_status, status_of};
use mast_domain::events::{self, StopReason, kind};
use mast_domain::prices::{self, NANOS_PER_CENT, Nanos};
use mast_domain::session::{SessionStatus, SessionUsage};
use mast_domain::time::Micros;
use mast_store::{NewEvent, SessionRecord, StoreError};

/// The session's active time so far, a current run included.
pub fn active_micros(rec: &SessionRecord, now: Micros) -> Micros {
    rec.active_micros + rec.running_since.map_or(0, |s| (now - s).max(0))
}

/// The session's list cost at `now`, every thread's tokens, its web searches and runtime
/// included; None while part of its usage has no price.
pub fn consumed(rec: &SessionRecord, st: &EngineState, now: Micros) -> Option<Nanos> {
    let usage: SessionUsage = serde_json::from_str(&rec.usage).unwrap_or_default();
    st.spend.list_cost(&usage, active_micros(rec, now))
}

/// `usage.list_cost` of the session at `now`.
pub fn list_cost(rec: &SessionRecord, st: &EngineState, now: Micros) -> Option<Value> {
    consumed(rec, st, now).map(prices::amount)
}

/// Whether the next model request must not be made: the session has a budget and either
/// its list cost reached the cap or the request's model has no price (the budget could not
/// measure it).
pub fn reached(rec: &SessionRecord, st: &EngineState, model_priced: bool, now: Micros) -> bool {
    let Some(cap) = st.budget_cents else {
        return false;
    };
    if !model_priced {
        return true;
    }
    consumed(rec, st, now).is_none_or(|spent| spent >= cap.saturating_mul(NANOS_PER_CENT))
}

/// The models a session running `agent` can run that have no list price: its own, its
/// roster's and its advisor's. A budget is refused unless this is empty.
pub fn unpriced_models(
    agent: &mast_domain::agent::SessionAgent,
    prices: &mast_domain::prices::Prices,
) -> Vec<String> {
    let mut models = vec![agent.model.id.clone()];
    if let Some(roster) = super::delegation::Roster::of(agent) {
        models.extend(roster.agents.iter().map(|a| a.snapshot.model.id.clone()));
        models.extend(roster.advisor);
    }
    // A workflow run's predefined agents run their own models (inline ones the session's).
    models.extend(
        super::workflow_runs::predefined_entries(agent)
            .iter()
            .filter_map(|e| e.pointer("/model/id").and_then(Value::as_str))
            .map(str::to_string),
    );
    let mut out: Vec<String> = models
        .into_iter()
        .filter(|m| prices.of(m).is_none())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// 400 `model_not_budgetable` when a model the session can run has no list price.
pub fn check_budgetable(
    agent: &mast_domain::agent::SessionAgent,
    prices: &mast_domain::prices::Prices,
) -> Result<(), mast_domain::invalid::Invalid> {
    let unpriced = unpriced_models(agent, prices);
    if unpriced.is_empty() {
        return Ok(());
    }
    Err(mast_domain::invalid::Invalid::with_code(
        "model_not_budgetable",
        format!(
            "a budget needs a list price for every model the session can run, and {} {} none; configure {} in `MAST_PRICES` or the config file's `[prices]`, or leave `budget` out",
            unpriced
                .iter()
                .map(|m| format!("`{m}`"))
                .collect::<Vec<_>>()
                .join(", "),
            if unpriced.len() == 1 { "has" } else { "have" },
            if unpriced.len() == 1 {
                "its price"
            } else {
                "their prices"
            },
        ),
    ))
}

/// The gate before a model request of the thread `ender` ends: None lets the request go;
/// otherwise the events that stop the thread at the budget (none when, under the lock, the
/// turn cannot end yet: the loop looks again).
pub(super) fn gate(
    ender: &super::turn_end::Ender,
    rec: &mut SessionRecord,
    st: &mut EngineState,
    model_priced: bool,
    now: mast_domain::time::Micros,
) -> Result<Option<Vec<NewEvent>>, StoreError> {
    if !reached(rec, st, model_priced, now) {
        return Ok(None);
    }
    ender
        .try_end(rec, st, StopReason::BudgetReached, None)
        .map(Some)
}

/// Marks the thread a budget stopped, so raising the budget resumes it.
pub fn mark_paused(st: &mut EngineState, thread: &str) {
    match st.threads.get_mut(thread) {
        Some(t) => t.budget_paused = true,
        None => st.budget_paused = true,
    }
}

/// Whether the primary thread must idle at the budget: a delegate it waits on stopped there
/// and no delegate still works.
pub fn holds_primary(st: &EngineState) -> bool {
    !st.children_active() && st.threads.values().any(|t| t.budget_paused)
}

/// After a budget was raised or removed: every thread it stopped runs again, and an idle
/// session with such a thread goes back to running under `grant` (the caller wakes the
/// runner). Returns the status events; none when nothing was stopped by the budget.
pub fn resume(
    rec: &mut SessionRecord,
    st: &mut EngineState,
    primary: &str,
    grant: Option<&LeaseGrant>,
    now: Micros,
) -> Vec<NewEvent> {
    // Workflow runs the budget paused go on first, then their threads.
    let mut out =
        super::workflow_runs::resume_all(st, super::workflow_runs::BY_BUDGET, primary, now);
    let mut resumed = std::mem::take(&mut st.budget_paused) || !out.is_empty();
    for (id, t) in st.threads.iter_mut().filter(|(_, t)| t.budget_paused) {
        t.budget_paused = false;
        if t.status != ThreadStatus::Idle {
            continue;
        }
        t.set_status(ThreadStatus::Running, now);
        out.push(server_event(
            kind::THREAD_STATUS_RUNNING,
            events::thread_status(id, &t.agent_name, None),
            id,
            now,
        ));
        resumed = true;
    }
    if resumed && status_of(rec) == SessionStatus::Idle {
        set_status(rec, SessionStatus::Running, now);
        grant_lease(rec, grant, now);
        out.insert(
            0,
            server_event(kind::STATUS_RUNNING, json!({}), primary, now),
        );
    }
    out
}

/// What a session update did to the budget.
#[derive(Debug, Default)]
pub struct BudgetChange {
    /// The new wire budget (`null` when removed), for `session.updated`; None if unchanged.
    pub changed: Option<Value>,
    /// Status events of the threads the change resumed (after `session.updated`).
    pub resumed: Vec<NewEvent>,
}

/// Applies the `budget` of a session update (cap in cents, or `null` to remove) to the locked
/// row: only a session created with a budget has one to change, a new cap must exceed the
/// list cost consumed so far, and every model the session runs must have a price. A change
/// resumes the threads the budget stopped.
pub fn update(
    rec: &mut SessionRecord,
    body: &mut mast_domain::session::SessionBody,
    st: &mut EngineState,
    patch: mast_domain::patch::Patch<i64>,
    prices: &mast_domain::prices::Prices,
    grant: Option<&LeaseGrant>,
    now: Micros,
) -> Result<BudgetChange, StoreError> {
    use mast_domain::invalid::Invalid;
    use mast_domain::patch::Patch;
    if !patch.is_present() {
        return Ok(BudgetChange::default());
    }
    if status_of(rec) == SessionStatus::Terminated {
        return Err(StoreError::Conflict(format!(
            "session `{}` is terminated; its budget can no longer change",
            rec.id
        )));
    }
    let changed = match patch {
        Patch::Absent => return Ok(BudgetChange::default()),
        Patch::Null if st.budget_cents.is_none() => return Ok(BudgetChange::default()),
        Patch::Null => {
            st.budget_cents = None;
            body.budget = None;
            Value::Null
        }
        Patch::Value(cents) => {
            if st.budget_cents.is_none() {
                return Err(Invalid::with_code(
                    "budget_create_only",
                    format!(
                        "session `{}` has no budget: a budget can only be set when a session is created, and a removed one cannot be added back",
                        rec.id
                    ),
                )
                .into());
            }
            check_budgetable(&body.agent, prices)?;
            let Some(spent) = consumed(rec, st, now) else {
                return Err(Invalid::with_code(
                    "model_not_budgetable",
                    "the session has used a model with no list price, so its list cost is unknown; remove the budget (`null`) to continue",
                )
                .into());
            };
            if cents.saturating_mul(NANOS_PER_CENT) <= spent {
                return Err(Invalid::with_code(
                    "budget_not_raised",
                    format!(
                        "`budget.max_list_cost.amount` ({cents} cents) must exceed the list cost the session has consumed ({} cents)",
                        prices::amount(spent)["amount"].as_str().unwrap_or("?")
                    ),
                )
                .into());
            }
            if st.budget_cents == Some(cents) {
                return Ok(BudgetChange::default());
            }
            st.budget_cents = Some(cents);
            let wire = mast_domain::budget::to_json(cents);
            body.budget = Some(wire.clone());
            wire
        }
    };
    let primary = body.primary_thread_id.clone();
    Ok(BudgetChange {
        changed: Some(changed),
        resumed: resume(rec, st, &primary, grant, now),
    })
}

/// The `session.usage` body at `now`: the usage with its active time and list cost, and the
/// budget when the session has one.
pub fn usage_event(
    rec: &SessionRecord,
    st: &EngineState,
    now: Micros,
) -> Result<Value, StoreError> {
    let mut usage: Value = serde_json::from_str(&rec.usage)?;
    usage["active_seconds"] = json!(active_micros(rec, now) as f64 / 1_000_000.0);
    usage["list_cost"] = list_cost(rec, st, now).unwrap_or(Value::Null);
    let budget = st
        .budget_cents
        .map_or(Value::Null, mast_domain::budget::to_json);
    Ok(json!({ "usage": usage, "budget": budget }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures::session;
    use crate::state::ThreadRun;

    use crate::fixtures::NOW;

    #[test]
    fn the_gate_counts_every_thread_and_refuses_unpriced_models() {
        let mut st = EngineState::default();
        let rec = session(SessionStatus::Running, &st, false);
        assert!(!reached(&rec, &st, false, NOW), "no budget, no gate");
        st.budget_cents = Some(5);
        // The fixture's runtime is priced too: well under a cent here.
        assert!(!reached(&rec, &st, true, NOW));
        assert!(
            reached(&rec, &st, false, NOW),
            "an unpriced model cannot be measured"
        );
        st.spend.add(Some(5 * NANOS_PER_CENT));
        assert!(
            reached(&rec, &st, true, NOW),
            "the cap is reached at equality"
        );
        st.spend.add(None);
        assert!(
            reached(&rec, &st, true, NOW),
            "unpriced usage is never under a cap"
        );
    }

    #[test]
    fn raising_resumes_only_what_the_budget_stopped() {
        let mut st = EngineState::default();
        let mut paused = ThreadRun::new("analyst", false, NOW);
        paused.set_status(ThreadStatus::Idle, NOW);
        paused.budget_paused = true;
        let mut done = ThreadRun::new("critic", false, NOW);
        done.set_status(ThreadStatus::Idle, NOW);
        st.threads.insert("sthr_a".into(), paused);
        st.threads.insert("sthr_b".into(), done);
        let mut rec = session(SessionStatus::Idle, &st, false);
        let out = resume(&mut rec, &mut st, "sthr_p", None, NOW);
        let kinds: Vec<&str> = out.iter().map(|e| e.kind.as_str()).collect();
        assert_eq!(kinds, [kind::STATUS_RUNNING, kind::THREAD_STATUS_RUNNING]);
        assert_eq!(status_of(&rec), SessionStatus::Running);
        assert_eq!(st.threads["sthr_a"].status, ThreadStatus::Running);
        assert_eq!(st.threads["sthr_b"].status, ThreadStatus::Idle);
        // Nothing stopped at the budget: a raise changes no status.
        let mut rec = session(SessionStatus::Idle, &st, false);
        assert!(resume(&mut rec, &mut st, "sthr_p", None, NOW).is_empty());
        assert_eq!(status_of(&rec), SessionStatus::Idle);
    }
}
