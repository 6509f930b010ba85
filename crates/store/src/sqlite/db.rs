//! SQLite's connections: one writer thread, and a few read connections used in place.
//!
//! Every write is one job sent to the writer thread and one reply back (a oneshot), whatever
//! number of statements it runs: the async side pays two wake-ups per operation instead of
//! one round trip per statement. A read runs on the caller's own thread, on a read
//! connection it borrows for the call: reads are short indexed lookups in a WAL file that
//! never wait on the writer, and running them in place saves the two thread switches a hop
//! would cost (which were most of a read's price). The writer runs each job in its own savepoint inside a
//! transaction it commits once for every job waiting at the time (group commit: one WAL sync
//! covers them all), and replies only after that commit, so nothing is acknowledged before it
//! is durable. A job whose caller has gone (its future dropped) before the job started is
//! skipped; one that started runs to its end, and its reply is dropped. The threads never wait
//! on a caller.

use std::panic::AssertUnwindSafe;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use rusqlite::Connection;
use tokio::sync::oneshot;

use crate::{StoreError, StoreResult};

/// Hands a caller its result, given the commit's error if the commit failed.
type Reply = Box<dyn FnOnce(Option<&rusqlite::Error>) + Send>;

/// What a writer job leaves to do once its batch is committed (or failed to commit).
struct Done {
    /// Whether the job's own work succeeded (else its savepoint is rolled back).
    ok: bool,
    /// Sends the caller its result, or the commit's error.
    reply: Reply,
}

/// A job for the writer.
trait WriteJob: Send {
    /// Runs on the write connection inside a transaction; None when its caller has gone and
    /// nothing was done.
    fn run(self: Box<Self>, conn: &Connection) -> Option<Done>;
    /// Tells the caller the job could not start, without running it.
    fn fail(self: Box<Self>, e: &rusqlite::Error);
}

/// A caller's closure and where its result goes.
struct Job<F, T> {
    f: F,
    tx: oneshot::Sender<StoreResult<T>>,
}

impl<F, T> WriteJob for Job<F, T>
where
    T: Send + 'static,
    F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
{
    fn run(self: Box<Self>, conn: &Connection) -> Option<Done> {
        let Job { f, tx } = *self;
        if tx.is_closed() {
            return None;
        }
        let result = f(conn);
        Some(Done {
            ok: result.is_ok(),
            reply: Box::new(move |commit| {
                let _ = tx.send(match commit {
                    None => result,
                    Some(e) => Err(super::error::from_sqlite(e)),
                });
            }),
        })
    }

    fn fail(self: Box<Self>, e: &rusqlite::Error) {
        let _ = self.tx.send(Err(super::error::from_sqlite(e)));
    }
}

/// Most jobs one commit covers; a bound on how long the first one waits for its reply.
const MAX_BATCH: usize = 64;

/// Handles to the connection threads. Cloning shares them; the threads end when the last
/// handle is dropped (their channels close).
#[derive(Clone)]
pub(super) struct Db {
    write: mpsc::Sender<Box<dyn WriteJob>>,
    readers: Arc<Readers>,
}

/// The read connections not in use, and a permit for each.
struct Readers {
    idle: Mutex<Vec<Connection>>,
    permits: tokio::sync::Semaphore,
}

impl Db {
    /// Starts the writer on `writer`; reads share the connections in `readers`.
    pub fn start(writer: Connection, readers: Vec<Connection>) -> std::io::Result<Db> {
        let (write, jobs) = mpsc::channel::<Box<dyn WriteJob>>();
        std::thread::Builder::new()
            .name("mast-sqlite-writer".into())
            .spawn(move || write_loop(writer, jobs))?;
        let readers = Arc::new(Readers {
            permits: tokio::sync::Semaphore::new(readers.len()),
            idle: Mutex::new(readers),
        });
        Ok(Db { write, readers })
    }

