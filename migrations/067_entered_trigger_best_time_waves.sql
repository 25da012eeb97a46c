-- An entry's webhook event (journey.entered) written once a statement instead of once a row (issue 69): a worker
-- enters a batch of events' entrants by one INSERT, and a row trigger's plpgsql call and INSERT for each entrant
-- cost about as much again as the entries themselves, even for an app without an endpoint.
DROP TRIGGER journey_entrants_webhook_entered ON journey_entrants;

CREATE FUNCTION pushd_journey_entered_webhook_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_events (endpoint_id, app_id, type, data)
  SELECT e.id, e.app_id, 'journey.entered',
         jsonb_build_object('journey_id', n.journey_id, 'version', n.version, 'device_id', n.device_id, 'entrant', n.entrant_key)
  FROM entered n
  JOIN webhook_endpoints e ON e.app_id = n.app_id AND e.enabled AND e.events && ARRAY['*', 'journey.entered'];
  RETURN NULL;
END
$$;
CREATE TRIGGER journey_entrants_webhook_entered AFTER INSERT ON journey_entrants
  REFERENCING NEW TABLE AS entered FOR EACH STATEMENT EXECUTE FUNCTION pushd_journey_entered_webhook_events();

-- A best-time send's first and last wave, noted once it is cut (its batches hold the waves): what its record answers
-- as its send_at and estimated finish, which it has no schedule of its own to give.
ALTER TABLE notifications ADD COLUMN best_time_first_at timestamptz, ADD COLUMN best_time_last_at timestamptz;
