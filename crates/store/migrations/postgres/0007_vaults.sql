-- Vaults and their credentials. A credential's secrets are sealed by the
-- server (XChaCha20-Poly1305, bound to the credential id) before they reach this table.

CREATE TABLE vaults (
    id           TEXT COLLATE "C" PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    body         JSON NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    archived_at  BIGINT
);
CREATE INDEX vaults_by_workspace ON vaults (workspace_id, id);

CREATE TABLE vault_credentials (
    id           TEXT COLLATE "C" PRIMARY KEY,
    workspace_id TEXT NOT NULL,
    vault_id     TEXT NOT NULL,
    -- The normalised mcp_server_url, what MCP servers are matched on.
    server_url   TEXT NOT NULL,
    body         JSON NOT NULL,
    secret       BYTEA NOT NULL,
    created_at   BIGINT NOT NULL,
    updated_at   BIGINT NOT NULL,
    archived_at  BIGINT
);
CREATE INDEX vault_credentials_by_vault ON vault_credentials (vault_id, id);
-- One live credential per server in a vault, so a session's match is never ambiguous.
CREATE UNIQUE INDEX vault_credentials_one_live_per_server
    ON vault_credentials (vault_id, server_url) WHERE archived_at IS NULL;
