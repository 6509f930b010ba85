-- Hooks (Mast's own addition): endpoints the loop asks before a tool call runs.
-- The body is the hook as responses show it; the signing secret is sealed by the server
-- (XChaCha20-Poly1305, bound to the hook id) before it reaches this table.

CREATE TABLE hooks (
    id            TEXT PRIMARY KEY,
    workspace_id  TEXT NOT NULL,
    event         TEXT NOT NULL,
    body          TEXT NOT NULL,
    secret        BLOB NOT NULL,
    created_at    INTEGER NOT NULL
);
CREATE INDEX hooks_by_workspace_event ON hooks (workspace_id, event, id);
