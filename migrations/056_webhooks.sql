-- Outbound webhooks: an app's endpoints, the events recorded for them and the attempts to send them
-- (docs/api/webhooks.md). An event is written in the transaction of the fact it reports, one row per endpoint
-- subscribed to it (a batch's outcomes are one row, expanded into events when sent), so a crash between the fact
-- and the send loses nothing; the workers' sender claims due rows with SKIP LOCKED.
CREATE TABLE webhook_endpoints (
  id                     uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  app_id                 uuid NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
  url                    text NOT NULL,
  -- event types, or '*' for all of them (src/domain/webhooks.ts)
  events                 text[] NOT NULL,
  description            text NOT NULL DEFAULT '',
  enabled                boolean NOT NULL DEFAULT true,
  -- why it was disabled by pushd (a 410, failing for days), null when by a key or not at all
  disabled_reason        text,
  -- the signing secret sealed under the secrets key (src/domain/secrets.ts); the one a rotation replaced still
  -- signs until previous_secret_until
  secret                 text NOT NULL CHECK (secret LIKE 'pushd:v1:%'),
  previous_secret        text CHECK (previous_secret IS NULL OR previous_secret LIKE 'pushd:v1:%'),
  previous_secret_until  timestamptz,
  -- the endpoint's own backoff: the consecutive failed requests, since when, and when it is tried next
  failures               int NOT NULL DEFAULT 0,
  failing_since          timestamptz,
  next_attempt_at        timestamptz NOT NULL DEFAULT now(),
  created_at             timestamptz NOT NULL DEFAULT now(),
  updated_at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX webhook_endpoints_app_idx ON webhook_endpoints (app_id);

-- The delivery path keeps which apps have endpoints in a cache that every process empties on an announcement
-- (migration 015): a new endpoint's events are recorded from the next batch on.
CREATE TRIGGER webhook_endpoints_announce_change AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON webhook_endpoints
  FOR EACH STATEMENT EXECUTE FUNCTION pushd_announce_app_change();

-- The outbox, partitioned by the UTC day of created_at and dropped whole past RETENTION_WEBHOOK_EVENTS_DAYS.
-- No foreign key: every recorded batch would pay the check, and a deleted endpoint's rows are skipped.
CREATE TABLE webhook_events (
  id          uuid NOT NULL DEFAULT pushd_uuid7(),
  created_at  timestamptz NOT NULL DEFAULT now(),
  endpoint_id uuid NOT NULL,
  app_id      uuid NOT NULL,
  -- an event type, or 'batch': a recorded batch's outcomes (push.delivered, push.failed, device.unregistered)
  type        text NOT NULL,
  data        jsonb NOT NULL,
  state       text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'sent', 'failed')),
  attempts    int NOT NULL DEFAULT 0,
  -- when a sender may take it: now, or after a claim's lease runs out (its sender died)
  due_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (id, created_at)
) PARTITION BY RANGE (created_at);
CREATE INDEX webhook_events_due_idx ON webhook_events (due_at) WHERE state = 'pending';
CREATE INDEX webhook_events_endpoint_idx ON webhook_events (endpoint_id, created_at);
CREATE TABLE webhook_events_default PARTITION OF webhook_events DEFAULT;

-- One row per request sent (GET /v6/webhooks/:id/attempts), kept as long as the events.
CREATE TABLE webhook_attempts (
  id          uuid NOT NULL DEFAULT pushd_uuid7(),
  at          timestamptz NOT NULL DEFAULT now(),
  endpoint_id uuid NOT NULL,
  events      int NOT NULL,
  -- the HTTP status, null when no answer came (refused, timed out)
  status      int,
  latency_ms  int NOT NULL,
  error       text,
  -- the start of the answer's body
  snippet     text,
  PRIMARY KEY (id, at)
) PARTITION BY RANGE (at);
CREATE INDEX webhook_attempts_endpoint_idx ON webhook_attempts (endpoint_id, at);
CREATE TABLE webhook_attempts_default PARTITION OF webhook_attempts DEFAULT;

DO $$
DECLARE
  d date;
  t text;
BEGIN
  FOREACH t IN ARRAY ARRAY['webhook_events', 'webhook_attempts'] LOOP
    FOR d IN SELECT generate_series((now() AT TIME ZONE 'UTC')::date, (now() AT TIME ZONE 'UTC')::date + 3, interval '1 day')::date LOOP
      EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
        t || '_p' || to_char(d, 'YYYYMMDD'), t, d::text || ' 00:00:00+00', (d + 1)::text || ' 00:00:00+00');
    END LOOP;
  END LOOP;
END $$;

