-- Session fork (Mast's own `POST /v1/sessions/{id}/fork`): each event a fork copied keeps the
-- id of the original event it copies. Null for every event that was not copied by a fork.
ALTER TABLE events ADD COLUMN forked_from TEXT;
