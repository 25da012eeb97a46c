-- Idempotency-Key: the first answer of each key of an app, replayed to a retry with the same request for 24 hours.
-- The row is written in the transaction of what the request creates, so the two commit or vanish together.
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
  PRIMARY KEY (app_id, key)
);
-- the worker's sweep purges expired keys oldest first
CREATE INDEX idempotency_keys_created_idx ON idempotency_keys (created_at);
