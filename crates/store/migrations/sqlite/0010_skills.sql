-- Skills: a skill, its immutable versions and each version's files. A
-- version's bundle is small (see `domain::skill::MAX_BUNDLE_BYTES`), so its files live here
-- rather than in the blob store: a version and its files appear and disappear in one
-- transaction, and nothing is left to sweep. `name` is the slug every version must share.
CREATE TABLE skills (
    id                TEXT PRIMARY KEY,
    workspace_id      TEXT NOT NULL,
    display_name      TEXT NOT NULL,
    source            TEXT NOT NULL,
    name              TEXT NOT NULL,
    latest_version_id TEXT NOT NULL,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL
);
CREATE INDEX skills_by_workspace ON skills (workspace_id, id);

CREATE TABLE skill_versions (
    id          TEXT PRIMARY KEY,
    skill_id    TEXT NOT NULL REFERENCES skills (id) ON DELETE CASCADE,
    name        TEXT NOT NULL,
    description TEXT NOT NULL,
    created_at  INTEGER NOT NULL
);
CREATE INDEX skill_versions_by_skill ON skill_versions (skill_id, id);

-- `path` is relative to the bundle's top-level directory (`SKILL.md`, `scripts/run.sh`).
CREATE TABLE skill_files (
    version_id TEXT NOT NULL REFERENCES skill_versions (id) ON DELETE CASCADE,
    path       TEXT NOT NULL,
    executable INTEGER NOT NULL,
    content    BLOB NOT NULL,
    PRIMARY KEY (version_id, path)
);
