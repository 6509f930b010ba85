//! The first connection to Postgres, made alone before the pool so a server that cannot
//! reach its database says where it looked and what to do, instead of waiting for the pool's
//! timeout and reporting only that it timed out.

use std::time::Duration;

use sqlx::Connection as _;
use sqlx::postgres::{PgConnectOptions, PgConnection};

use crate::{StoreError, StoreResult};

/// How long the first connection may take before the database counts as not answering.
const FIRST_CONNECTION: Duration = Duration::from_secs(5);

/// Connects once to the database `options` name, and says what went wrong in words an
/// operator can act on: the host and port, whether anything listens there, whether the
/// database exists (with the command that creates it), whether the credentials were refused.
pub(super) async fn check(options: &PgConnectOptions) -> StoreResult<()> {
    let at = format!("{}:{}", options.get_host(), options.get_port());
    let db = options.get_database().unwrap_or("postgres").to_string();
    let user = options.get_username().to_string();
    let conn = tokio::time::timeout(FIRST_CONNECTION, PgConnection::connect_with(options)).await;
    let e = match conn {
        Ok(Ok(conn)) => {
            let _ = conn.close().await;
            return Ok(());
        }
        Ok(Err(e)) => e,
        Err(_) => {
            return Err(StoreError::Unavailable(format!(
                "Postgres at {at} did not answer within {}s (a firewall, or the wrong host?)",
                FIRST_CONNECTION.as_secs()
            )));
        }
    };
    let code = e
        .as_database_error()
        .and_then(|d| d.code())
        .map(|c| c.to_string());
    let message = match (&e, code.as_deref()) {
        (sqlx::Error::Io(io), _) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            format!(
                "cannot reach Postgres at {at}: connection refused (is it running, and on that port?)"
            )
        }
        (sqlx::Error::Io(io), _) => format!("cannot reach Postgres at {at}: {io}"),
        // invalid_catalog_name
        (_, Some("3D000")) => format!(
            "the database `{db}` does not exist on the Postgres at {at}: create it with \
             `createdb -h {} -p {} -U {user} {db}`, or name another in the URL",
            options.get_host(),
            options.get_port()
        ),
        // invalid_password, invalid_authorization_specification
        (_, Some("28P01" | "28000")) => format!(
            "the Postgres at {at} refused user `{user}`: check the user and password in the URL ({e})"
        ),
        _ => format!("cannot connect to Postgres at {at}: {e}"),
    };
    Err(StoreError::Unavailable(message))
}
