-- Idempotency keys partitioned by UTC day of when they were claimed (issue 38), as migrations 023 and 030 did for
-- receipts and activity: the workers' maintenance creates each day's partition ahead and drops a day whole once all
-- its keys are past their 24 hours (src/queue/retention.ts), instead of the sweep's DELETE of 10,000 rows at a time.
-- A partitioned table's primary key must hold its partition key, so (app_id, key) is no longer unique by itself: a key
-- taken over once it expired is a new row, and a claim holds a transaction-scoped advisory lock on its app and key
-- while it looks for a live row and inserts one (IdempotencyRepository.claim), which the unique index did before.
ALTER TABLE idempotency_keys RENAME TO idempotency_keys_unpartitioned;
ALTER TABLE idempotency_keys_unpartitioned RENAME CONSTRAINT idempotency_keys_pkey TO idempotency_keys_unpartitioned_pkey;
ALTER TABLE idempotency_keys_unpartitioned RENAME CONSTRAINT idempotency_keys_app_id_fkey TO idempotency_keys_unpartitioned_app_id_fkey;
DROP INDEX idempotency_keys_created_idx;
CREATE TABLE idempotency_keys (
  app_id       uuid NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  key          text NOT NULL,
  -- SHA-256 of method, path and the body's canonical JSON: the same key with another request is refused.
  request_hash bytea NOT NULL,
  -- NULL while the first request has committed what it created but not answered yet (a transactional send).
  status       smallint,
  -- json, not jsonb: a replay answers the first answer's bytes in their order.
  body         json,
  -- what the first request created, named to a retry that comes while it has not answered yet
  resource_id  uuid,
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (app_id, key, created_at)
) PARTITION BY RANGE (created_at);
CREATE TABLE idempotency_keys_default PARTITION OF idempotency_keys DEFAULT;

-- the days of the keys still live (24 hours: IDEMPOTENCY_KEY_TTL_HOURS), today's and the next three days'
DO $$
DECLARE
  d date;
BEGIN
  FOR d IN SELECT generate_series((now() AT TIME ZONE 'UTC')::date - 1, (now() AT TIME ZONE 'UTC')::date + 3, interval '1 day')::date LOOP
    EXECUTE format('CREATE TABLE %I PARTITION OF idempotency_keys FOR VALUES FROM (%L) TO (%L)',
      'idempotency_keys_p' || to_char(d, 'YYYYMMDD'), d::text || ' 00:00:00+00', (d + 1)::text || ' 00:00:00+00');
  END LOOP;
END $$;

-- only the live keys: a request already ignored the others, which the sweep would have deleted
INSERT INTO idempotency_keys
SELECT app_id, key, request_hash, status, body, resource_id, created_at FROM idempotency_keys_unpartitioned
WHERE created_at >= now() - interval '24 hours';
DROP TABLE idempotency_keys_unpartitioned;
