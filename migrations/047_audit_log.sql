-- The audit log (issue 60): one row per change of consequence to an app (an app or key created, a key revoked or
-- limited, credentials or settings changed, identity verification switched, a notification created, canceled or its
-- A/B winner picked), with who made it (the key and its role, or the command line), from which address and in which
-- request. Written in the transaction of the change it records. Partitioned by the UTC day of `at`, as migrations
-- 023, 030 and 034 did: the workers' maintenance creates each day ahead and drops a day whole once it is past
-- RETENTION_AUDIT_DAYS (src/queue/retention.ts). No foreign key to apps: a row is a record, and every notification
-- created would pay the check.
CREATE TABLE audit_log (
  id             uuid NOT NULL DEFAULT pushd_uuid7(),
  at             timestamptz NOT NULL DEFAULT now(),
  app_id         uuid NOT NULL,
  action         text NOT NULL,
  actor_key_id   uuid,
  actor_role     text NOT NULL CHECK (actor_role IN ('read', 'write', 'sdk', 'cli')),
  client_address text,
  request_id     text,
  -- names and ids only, never a secret (src/domain/audit.ts, AuditDetails)
  details        jsonb NOT NULL DEFAULT '{}',
  PRIMARY KEY (id, at)
) PARTITION BY RANGE (at);
-- an app's rows in time order, newest first: GET /v6/audit
CREATE INDEX audit_log_app_at_idx ON audit_log (app_id, at, id);
CREATE TABLE audit_log_default PARTITION OF audit_log DEFAULT;

-- today's and the next three days'
DO $$
DECLARE
  d date;
BEGIN
  FOR d IN SELECT generate_series((now() AT TIME ZONE 'UTC')::date, (now() AT TIME ZONE 'UTC')::date + 3, interval '1 day')::date LOOP
    EXECUTE format('CREATE TABLE %I PARTITION OF audit_log FOR VALUES FROM (%L) TO (%L)',
      'audit_log_p' || to_char(d, 'YYYYMMDD'), d::text || ' 00:00:00+00', (d + 1)::text || ' 00:00:00+00');
  END LOOP;
END $$;
