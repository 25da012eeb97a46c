-- Events waiting for the journey workers (issue 69): an events request writes one row here in its own transaction
-- when a journey of the app listens for one of them, and a worker enters, wakes and converts the entrant from it,
-- deleting the row in the transaction that does so (a worker killed meanwhile leaves the row for the next).
CREATE TABLE journey_events (
  id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  app_id uuid NOT NULL,
  -- the entrant the events are of ('u:<user>' or 'd:<device>'): its rows are taken in order
  entrant_key text NOT NULL,
  -- every key its entries may be held under (its devices' own too): due steps of those wait for the row
  entrant_keys text[] NOT NULL,
  device_ids uuid[] NOT NULL,
  user_id text,
  -- the events' keys (name and source.name) and each event by key, as templates read it
  keys text[] NOT NULL,
  events jsonb NOT NULL,
  -- how many of the events each key names (a digest step counts them)
  counts integer[] NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  -- polls whose batch failed on this row alone: past a few it is dropped, so one bad row holds no one else's
  attempts integer NOT NULL DEFAULT 0
);
CREATE INDEX journey_events_entrant_idx ON journey_events (entrant_key, id);
CREATE INDEX journey_events_keys_idx ON journey_events USING gin (entrant_keys);

-- A digest step counts the events its entrant records in its window as the workers apply them (a user's event,
-- recorded on each of its devices, once): the entrant's running count, which the window's start notes.
ALTER TABLE journey_entrants ADD COLUMN digest_count integer NOT NULL DEFAULT 0;
-- the journeys already made listen for their digest steps' events too (listenedEvents)
UPDATE journeys j SET listens = array(
  SELECT DISTINCT unnest(j.listens || array(
    SELECT s->>'event' FROM journey_versions v, jsonb_array_elements(v.definition->'steps') s
    WHERE v.journey_id = j.id AND s->>'type' = 'digest')))
WHERE state <> 'archived';
