-- When the earliest lifetime of a session's open workflow runs ends (microseconds since the
-- epoch; null without open runs), kept with every write of the session's engine state, so the
-- reaper ends an expired run even in a session that nothing else wakes.
ALTER TABLE sessions ADD COLUMN workflow_deadline_at BIGINT;
CREATE INDEX sessions_workflow_deadline ON sessions (workflow_deadline_at) WHERE workflow_deadline_at IS NOT NULL;
