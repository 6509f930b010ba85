-- Timestamps are microseconds since the Unix epoch, bound from Rust; JSON bodies are opaque
-- text; anything filtered or ordered on is a real column. Ids sort by creation time byte by
-- byte, so they use the "C" collation whatever the database default is.

CREATE TABLE workspaces (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE,
    created_at BIGINT NOT NULL
);
INSERT INTO workspaces (id, name, created_at) VALUES ('wrkspc_default', 'default', 0);

CREATE TABLE api_keys (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL REFERENCES workspaces (id),
    key_hash     TEXT NOT NULL UNIQUE,
    created_at   BIGINT NOT NULL
);

CREATE TABLE agents (
    id              TEXT COLLATE "C" PRIMARY KEY,
    workspace_id    TEXT NOT NULL,
    current_version BIGINT NOT NULL,
    created_at      BIGINT NOT NULL,
    updated_at      BIGINT NOT NULL,
    archived_at     BIGINT
);
CREATE INDEX agents_by_workspace ON agents (workspace_id, id);

CREATE TABLE agent_versions (
    agent_id   TEXT NOT NULL REFERENCES agents (id),
    version    BIGINT NOT NULL,
    snapshot   TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    PRIMARY KEY (agent_id, version)
);

CREATE TABLE environments (
    id           TEXT COLLATE "C" PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    name         TEXT NOT NULL,
    body         TEXT NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    archived_at  BIGINT,
    UNIQUE (workspace_id, name)
);
CREATE INDEX environments_by_workspace ON environments (workspace_id, id);

CREATE TABLE sessions (
    id               TEXT COLLATE "C" PRIMARY KEY,
    workspace_id     TEXT NOT NULL,
    agent_id         TEXT NOT NULL,
    agent_version    BIGINT NOT NULL,
    environment_id   TEXT NOT NULL,
    status           TEXT NOT NULL,
    body             TEXT NOT NULL,
    usage            TEXT NOT NULL,
    active_micros    BIGINT NOT NULL DEFAULT 0,
    running_since    BIGINT,
    last_seq         BIGINT NOT NULL DEFAULT 0,
    engine           TEXT NOT NULL,
    lease_owner      TEXT,
    lease_expires_at BIGINT,
    created_at       BIGINT NOT NULL,
    updated_at       BIGINT NOT NULL,
    archived_at      BIGINT,
    terminated_at    BIGINT
);
CREATE INDEX sessions_by_workspace ON sessions (workspace_id, id);
CREATE INDEX sessions_by_status ON sessions (status);

CREATE TABLE threads (
    id                TEXT COLLATE "C" PRIMARY KEY,
    session_id        TEXT NOT NULL,
    parent_thread_id  TEXT,
    spawning_event_id TEXT,
    status            TEXT NOT NULL,
    body              TEXT NOT NULL,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    archived_at       BIGINT
);
CREATE INDEX threads_by_session ON threads (session_id, id);

CREATE TABLE events (
    session_id   TEXT NOT NULL,
    seq          BIGINT NOT NULL,
    id           TEXT COLLATE "C" NOT NULL UNIQUE,
    thread_id    TEXT,
    type         TEXT NOT NULL,
    body         TEXT NOT NULL,
    internal     TEXT,
    answers      TEXT,
    answer_kind  TEXT,
    processed_at BIGINT,
    created_at   BIGINT NOT NULL,
    PRIMARY KEY (session_id, seq)
);
-- One answer of each kind per blocking event: a second result for the same tool use fails.
CREATE UNIQUE INDEX events_one_answer ON events (session_id, answers, answer_kind) WHERE answers IS NOT NULL;
-- Queued input the runner has not consumed yet.
CREATE INDEX events_unprocessed ON events (session_id, seq) WHERE processed_at IS NULL;
