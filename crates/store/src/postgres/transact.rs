//! The session transaction, the engine's hot path: lock the row, decide, then write
//! everything the decision produced in one statement (a `WITH` of the session's changed
//! columns, the new events, the consumed input, new threads and work) — two round trips in
//! all: `BEGIN` sent with the locking read, then the write sent with `COMMIT`. sqlx runs one
//! statement per round trip, so the write goes as a simple query of its own: each statement
//! prepared once per connection (`PREPARE`, with the parameter types sqlx would send) and
//! executed by name with its arguments as literals (`sink::Stmt`), then `COMMIT`. Arguments
//! that cannot be literals (a NUL) or are very large take the bound path, a round trip per
//! statement, one for the row's new version and one for `COMMIT`.
//!
//! A writer that already holds the row (a runner, from its last commit or read) skips the
//! locking read: it decides on its copy and sends the write behind a version check
//! (`mast_expect_session`, on the row's `xmin`) in one round trip; if the row moved on, the
//! check fails before anything is written and the writer decides again on the locked row.
//! The locking read, the check and the version read are prepared when a connection opens
//! ([`prepared_at_connect`]).

use crate::SessionTransactions;
use async_trait::async_trait;
use std::fmt::Write as _;

use sqlx::postgres::{PgConnection, Postgres};
use sqlx::{Executor as _, QueryBuilder, Row};

use super::clock::Stamp;
use super::hot::Prepared;
use super::rows::{SESSION_CLOCK, SESSION_COLS_UNLESS_REV_2};
use super::sink::{Sink, Stmt};
use super::{PgStore, events, sessions, work};
use crate::{
    Attempt, EventRecord, SessionRecord, SessionTxn, StoreError, StoreResult, TxnOutput, Writer,
};

/// Arguments past this many bytes of literals go bound instead (a literal is scanned by the
/// server's parser, a bind is copied).
const LITERAL_LIMIT: usize = 256 << 10;

/// A statement under construction, of either kind.
trait NewSink: Sink {
    fn new() -> Self;
}

impl NewSink for Stmt {
    fn new() -> Self {
        Stmt::default()
    }
}

impl NewSink for QueryBuilder<'static, Postgres> {
    fn new() -> Self {
        QueryBuilder::new("")
    }
}

/// Starts the next `WITH` part of the statement, named `name`.
fn part(qb: &mut impl Sink, parts: &mut usize, name: &str) {
    qb.sql(if *parts == 0 { "WITH " } else { ", " })
        .sql(name)
        .sql(" AS (");
    *parts += 1;
}

/// Pushes an `UPDATE` of the session's columns that `rec` changed from `before`; false
/// (nothing pushed) when none did. Unchanged columns are left out, so a large body (the
/// agent snapshot) is never rewritten: Postgres keeps it out of line (TOAST) and an update
/// that does not name it carries the stored value over without copying it.
fn push_session_update(
    qb: &mut impl Sink,
    parts: &mut usize,
    before: &SessionRecord,
    rec: &SessionRecord,
    stamp: &Stamp,
) -> bool {
    let texts = [
        ("status", before.status.as_str(), rec.status.as_str(), ""),
        ("body", &*before.body, &*rec.body, "::json"),
        ("usage", before.usage.as_str(), rec.usage.as_str(), "::json"),
        (
            "engine",
            before.engine.as_str(),
            rec.engine.as_str(),
            "::json",
        ),
    ];
    let ints = [
        ("active_micros", before.active_micros, rec.active_micros),
        ("last_seq", before.last_seq, rec.last_seq),
        ("updated_at", before.updated_at, rec.updated_at),
    ];
    let optional_ints = [
        ("running_since", before.running_since, rec.running_since),
        ("archived_at", before.archived_at, rec.archived_at),
        ("terminated_at", before.terminated_at, rec.terminated_at),
        (
            "workflow_deadline_at",
            before.workflow_deadline_at,
            rec.workflow_deadline_at,
        ),
    ];
    let owner_changed = before.lease_owner != rec.lease_owner;
    let lease_changed = before.lease_expires_at != rec.lease_expires_at;
    let any = texts.iter().any(|(_, a, b, _)| a != b)
        || ints.iter().any(|(_, a, b)| a != b)
        || optional_ints.iter().any(|(_, a, b)| a != b)
        || owner_changed
        || lease_changed;
    if !any {
        return false;
    }
    part(qb, parts, "s");
    qb.sql("UPDATE sessions SET ");
    let mut first = true;
    for (name, old, new, cast) in texts {
        if old != new {
            sep(qb, &mut first);
            qb.sql(name).sql(" = ").arg(new.to_string()).sql(cast);
        }
    }
    for (name, old, new) in ints {
        if old != new {
            sep(qb, &mut first);
            qb.sql(name).sql(" = ").arg(new);
        }
    }
    for (name, old, new) in optional_ints {
        if old != new {
            sep(qb, &mut first);
            qb.sql(name).sql(" = ").arg(new);
        }
    }
    if owner_changed {
        sep(qb, &mut first);
        qb.sql("lease_owner = ").arg(rec.lease_owner.clone());
    }
    if lease_changed {
        sep(qb, &mut first);
        // A deadline granted by the decision, carried onto the database's clock.
        match rec.lease_expires_at {
            Some(until) => {
                qb.sql("lease_expires_at = mast_time(")
                    .arg(stamp.at(until))
                    .sql(", ")
                    .arg(stamp.expected)
                    .sql(")");
            }
            None => {
                qb.sql("lease_expires_at = NULL");
            }
        }
    }
    qb.sql(" WHERE id = ").arg(rec.id.clone()).sql(")");
    true
}

