//! Session leases, each grant, renewal and expiry test one statement on the database's clock
//! (see [`super::clock`]): a replica whose clock is off neither takes a live lease nor keeps
//! a dead one.

use super::PgStore;
use super::clock::db_time;
use crate::LeaseStore;
use crate::StoreResult;
use async_trait::async_trait;
use mast_domain::time::Micros;

#[async_trait]
impl LeaseStore for PgStore {
    async fn claim_lease(
        &self,
        session_id: &str,
        owner: &str,
        now: Micros,
        until: Micros,
    ) -> StoreResult<bool> {
        let stamp = self.clock.stamp();
        let r = sqlx::query(concat!(
            "UPDATE sessions SET lease_owner = $1, lease_expires_at = mast_time($2, $3) WHERE id = $4 \
             AND (lease_owner IS NULL OR lease_owner = $1 OR lease_expires_at < ",
            db_time!("$5", "$3"),
            ")"
        ))
        .bind(owner)
        .bind(stamp.at(until))
        .bind(stamp.expected)
        .bind(session_id)
        .bind(stamp.at(now))
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected() == 1)
    }

    async fn renew_lease(&self, session_id: &str, owner: &str, until: Micros) -> StoreResult<bool> {
        let stamp = self.clock.stamp();
        let r = sqlx::query(
            "UPDATE sessions SET lease_expires_at = mast_time($1, $2) WHERE id = $3 AND lease_owner = $4",
        )
        .bind(stamp.at(until))
        .bind(stamp.expected)
        .bind(session_id)
        .bind(owner)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected() == 1)
    }

    async fn release_lease(&self, session_id: &str, owner: &str) -> StoreResult<()> {
        sqlx::query(
            "UPDATE sessions SET lease_owner = NULL, lease_expires_at = NULL \
             WHERE id = $1 AND lease_owner = $2",
        )
        .bind(session_id)
        .bind(owner)
        .execute(&self.pool)
        .await?;
        Ok(())
    }

    async fn clear_foreign_leases(&self, owner: &str) -> StoreResult<u64> {
        let r = sqlx::query(
            "UPDATE sessions SET lease_owner = NULL, lease_expires_at = NULL \
             WHERE lease_owner IS NOT NULL AND lease_owner <> $1",
        )
        .bind(owner)
        .execute(&self.pool)
        .await?;
        Ok(r.rows_affected())
    }

    async fn sessions_with_expired_runs(
        &self,
        now: Micros,
        limit: i64,
    ) -> StoreResult<Vec<String>> {
        // Deadlines are written on the engine's clock, so `now` is compared as it is.
        Ok(sqlx::query_scalar(
            "SELECT id FROM sessions WHERE workflow_deadline_at <= $1 AND status = 'idle' \
             AND archived_at IS NULL ORDER BY workflow_deadline_at LIMIT $2",
        )
        .bind(now)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }

    async fn sessions_needing_runner(&self, now: Micros, limit: i64) -> StoreResult<Vec<String>> {
        let stamp = self.clock.stamp();
        Ok(sqlx::query_scalar(concat!(
            "SELECT id FROM sessions WHERE status IN ('running', 'rescheduling') \
             AND (lease_owner IS NULL OR lease_expires_at < ",
            db_time!("$1", "$2"),
            ") ORDER BY updated_at LIMIT $3"
        ))
        .bind(stamp.at(now))
        .bind(stamp.expected)
        .bind(limit)
        .fetch_all(&self.pool)
        .await?)
    }
}