    /// Runs `f` in a write transaction on the writer thread; its changes are kept only when it
    /// returns `Ok` and the commit succeeds, and the result is returned after that commit.
    pub async fn write<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let (tx, rx) = oneshot::channel::<StoreResult<T>>();
        let job: Box<dyn WriteJob> = Box::new(Job { f, tx });
        self.write.send(job).map_err(|_| closed())?;
        rx.await.map_err(|_| unanswered())?
    }

    /// Runs `f` on a read connection, in place (a consistent snapshot for the whole of `f`);
    /// waits, without blocking, while every read connection is in use.
    pub async fn read<T, F>(&self, f: F) -> StoreResult<T>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    {
        let _permit = self.readers.permits.acquire().await.map_err(|_| closed())?;
        // Nothing below awaits: the connection always goes back, even if the caller's
        // future is dropped right after.
        let conn = self.readers.idle.lock().expect("readers").pop();
        let conn = conn.ok_or_else(closed)?;
        let result = snapshot(&conn, f);
        self.readers.idle.lock().expect("readers").push(conn);
        result
    }
}

/// The error of a job whose thread is gone (the store shut down).
fn closed() -> StoreError {
    StoreError::Internal(anyhow::anyhow!("the SQLite connection thread stopped"))
}

/// The error of a job that ended without an answer: it panicked (its savepoint or read
/// transaction was rolled back and the thread carries on; the panic is on stderr), or the
/// store shut down while it waited.
fn unanswered() -> StoreError {
    StoreError::Internal(anyhow::anyhow!(
        "the SQLite store job ended without an answer (it panicked, or the store shut down)"
    ))
}

/// Runs `f` in a read transaction, so the statements of one call see one state of the file.
fn snapshot<T>(conn: &Connection, f: impl FnOnce(&Connection) -> StoreResult<T>) -> StoreResult<T> {
    conn.execute_batch("BEGIN")?;
    let result = std::panic::catch_unwind(AssertUnwindSafe(|| f(conn)));
    // Ending a read transaction cannot lose anything; its error is not the caller's.
    let _ = conn.execute_batch("COMMIT");
    result.unwrap_or_else(|_| {
        Err(StoreError::Internal(anyhow::anyhow!(
            "a store read panicked"
        )))
    })
}

fn write_loop(conn: Connection, jobs: mpsc::Receiver<Box<dyn WriteJob>>) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    while let Ok(first) = jobs.recv() {
        batch.push(first);
        while batch.len() < MAX_BATCH {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        run_batch(&conn, &mut batch);
    }
}

/// Runs the jobs in one transaction, each in a savepoint, and replies after the commit.
fn run_batch(conn: &Connection, batch: &mut Vec<Box<dyn WriteJob>>) {
    let mut done = Vec::with_capacity(batch.len());
    if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
        // Nothing ran: every caller hears why (the file is locked by another process, or
        // the disk is gone).
        for job in batch.drain(..) {
            job.fail(&e);
        }
        return;
    }
    while !batch.is_empty() {
        let job = batch.remove(0);
        if let Err(e) = conn.execute_batch("SAVEPOINT job") {
            job.fail(&e);
            continue;
        }
        let outcome = std::panic::catch_unwind(AssertUnwindSafe(|| job.run(conn)));
        let kept = matches!(&outcome, Ok(Some(d)) if d.ok);
        let end = if kept {
            conn.execute_batch("RELEASE job")
        } else {
            conn.execute_batch("ROLLBACK TO job; RELEASE job")
        };
        match (outcome, end) {
            (Ok(Some(d)), Ok(())) => done.push(d),
            (Ok(Some(d)), Err(e)) => (d.reply)(Some(&e)),
            // Skipped, or panicked: the dropped sender tells the caller.
            _ => {}
        }
        if conn.is_autocommit() {
            // SQLite rolled the whole transaction back (an I/O error, a full disk): the jobs
            // before this one are lost too, so say so and start again for the rest.
            let e = rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_ABORT),
                Some("the transaction was rolled back".into()),
            );
            for d in done.drain(..) {
                (d.reply)(Some(&e));
            }
            if let Err(e) = conn.execute_batch("BEGIN IMMEDIATE") {
                for job in batch.drain(..) {
                    job.fail(&e);
                }
                return;
            }
        }
    }
    let commit = conn.execute_batch("COMMIT");
    if commit.is_err() {
        // A failed COMMIT may leave the transaction open; nothing of it must stay.
        let _ = conn.execute_batch("ROLLBACK");
    }
    for d in done {
        (d.reply)(commit.as_ref().err());
    }
}
