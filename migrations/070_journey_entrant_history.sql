-- Entrants' histories off their rows (issue 69): kept on the row (migration 058), every transition wrote the whole
-- history again (WAL a step 727 bytes bare, 1,787 with a history of 20 entries). Each move now appends one row of
-- the entries it adds, written by the statement that moves the entrants; the entrant's row stays the same size.
-- Partitioned by the entrant's entered_at, as journey_entrants, so retention drops a day's histories whole with its
-- entrants (DAY_PARTITIONED). Keyed by the entrant's seq after the move: a move appends once however often it runs;
-- entered_at first, so a batch of entrants that entered together writes its rows into neighbouring index pages.
CREATE TABLE journey_entrant_history (
  entrant_id uuid NOT NULL,
  entered_at timestamptz NOT NULL,
  seq        integer NOT NULL,
  -- the move's entries in order (src/domain/journey-history.ts), one or more
  entries    jsonb NOT NULL,
  PRIMARY KEY (entered_at, entrant_id, seq)
) PARTITION BY RANGE (entered_at);
CREATE TABLE journey_entrant_history_default PARTITION OF journey_entrant_history DEFAULT;

-- a partition for each day journey_entrants has one, and for the days the maintenance keeps ready
DO $$
DECLARE
  d date;
BEGIN
  FOR d IN
    SELECT to_date(substring(c.relname from '_p([0-9]{8})$'), 'YYYYMMDD')
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
    WHERE i.inhparent = 'journey_entrants'::regclass AND c.relname ~ '^journey_entrants_p[0-9]{8}$'
    UNION
    SELECT generate_series((now() AT TIME ZONE 'UTC')::date - 1, (now() AT TIME ZONE 'UTC')::date + 3, interval '1 day')::date
  LOOP
    EXECUTE format('CREATE TABLE %I PARTITION OF journey_entrant_history FOR VALUES FROM (%L) TO (%L)',
      'journey_entrant_history_p' || to_char(d, 'YYYYMMDD'), d::text || ' 00:00:00+00', (d + 1)::text || ' 00:00:00+00');
  END LOOP;
END $$;

-- Each kept history moved as its first entry (seq 0, as an entry writes it) and the rest as of the entrant's seq: the
-- entries read back in the same order, and the moves after it append at higher seqs.
INSERT INTO journey_entrant_history (entrant_id, entered_at, seq, entries)
SELECT id, entered_at, 0, CASE WHEN seq = 0 THEN history ELSE jsonb_build_array(history -> 0) END
FROM journey_entrants WHERE jsonb_array_length(history) > 0
UNION ALL
SELECT id, entered_at, seq, history - 0
FROM journey_entrants WHERE seq > 0 AND jsonb_array_length(history) > 1;

ALTER TABLE journey_entrants DROP COLUMN history;
DROP FUNCTION pushd_journey_history(jsonb, jsonb);
DROP FUNCTION pushd_journey_history_kept(jsonb, jsonb);
