-- The session body's revision, bumped by every update that writes the body (by a trigger, so
-- no writer, in this binary or an older replica's, can change the body and leave the
-- revision behind). A reader that holds the body at some revision asks for the body only
-- when the row's revision differs: for an agent with a long prompt and many tools the body is
-- tens of kilobytes, which the engine's hot reads otherwise carried on every write.
ALTER TABLE sessions ADD COLUMN body_rev BIGINT NOT NULL DEFAULT 0;

CREATE FUNCTION mast_bump_body_rev() RETURNS trigger
LANGUAGE plpgsql
AS $$
BEGIN
    NEW.body_rev := OLD.body_rev + 1;
    RETURN NEW;
END
$$;

CREATE TRIGGER sessions_body_rev BEFORE UPDATE OF body ON sessions
    FOR EACH ROW EXECUTE FUNCTION mast_bump_body_rev();
