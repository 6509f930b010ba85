-- Files API (`/v1/files`): one row per stored file. The bytes live in the blob store (local
-- directory or S3-compatible bucket) under the file's id; a row is inserted only once its
-- bytes are durable, so every listed file can be downloaded. `scope_id` is the session a file
-- belongs to (session outputs), NULL for uploads.
CREATE TABLE files (
    id           TEXT PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    filename     TEXT NOT NULL,
    mime_type    TEXT NOT NULL,
    size_bytes   INTEGER NOT NULL,
    downloadable INTEGER NOT NULL,
    scope_id     TEXT,
    created_at   INTEGER NOT NULL,
    expires_at   INTEGER
);
CREATE INDEX files_by_workspace ON files (workspace_id, id);
CREATE INDEX files_by_scope ON files (workspace_id, scope_id, id) WHERE scope_id IS NOT NULL;
CREATE INDEX files_by_expiry ON files (expires_at) WHERE expires_at IS NOT NULL;
