//! rusqlite's errors in store terms.

use rusqlite::ErrorCode;

use crate::StoreError;

/// A rusqlite error as the store reports it: uniqueness violations are conflicts (their
/// message names the columns, as clients have always seen), a busy or unopenable file is
/// unavailable, anything else internal.
pub(super) fn from_sqlite(e: &rusqlite::Error) -> StoreError {
    match e {
        rusqlite::Error::SqliteFailure(f, message) => match f.code {
            ErrorCode::ConstraintViolation
                if matches!(
                    f.extended_code,
                    rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
                        | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY
                ) =>
            {
                StoreError::Conflict(message.clone().unwrap_or_else(|| e.to_string()))
            }
            ErrorCode::DatabaseBusy
            | ErrorCode::DatabaseLocked
            | ErrorCode::CannotOpen
            | ErrorCode::SystemIoFailure
            | ErrorCode::DiskFull => StoreError::Unavailable(e.to_string()),
            _ => StoreError::Internal(anyhow::anyhow!("sqlite: {e}")),
        },
        _ => StoreError::Internal(anyhow::anyhow!("sqlite: {e}")),
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> Self {
        from_sqlite(&e)
    }
}
