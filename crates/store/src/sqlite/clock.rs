//! The store's clock, reachable from any connection. Statement helpers take only a
//! connection and run on the store's own threads, so each connection is given a `mast_now()`
//! SQL function that reads the clock the store was opened with; rows are stamped from the
//! same source as everything else in the process (a test's manual clock included).

use mast_domain::clock::Clock;
use mast_domain::time::Micros;
use rusqlite::Connection;
use rusqlite::functions::FunctionFlags;

use crate::StoreResult;

/// Gives `conn` the `mast_now()` function, reading `clock`.
pub(super) fn install(conn: &Connection, clock: Clock) -> rusqlite::Result<()> {
    // Not deterministic: SQLite must call it each time, never fold it into a constant.
    conn.create_scalar_function("mast_now", 0, FunctionFlags::SQLITE_UTF8, move |_| {
        Ok(clock.now())
    })
}

/// The store's clock's reading, through `conn`.
pub(super) fn now(conn: &Connection) -> StoreResult<Micros> {
    Ok(conn
        .prepare_cached("SELECT mast_now()")?
        .query_row([], |r| r.get(0))?)
}