/// A comma before every `SET` item but the first.
fn sep(qb: &mut impl Sink, first: &mut bool) {
    if !*first {
        qb.sql(", ");
    }
    *first = false;
}

impl PgStore {
    /// The transaction on `conn`; it commits only when it returns `Ok(Some(..))` and leaves
    /// the transaction open otherwise, for the caller to roll back. Two round trips:
    /// `BEGIN` with the locking read, then the write with `COMMIT`.
    async fn transact_on(
        &self,
        conn: &mut PgConnection,
        prepared: &mut Prepared,
        session_id: &str,
        writer: &Writer,
        f: SessionTxn,
    ) -> StoreResult<Option<(SessionRecord, Vec<EventRecord>)>> {
        let asked = self.clock.now();
        // `BEGIN` and the locking read in one round trip: a simple-protocol query of two
        // statements (which cannot take parameters, hence the id in the text).
        let (rev, known) = self.bodies.ask(session_id);
        let lock = format!("BEGIN; EXECUTE mast_lock('{session_id}', {rev})");
        let row = conn.fetch_optional(sqlx::raw_sql(&lock)).await?;
        let Some(row) = row else { return Ok(None) };
        self.clock
            .observe(row.try_get(SESSION_CLOCK)?, asked, self.clock.now());
        let stamp = self.clock.stamp();
        let before = self.bodies.session(&row, &stamp, known)?;
        if let Writer::Runner { owner } = writer
            && before.lease_owner.as_deref() != Some(owner.as_str())
        {
            // Fencing: a runner whose lease moved on writes nothing more.
            return Err(StoreError::Fenced(format!(
                "runner {owner} no longer holds the lease of {session_id}"
            )));
        }
        let mut rec = before.clone();
        let out = f(&mut rec)?;
        let decided = Decided::new(session_id, &before, rec, out, stamp);
        // The transaction is open already (the locking read began it).
        match decided.text(prepared, "")? {
            Some(text) => {
                let version = run_write(conn, prepared, &text).await?;
                Ok(Some(decided.written(version)))
            }
            None => {
                let stmts = decided.build::<QueryBuilder<'static, Postgres>>()?;
                for mut qb in stmts {
                    qb.build().execute(&mut *conn).await?;
                }
                let version = conn
                    .fetch_one(sqlx::raw_sql(&version_query(session_id)))
                    .await?
                    .try_get(0)?;
                conn.execute("COMMIT").await?;
                Ok(Some(decided.written(Some(version))))
            }
        }
    }
}

/// The SQLSTATE `mast_expect_session` fails with when the row moved on.
const STALE_CODE: &str = "MA001";

/// The query that reads the session row's version inside the writing transaction.
fn version_query(session_id: &str) -> String {
    format!("EXECUTE mast_version('{session_id}')")
}

