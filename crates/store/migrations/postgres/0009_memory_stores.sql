-- Memory stores, their memories and the memories' versions. Paths compare
-- bytewise (COLLATE "C"), which the listing's prefix ranges rely on.

CREATE TABLE memory_stores (
    id           TEXT COLLATE "C" PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    body         JSON NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    archived_at  BIGINT
);
CREATE INDEX memory_stores_by_workspace ON memory_stores (workspace_id, id);

CREATE TABLE memories (
    id                TEXT COLLATE "C" PRIMARY KEY,
    store_id          TEXT COLLATE "C" NOT NULL,
    path              TEXT COLLATE "C" NOT NULL,
    content           TEXT NOT NULL,
    content_sha256    TEXT NOT NULL,
    content_size      BIGINT NOT NULL,
    version_id        TEXT NOT NULL,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL
);
CREATE UNIQUE INDEX memories_by_path ON memories (store_id, path);

-- Versions outlive their memory (a `deleted` version records the deletion).
CREATE TABLE memory_versions (
    id             TEXT COLLATE "C" PRIMARY KEY,
    store_id       TEXT COLLATE "C" NOT NULL,
    memory_id      TEXT NOT NULL,
    operation      TEXT NOT NULL,
    path           TEXT,
    content        TEXT,
    content_sha256 TEXT,
    content_size   BIGINT,
    created_by     JSON,
    -- The author's ids, filtered on by the versions list.
    api_key_id     TEXT,
    session_id     TEXT,
    created_at     BIGINT NOT NULL,
    redacted_at    BIGINT,
    redacted_by    JSON
);
CREATE INDEX memory_versions_by_store ON memory_versions (store_id, id);
CREATE INDEX memory_versions_by_memory ON memory_versions (memory_id, id);
