-- Self-hosted environments: environment keys for workers, and the work queue.

CREATE TABLE environment_keys (
    id             TEXT PRIMARY KEY,
    workspace_id   TEXT NOT NULL,
    environment_id TEXT NOT NULL,
    key_hash       TEXT NOT NULL UNIQUE,
    created_at     INTEGER NOT NULL
);

CREATE TABLE work_items (
    id                  TEXT PRIMARY KEY,
    workspace_id        TEXT NOT NULL,
    environment_id      TEXT NOT NULL,
    session_id          TEXT NOT NULL,
    state               TEXT NOT NULL,
    metadata            TEXT NOT NULL,
    created_at          INTEGER NOT NULL,
    updated_at          INTEGER NOT NULL,
    polled_at           INTEGER,
    polled_by           TEXT,
    acknowledged_at     INTEGER,
    started_at          INTEGER,
    latest_heartbeat_at INTEGER,
    lease_expires_at    INTEGER,
    ttl_seconds         INTEGER NOT NULL,
    stop_requested_at   INTEGER,
    stopped_at          INTEGER,
    token_hash          TEXT UNIQUE
);
CREATE INDEX work_items_queue ON work_items (environment_id, state, created_at);
CREATE INDEX work_items_by_session ON work_items (session_id, state);
-- At most one live item per session, whatever queues it.
CREATE UNIQUE INDEX work_items_one_live ON work_items (session_id) WHERE state <> 'stopped';
CREATE INDEX work_items_leases ON work_items (state, lease_expires_at);
CREATE INDEX environment_keys_by_environment ON environment_keys (environment_id);

CREATE TABLE worker_polls (
    environment_id TEXT NOT NULL,
    worker_id      TEXT NOT NULL,
    polled_at      INTEGER NOT NULL,
    PRIMARY KEY (environment_id, worker_id)
);
