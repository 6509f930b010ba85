-- Deployments and their runs. `body` is the definition each firing turns into
-- a session (`domain::deployment::DeploymentSpec`); the columns are what lists filter on and
-- what the scheduler claims. A deployment is paused exactly when `paused_reason` is set.
-- `next_fire_at` is the schedule's next firing: a replica claims a firing by moving it
-- forward with a conditional update, so exactly one replica fires each slot.
CREATE TABLE deployments (
    id            TEXT COLLATE "C" PRIMARY KEY,
    workspace_id  TEXT NOT NULL,
    agent_id      TEXT NOT NULL,
    body          TEXT NOT NULL,
    paused_reason TEXT,
    next_fire_at  BIGINT,
    last_run_at   BIGINT,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL,
    archived_at   BIGINT
);
CREATE INDEX deployments_by_workspace ON deployments (workspace_id, id);
CREATE INDEX deployments_due ON deployments (next_fire_at)
    WHERE next_fire_at IS NOT NULL AND paused_reason IS NULL AND archived_at IS NULL;

-- Append-only: one row per firing, with its session or the error that kept it from starting.
-- At most one run per scheduled slot of a deployment.
CREATE TABLE deployment_runs (
    id            TEXT COLLATE "C" PRIMARY KEY,
    workspace_id  TEXT NOT NULL,
    deployment_id TEXT COLLATE "C" NOT NULL,
    trigger_type  TEXT NOT NULL,
    scheduled_at  BIGINT,
    agent_id      TEXT NOT NULL,
    agent_version BIGINT NOT NULL,
    session_id    TEXT,
    error         TEXT,
    created_at    BIGINT NOT NULL
);
CREATE INDEX deployment_runs_by_workspace ON deployment_runs (workspace_id, id);
CREATE INDEX deployment_runs_by_deployment ON deployment_runs (deployment_id, id);
CREATE UNIQUE INDEX deployment_runs_one_per_slot ON deployment_runs (deployment_id, scheduled_at)
    WHERE scheduled_at IS NOT NULL;
