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
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX journey_events_entrant_idx ON journey_events (entrant_key, id);
CREATE INDEX journey_events_keys_idx ON journey_events USING gin (entrant_keys);
