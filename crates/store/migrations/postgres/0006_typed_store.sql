-- The typed Postgres store (src/store/postgres): JSON bodies become `json`, and lease times
-- come from the database's clock.
--
-- `json`, not `jsonb`: the store hands bodies back exactly as written, so an unchanged body
-- compares equal as text and is never rewritten; `jsonb` would re-render it (and cannot hold
-- a `\u0000` escape, which tool and model output may carry and which rows written before this
-- migration may already hold). Nothing queries inside a body, so `jsonb`'s operators and
-- indexes would buy nothing. The conversion validates and rewrites these tables once.
ALTER TABLE agent_versions ALTER COLUMN snapshot TYPE json USING snapshot::json;
ALTER TABLE environments ALTER COLUMN body TYPE json USING body::json;
ALTER TABLE sessions
    ALTER COLUMN body TYPE json USING body::json,
    ALTER COLUMN usage TYPE json USING usage::json,
    ALTER COLUMN engine TYPE json USING engine::json;
ALTER TABLE threads ALTER COLUMN body TYPE json USING body::json;
ALTER TABLE events
    ALTER COLUMN body TYPE json USING body::json,
    ALTER COLUMN internal TYPE json USING internal::json;
ALTER TABLE work_items ALTER COLUMN metadata TYPE json USING metadata::json;

-- The database's clock in microseconds since the Unix epoch: every lease deadline
-- (sessions.lease_expires_at, work_items.lease_expires_at), every un-acknowledged poll
-- (work_items.polled_at) and every worker's last poll (worker_polls.polled_at) is on it.
CREATE FUNCTION mast_clock() RETURNS BIGINT LANGUAGE sql VOLATILE PARALLEL SAFE
AS $$ SELECT (extract(epoch FROM clock_timestamp()) * 1000000)::bigint $$;

-- A replica's time `local` carried onto the database's clock. The replica adds the offset it
-- measured between its clock and mast_clock() (giving `pinned`) and says what it believes
-- mast_clock() reads now (`expected`). While that belief holds within 250 ms, `pinned` is
-- used as is, so times a replica compares stay exact to the microsecond; when it does not
-- (the replica's clock stepped since it measured), the time is re-based on mast_clock() in
-- this very statement, so a replica's wrong clock never decides a lease.
CREATE FUNCTION mast_time(pinned BIGINT, expected BIGINT) RETURNS BIGINT LANGUAGE sql
VOLATILE PARALLEL SAFE
AS $$
    SELECT CASE WHEN abs(c.now - expected) <= 250000 THEN pinned
                ELSE c.now + (pinned - expected) END
    FROM (SELECT mast_clock() AS now) c
$$;

-- Rows written before this migration hold lease times from the writing replica's clock,
-- which the replicas kept in step: they are on the database's clock already, to within
-- that skew. Leases last seconds, so nothing needs converting.
