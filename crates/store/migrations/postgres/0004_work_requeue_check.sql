-- A work item that stopped while its session may still wait on a worker is marked in the same
-- transaction, so the follow-up (queue a fresh item when the session still waits) survives a
-- crash between the two: any replica's reaper finishes what was marked.
ALTER TABLE work_items ADD COLUMN requeue_check INTEGER NOT NULL DEFAULT 0;
CREATE INDEX work_items_requeue_check ON work_items (requeue_check) WHERE requeue_check = 1;