/// The statements every session transaction runs, prepared on each hot connection when it
/// opens ([`super::hot::HotConns`]): sent as plain text they were parsed and planned anew
/// in every transaction. The locking read, the version check of a write from a held copy
/// (`mast_expect_session`, on the row's `xmin`) and the row's version after a write.
pub(super) fn prepared_at_connect() -> String {
    format!(
        "PREPARE mast_lock (text, int8) AS SELECT {SESSION_COLS_UNLESS_REV_2} FROM sessions \
         WHERE id = $1 FOR UPDATE; \
         PREPARE mast_gate (text, int8) AS SELECT mast_expect_session($1, $2); \
         PREPARE mast_version (text) AS SELECT xmin::text::bigint FROM sessions WHERE id = $1"
    )
}

/// Sends a write built by [`Decided::text`] and returns the row's version after it (`None`:
/// the write left the row as it was). The statements it prepared are remembered once the
/// write succeeded (a failed query prepared what came before its failure, under names never
/// given out again).
async fn run_write(
    conn: &mut PgConnection,
    prepared: &mut Prepared,
    text: &WriteText,
) -> Result<Option<i64>, sqlx::Error> {
    let version = if text.reads_version {
        let rows = conn.fetch_all(sqlx::raw_sql(&text.sql)).await?;
        Some(rows.last().ok_or(sqlx::Error::RowNotFound)?.try_get(0)?)
    } else {
        conn.execute(sqlx::raw_sql(&text.sql)).await?;
        None
    };
    for (text, name) in &text.fresh {
        prepared.remember(text.clone(), name.clone());
    }
    Ok(version)
}

/// One round trip's text: `opening`, the write's statements by prepared name, the version
/// read and `COMMIT`.
struct WriteText {
    sql: String,
    /// Statements this text prepares, by their text, to remember once it ran.
    fresh: Vec<(String, String)>,
    /// Whether it ends by reading the row's version (it writes something).
    reads_version: bool,
}

/// A decision, taken on the row `before`, and what it writes: the statements that write
/// it, in order ([`Decided::build`]).
struct Decided<'a> {
    session_id: &'a str,
    before: &'a SessionRecord,
    rec: SessionRecord,
    out: TxnOutput,
    hooks: Vec<crate::webhooks::WebhookEvent>,
    stamp: Stamp,
    first_seq: i64,
    now: i64,
}

impl<'a> Decided<'a> {
    fn new(
        session_id: &'a str,
        before: &'a SessionRecord,
        mut rec: SessionRecord,
        out: TxnOutput,
        stamp: Stamp,
    ) -> Self {
        let first_seq = before.last_seq + 1;
        rec.last_seq = before.last_seq + out.events.len() as i64;
        // Webhooks: the outbox rows of what this transaction changed, in its statement.
        let hooks = crate::webhooks::session_events(
            &rec.workspace_id,
            session_id,
            &out.events,
            before.archived_at.is_none() && rec.archived_at.is_some(),
        );
        Decided {
            session_id,
            before,
            rec,
            out,
            hooks,
            stamp,
            first_seq,
            now: stamp.now,
        }
    }

    /// The write as one simple query after `opening` (nothing, or what begins the
    /// transaction and checks the row): statements by prepared name with their arguments as
    /// literals, then the version read and `COMMIT`; and the events it appends. `None` when
    /// an argument cannot be a literal or the literals are too large.
    fn text(&self, prepared: &mut Prepared, opening: &str) -> StoreResult<Option<WriteText>> {
        let stmts = self.build::<Stmt>()?;
        let literal = stmts.iter().all(|s| !s.unwritable)
            && stmts.iter().map(Stmt::literal_bytes).sum::<usize>() <= LITERAL_LIMIT;
        if !literal {
            return Ok(None);
        }
        let mut sql = String::with_capacity(
            opening.len() + stmts.iter().map(|s| s.literal_bytes() + 32).sum::<usize>() + 160,
        );
        sql.push_str(opening);
        if !opening.is_empty() {
            sql.push_str("; ");
        }
        let mut fresh = Vec::new();
        for s in &stmts {
            match prepared.name_of(&s.text) {
                Some(name) => s.execute(name, &mut sql),
                None => {
                    let name = prepared.next_name();
                    s.prepare(&name, &mut sql);
                    s.execute(&name, &mut sql);
                    if prepared.has_room() {
                        fresh.push((s.text.clone(), name));
                    } else {
                        let _ = write!(sql, "DEALLOCATE {name}; ");
                    }
                }
            }
        }
        let reads_version = !stmts.is_empty();
        if reads_version {
            sql.push_str(&version_query(self.session_id));
            sql.push_str("; ");
        }
        sql.push_str("COMMIT");
        let text = WriteText {
            sql,
            fresh,
            reads_version,
        };
        Ok(Some(text))
    }