-- The events of facts recorded in many places (a notification closed or canceled by any path, an open, a conversion,
-- a journey entrant moving), written by triggers in the statement that records the fact: one place each, in its
-- transaction. An app without an enabled endpoint costs one index probe.
CREATE FUNCTION pushd_record_webhook_event(p_app uuid, p_type text, p_data jsonb) RETURNS void LANGUAGE sql AS $$
  INSERT INTO webhook_events (endpoint_id, app_id, type, data)
  SELECT e.id, e.app_id, p_type, p_data
  FROM webhook_endpoints e
  WHERE e.app_id = p_app AND e.enabled AND e.events && ARRAY['*', p_type]
$$;

CREATE FUNCTION pushd_notification_webhook_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NOT EXISTS (SELECT 1 FROM webhook_endpoints WHERE app_id = NEW.app_id AND enabled) THEN
    RETURN NULL;
  END IF;
  IF NEW.state = 'canceled' THEN
    PERFORM pushd_record_webhook_event(NEW.app_id, 'notification.canceled', jsonb_build_object('notification_id', NEW.id));
    RETURN NULL;
  END IF;
  -- its counts are its batches' sums and its fan-out ranges' (NotificationsRepository.withCounters)
  PERFORM pushd_record_webhook_event(NEW.app_id, 'notification.completed', (
    SELECT jsonb_build_object(
      'notification_id', NEW.id, 'state', NEW.state,
      'devices_targeted', NEW.devices_targeted
        + coalesce((SELECT sum(r.devices_targeted) FROM fanout_ranges r WHERE r.notification_id = NEW.id), 0),
      'pushes_succeeded', coalesce(sum(b.succeeded), 0), 'pushes_failed', coalesce(sum(b.failed), 0),
      'pushes_invalidated', coalesce(sum(b.invalidated), 0), 'pushes_expired', coalesce(sum(b.expired), 0))
    FROM delivery_batches b
    WHERE b.notification_id = NEW.id AND b.generation = NEW.generation));
  RETURN NULL;
END
$$;
CREATE TRIGGER notifications_webhook_event AFTER UPDATE OF state ON notifications
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state AND NEW.state IN ('sent', 'failed', 'canceled'))
  EXECUTE FUNCTION pushd_notification_webhook_event();

CREATE FUNCTION pushd_open_webhook_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pushd_record_webhook_event(NEW.app_id, 'push.opened', jsonb_build_object(
    'notification_id', NEW.notification_id, 'device_id', NEW.device_id, 'kind', NEW.kind, 'opened_at', NEW.opened_at));
  RETURN NULL;
END
$$;
CREATE TRIGGER push_opens_webhook_event AFTER INSERT ON push_opens
  FOR EACH ROW EXECUTE FUNCTION pushd_open_webhook_event();

CREATE FUNCTION pushd_conversion_webhook_event() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  app uuid;
BEGIN
  SELECT n.app_id INTO app FROM notifications n WHERE n.id = NEW.notification_id;
  IF app IS NULL OR NOT EXISTS (SELECT 1 FROM webhook_endpoints WHERE app_id = app AND enabled) THEN
    RETURN NULL;
  END IF;
  PERFORM pushd_record_webhook_event(app, 'conversion', jsonb_build_object(
    'notification_id', NEW.notification_id, 'device_id', NEW.device_id, 'source', NEW.source, 'name', NEW.name,
    'count', NEW.count - CASE WHEN TG_OP = 'UPDATE' THEN OLD.count ELSE 0 END));
  RETURN NULL;
END
$$;
CREATE TRIGGER notification_conversions_webhook_event AFTER INSERT OR UPDATE OF count ON notification_conversions
  FOR EACH ROW EXECUTE FUNCTION pushd_conversion_webhook_event();

CREATE FUNCTION pushd_journey_webhook_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pushd_record_webhook_event(NEW.app_id,
    CASE WHEN TG_OP = 'INSERT' THEN 'journey.entered' ELSE 'journey.' || NEW.outcome END,
    jsonb_build_object('journey_id', NEW.journey_id, 'version', NEW.version, 'device_id', NEW.device_id, 'entrant', NEW.entrant_key));
  RETURN NULL;
END
$$;
CREATE TRIGGER journey_entrants_webhook_entered AFTER INSERT ON journey_entrants
  FOR EACH ROW EXECUTE FUNCTION pushd_journey_webhook_event();
CREATE TRIGGER journey_entrants_webhook_left AFTER UPDATE OF outcome ON journey_entrants
  FOR EACH ROW WHEN (OLD.outcome IS DISTINCT FROM NEW.outcome AND NEW.outcome IN ('converted', 'exited'))
  EXECUTE FUNCTION pushd_journey_webhook_event();

-- pushd itself disables an endpoint (a 410, or failing for days): its audit row's actor is the system
ALTER TABLE audit_log DROP CONSTRAINT audit_log_actor_role_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_actor_role_check CHECK (actor_role IN ('read', 'write', 'sdk', 'cli', 'system'));
