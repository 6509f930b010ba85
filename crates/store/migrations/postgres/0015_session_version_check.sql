-- The version check of a session write decided on a copy of the row (`Store::transact_from`):
-- it locks the row if it is still at `expected` (its `xmin`, which every update of the row
-- changes) and fails otherwise, so nothing after it in the transaction runs and the caller
-- decides again on the current row. Under READ COMMITTED a row updated concurrently is
-- re-checked at its newest version once the lock is granted, so a write that raced this one
-- is seen.
CREATE FUNCTION mast_expect_session(sid TEXT, expected BIGINT) RETURNS VOID LANGUAGE plpgsql
AS $$
BEGIN
    PERFORM 1 FROM sessions WHERE id = sid AND xmin::text::bigint = expected FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'session % is no longer at version %', sid, expected
            USING ERRCODE = 'MA001';
    END IF;
END
$$;