    /// The committed row (at `version`, or where it was when nothing was written) and the
    /// events appended, as stored.
    fn written(self, version: Option<i64>) -> (SessionRecord, Vec<EventRecord>) {
        let mut rec = self.rec;
        if let Some(v) = version {
            rec.version = v;
        }
        let stored = (self.first_seq..)
            .zip(self.out.events)
            .map(|(seq, e)| e.stored(self.session_id, seq, self.now))
            .collect();
        (rec, stored)
    }
}

impl Decided<'_> {
    /// The statements (none when nothing changed).
    fn build<S: NewSink>(&self) -> StoreResult<Vec<S>> {
        let Decided {
            session_id,
            before,
            ref rec,
            ref out,
            ref hooks,
            ref stamp,
            first_seq,
            now,
        } = *self;
        let mut stmts = Vec::new();
        let mut qb = S::new();
        let mut parts = 0;
        push_session_update(&mut qb, &mut parts, before, rec, stamp);
        if !out.events.is_empty() {
            part(&mut qb, &mut parts, "e");
            events::push_insert(&mut qb, session_id, first_seq, &out.events, now)?;
            qb.sql(")");
        }
        // Parts of one statement do not see each other's rows: input consumed in the same
        // transaction that logs it, and a thread changed as it is created, are written after.
        let marks_new = out
            .mark_processed
            .iter()
            .any(|id| out.events.iter().any(|e| &e.id == id));
        // Nor can one statement change a row twice: repeated changes of a thread go in order.
        let changes_new = out.thread_changes.iter().enumerate().any(|(i, c)| {
            out.new_threads.iter().any(|t| t.id == c.id)
                || out.thread_changes[..i].iter().any(|d| d.id == c.id)
        });
        if !out.mark_processed.is_empty() && !marks_new {
            part(&mut qb, &mut parts, "m");
            push_mark_processed(&mut qb, session_id, out, rec.last_seq, now);
            qb.sql(")");
        }
        if let Some(w) = &out.ensure_work {
            part(&mut qb, &mut parts, "w");
            work::push_ensure(&mut qb, w);
            qb.sql(")");
        }
        for (i, t) in out.new_threads.iter().enumerate() {
            part(&mut qb, &mut parts, &format!("t{i}"));
            sessions::push_insert_thread(&mut qb, t);
            qb.sql(")");
        }
        if !changes_new {
            for (i, c) in out.thread_changes.iter().enumerate() {
                part(&mut qb, &mut parts, &format!("c{i}"));
                push_thread_change(&mut qb, session_id, c);
                qb.sql(")");
            }
        }
        if !hooks.is_empty() {
            part(&mut qb, &mut parts, "wh");
            super::webhooks::push_emit(&mut qb, hooks, "", now);
            qb.sql(")");
        }
        if parts > 0 {
            qb.sql(" SELECT 1");
            stmts.push(qb);
        }
        if marks_new {
            let mut qb = S::new();
            push_mark_processed(&mut qb, session_id, out, rec.last_seq, now);
            stmts.push(qb);
        }
        if changes_new {
            for c in &out.thread_changes {
                let mut qb = S::new();
                push_thread_change(&mut qb, session_id, c);
                stmts.push(qb);
            }
        }
        if out.flush_queued {
            let mut qb = S::new();
            qb.sql("UPDATE events SET processed_at = ")
                .arg(now)
                .sql(", internal = '{\"discarded\":true}'::json WHERE session_id = ")
                .arg(session_id.to_string())
                .sql(" AND processed_at IS NULL");
            stmts.push(qb);
        }
        Ok(stmts)
    }
}

