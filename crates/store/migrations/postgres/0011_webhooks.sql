-- Webhooks: endpoints per workspace, the outbox of deliveries (one row per event and
-- endpoint that wants it, written in the same transaction as the change it reports) and
-- every attempt to send one. Lease and retry times are on the database's clock
-- (mast_clock()), so replicas with drifting clocks agree on who may send what and when.

CREATE TABLE webhook_endpoints (
    id            TEXT COLLATE "C" PRIMARY KEY,
    workspace_id  TEXT NOT NULL,
    url           TEXT NOT NULL,
    -- JSON array of the event types wanted, e.g. ["session.status_idled"]; matched on the
    -- quoted type, so a delivery is written only for endpoints that want its event.
    event_types   TEXT NOT NULL,
    description   TEXT,
    enabled       BOOLEAN NOT NULL,
    -- The signing secret, sealed by the server's key and bound to the endpoint id.
    secret        BYTEA NOT NULL,
    -- The secret before the last rotation, which keeps signing until previous_until.
    previous_secret BYTEA,
    previous_until BIGINT,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);
CREATE INDEX webhook_endpoints_by_workspace ON webhook_endpoints (workspace_id, id);

CREATE TABLE webhook_deliveries (
    -- Insertion order: an endpoint gets its deliveries in this order, one at a time.
    seq           BIGSERIAL PRIMARY KEY,
    id            TEXT COLLATE "C" NOT NULL UNIQUE,
    endpoint_id   TEXT NOT NULL,
    -- The envelope's id, sent as `webhook-id`: the same on every retry and replay.
    event_id      TEXT NOT NULL,
    event_type    TEXT NOT NULL,
    -- The exact body that is signed and sent.
    payload       TEXT NOT NULL,
    -- pending | delivered | failed
    state         TEXT NOT NULL,
    attempts      BIGINT NOT NULL DEFAULT 0,
    next_attempt_at BIGINT NOT NULL,
    lease_owner   TEXT,
    lease_expires_at BIGINT,
    last_status   BIGINT,
    last_error    TEXT,
    created_at    BIGINT NOT NULL,
    updated_at    BIGINT NOT NULL
);
CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (endpoint_id, seq) WHERE state = 'pending';
CREATE INDEX webhook_deliveries_by_endpoint ON webhook_deliveries (endpoint_id, id);

CREATE TABLE webhook_attempts (
    id            TEXT COLLATE "C" PRIMARY KEY,
    delivery_id   TEXT NOT NULL,
    attempted_at  BIGINT NOT NULL,
    status_code   BIGINT,
    latency_ms    BIGINT NOT NULL,
    error         TEXT,
    next_retry_at BIGINT
);
CREATE INDEX webhook_attempts_by_delivery ON webhook_attempts (delivery_id, id);
