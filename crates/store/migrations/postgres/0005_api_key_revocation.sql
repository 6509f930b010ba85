-- Revoked API keys stay listed (who had access, and until when) and never authenticate again.
-- They also keep counting as keys: revoking the last one must not reopen an open-mode server.
ALTER TABLE api_keys ADD COLUMN revoked_at BIGINT;