/// Whether `id` is made only of the characters Mast's ids use, so it can stand in a
/// statement's text between single quotes.
fn is_plain_id(id: &str) -> bool {
    !id.is_empty()
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Pushes the marking of consumed input: processed now, placed in the conversation after
/// everything logged so far (`after_seq`), whatever its sequence number (see
/// `engine::context`).
fn push_mark_processed(
    qb: &mut impl Sink,
    session_id: &str,
    out: &TxnOutput,
    last_seq: i64,
    now: i64,
) {
    qb.sql("UPDATE events SET processed_at = ")
        .arg(now)
        .sql(", internal = ")
        .arg(serde_json::json!({ "after_seq": last_seq }).to_string())
        .sql("::json WHERE session_id = ")
        .arg(session_id.to_string())
        .sql(" AND processed_at IS NULL AND id = ANY(")
        .arg(out.mark_processed.clone())
        .sql(")");
}

/// Pushes a thread's new status.
fn push_thread_change(qb: &mut impl Sink, session_id: &str, c: &crate::ThreadChange) {
    qb.sql("UPDATE threads SET status = ")
        .arg(c.status.clone())
        .sql(", updated_at = ")
        .arg(c.updated_at)
        .sql(", archived_at = ")
        .arg(c.archived_at)
        .sql(" WHERE id = ")
        .arg(c.id.clone())
        .sql(" AND session_id = ")
        .arg(session_id.to_string());
}

#[async_trait]
impl SessionTransactions for PgStore {
    async fn transact(
        &self,
        session_id: &str,
        writer: &Writer,
        f: SessionTxn,
    ) -> StoreResult<Option<(SessionRecord, Vec<EventRecord>)>> {
        // The id goes into the statement's text (see `lock_session`); no session has another.
        if !is_plain_id(session_id) {
            return Ok(None);
        }
        let started = std::time::Instant::now();
        let mut hot = self.hot.get().await?;
        let (conn, prepared) = hot.parts();
        let result = self
            .transact_on(conn, prepared, session_id, writer, f)
            .await;
        if matches!(result, Ok(Some(_))) {
            hot.release();
        } else if hot.conn().execute("ROLLBACK").await.is_ok() {
            // Decided to write nothing, or refused: the connection is clean again.
            hot.release();
        }
        if result.as_ref().is_ok_and(Option::is_some) {
            metrics::histogram!(crate::EVENT_APPEND_DURATION)
                .record(started.elapsed().as_secs_f64());
        }
        result
    }

    /// [`crate::SessionTransactions::transact_from`]: the decision taken on `expected`, then in one
    /// round trip `BEGIN`, the version check (`mast_expect_session`, which locks the row),
    /// the write and `COMMIT`. A write too large for literals, a decision that fails on the
    /// copy, or a runner the copy says holds no lease, is left to the locking path.
    async fn transact_from(
        &self,
        session_id: &str,
        writer: &Writer,
        expected: &SessionRecord,
        f: SessionTxn,
    ) -> StoreResult<Attempt> {
        if !is_plain_id(session_id) {
            return Ok(Attempt::Done(None));
        }
        if expected.id != session_id {
            // Not a copy of this row: the locking path reads the right one.
            return Ok(Attempt::Stale);
        }
        if let Writer::Runner { owner } = writer
            && expected.lease_owner.as_deref() != Some(owner.as_str())
        {
            return Ok(Attempt::Stale);
        }
        let mut rec = expected.clone();
        // An error decided on a copy may not be the current row's: the locking path says.
        let Ok(out) = f(&mut rec) else {
            return Ok(Attempt::Stale);
        };
        let decided = Decided::new(session_id, expected, rec, out, self.clock.stamp());
        let started = std::time::Instant::now();
        let mut hot = self.hot.get().await?;
        let gate = format!(
            "BEGIN; EXECUTE mast_gate('{session_id}', {})",
            expected.version
        );
        let (conn, prepared) = hot.parts();
        let Some(text) = decided.text(prepared, &gate)? else {
            hot.release();
            return Ok(Attempt::Stale);
        };
        match run_write(conn, prepared, &text).await {
            Ok(version) => {
                hot.release();
                metrics::histogram!(crate::EVENT_APPEND_DURATION)
                    .record(started.elapsed().as_secs_f64());
                Ok(Attempt::Done(Some(decided.written(version))))
            }
            Err(e) => {
                let stale = e
                    .as_database_error()
                    .and_then(|d| d.code())
                    .is_some_and(|c| c == STALE_CODE);
                if hot.conn().execute("ROLLBACK").await.is_ok() {
                    hot.release();
                }
                if stale {
                    Ok(Attempt::Stale)
                } else {
                    Err(e.into())
                }
            }
        }
    }

    fn decides_on_held_rows(&self) -> bool {
        true
    }
}
