-- Memory stores, their memories and the memories' versions. Paths compare
-- bytewise (SQLite's default BINARY collation), which the listing's prefix ranges rely on.

CREATE TABLE memory_stores (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    body         TEXT NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    archived_at  INTEGER
);
CREATE INDEX memory_stores_by_workspace ON memory_stores (workspace_id, id);

CREATE TABLE memories (
    id                TEXT PRIMARY KEY,
    store_id          TEXT NOT NULL,
    path              TEXT NOT NULL,
    content           TEXT NOT NULL,
    content_sha256    TEXT NOT NULL,
    content_size      INTEGER NOT NULL,
    version_id        TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);
CREATE UNIQUE INDEX memories_by_path ON memories (store_id, path);

-- Versions outlive their memory (a `deleted` version records the deletion).
CREATE TABLE memory_versions (
    id             TEXT PRIMARY KEY,
    store_id       TEXT NOT NULL,
    memory_id      TEXT NOT NULL,
    operation      TEXT NOT NULL,
    path           TEXT,
    content        TEXT,
    content_sha256 TEXT,
    content_size   INTEGER,
    created_by     TEXT,
    -- The author's ids, filtered on by the versions list.
    api_key_id     TEXT,
    session_id     TEXT,
    created_at     INTEGER NOT NULL,
    redacted_at    INTEGER,
    redacted_by    TEXT
);
CREATE INDEX memory_versions_by_store ON memory_versions (store_id, id);
CREATE INDEX memory_versions_by_memory ON memory_versions (memory_id, id);
