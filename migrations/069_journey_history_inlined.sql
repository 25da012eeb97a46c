-- A step's history append made inlinable (issue 69): PostgreSQL inlines a SQL function only when its body has no
-- sub-select, and migration 058's had one (for the cut to 100 entries), so every transition called it as a function
-- (about 6 µs of PostgreSQL CPU an entrant). The cut, rarely needed, moves to a function of its own; the results are
-- the same.
CREATE FUNCTION pushd_journey_history_kept(history jsonb, added jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT jsonb_build_array(history -> 0) || (
    SELECT coalesce(jsonb_agg(x ORDER BY i), '[]') FROM jsonb_array_elements(history || added) WITH ORDINALITY AS h(x, i)
    WHERE i > jsonb_array_length(history) + jsonb_array_length(added) - 99)
$$;

CREATE OR REPLACE FUNCTION pushd_journey_history(history jsonb, added jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN jsonb_array_length(history) + jsonb_array_length(added) <= 100 THEN history || added
    ELSE pushd_journey_history_kept(history, added) END
$$;
