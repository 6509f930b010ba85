-- mast_time in PL/pgSQL, with the same results. As an SQL function whose body has a FROM
-- clause it could not be inlined, so the server parsed and planned that body again on every
-- call: in every session write that grants a lease. PL/pgSQL keeps the plans of its
-- expressions for the life of the connection.
CREATE OR REPLACE FUNCTION mast_time(pinned BIGINT, expected BIGINT) RETURNS BIGINT
LANGUAGE plpgsql VOLATILE PARALLEL SAFE
AS $$
DECLARE
    db_now BIGINT := mast_clock();
BEGIN
    IF abs(db_now - expected) <= 250000 THEN
        RETURN pinned;
    END IF;
    RETURN db_now + (pinned - expected);
END
$$;
