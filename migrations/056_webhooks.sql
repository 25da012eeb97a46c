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

-- pushd itself disables an endpoint (a 410, or failing for days): its audit row's actor is the system
ALTER TABLE audit_log DROP CONSTRAINT audit_log_actor_role_check;
ALTER TABLE audit_log ADD CONSTRAINT audit_log_actor_role_check CHECK (actor_role IN ('read', 'write', 'sdk', 'cli', 'system'));
