-- Journeys, second round: each entrant's history, kept on its row (appended by the statement that moves it, so a
-- step costs no row or index entry more, and dropped with its day's partition); and who has entered a journey, kept
-- past the entrants' retention so a re-entry rule still holds once their rows are gone.
ALTER TABLE journey_entrants ADD COLUMN history jsonb NOT NULL DEFAULT '[]';

-- The history with `added` appended, kept to its first entry (the entry) and its last 99: an entrant going round a
-- loop for months has a row of bounded size.
CREATE FUNCTION pushd_journey_history(history jsonb, added jsonb) RETURNS jsonb
LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
  SELECT CASE WHEN jsonb_array_length(history) + jsonb_array_length(added) <= 100 THEN history || added
    ELSE jsonb_build_array(history -> 0) || (
      SELECT coalesce(jsonb_agg(x ORDER BY i), '[]') FROM jsonb_array_elements(history || added) WITH ORDINALITY AS h(x, i)
      WHERE i > jsonb_array_length(history) + jsonb_array_length(added) - 99)
  END
$$;

-- One row per journey and entrant that ever entered it, written by the maintenance from a day's entrants just before
-- that day is dropped (so the event path writes nothing more), read by the entry's re-entry rule.
CREATE TABLE journey_entered (
  journey_id      uuid NOT NULL REFERENCES journeys(id) ON DELETE CASCADE,
  entrant_key     text NOT NULL,
  last_entered_at timestamptz NOT NULL,
  PRIMARY KEY (journey_id, entrant_key)
);
