-- A session's body (title, metadata, agent and environment snapshots: kilobytes, and tens of
-- them with a long system prompt) moves out of the session row, which every append updates.
-- SQLite rewrites a whole row on any update, overflow pages included, so the body would be
-- copied into the WAL (and synced) on every event; in its own table it is written only when it
-- changes.
CREATE TABLE session_bodies (
    session_id TEXT PRIMARY KEY,
    body       TEXT NOT NULL
);
INSERT INTO session_bodies (session_id, body) SELECT id, body FROM sessions;
ALTER TABLE sessions DROP COLUMN body;
