-- Delivery state lives in PostgreSQL, not in the queue: a lost or restarted queue loses no push.
ALTER TABLE notifications
  ADD COLUMN fanout_cursor uuid,
  ADD COLUMN fanout_seq integer NOT NULL DEFAULT 0,
  ADD COLUMN fanout_done boolean NOT NULL DEFAULT false;

CREATE TABLE delivery_batches (
  -- deterministic: <notification id>-g<generation>-b<seq>, also the delivery job id
  id                 text PRIMARY KEY,
  notification_id    uuid NOT NULL REFERENCES notifications(id) ON DELETE CASCADE,
  generation         integer NOT NULL,
  seq                integer NOT NULL,
  platform           text NOT NULL CHECK (platform IN ('ios', 'android')),
  development        boolean NOT NULL,
  device_ids         uuid[] NOT NULL,
  -- devices still to be sent (all at first, then those whose send must be retried)
  pending_device_ids uuid[] NOT NULL,
  state              text NOT NULL DEFAULT 'pending' CHECK (state IN ('pending', 'done', 'superseded')),
  attempts           integer NOT NULL DEFAULT 0,
  succeeded          integer NOT NULL DEFAULT 0,
  failed             integer NOT NULL DEFAULT 0,
  invalidated        integer NOT NULL DEFAULT 0,
  last_error         text,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  UNIQUE (notification_id, generation, seq)
);
CREATE INDEX delivery_batches_open_idx ON delivery_batches (notification_id, generation) WHERE state = 'pending';

-- Devices whose token a gateway rejected, for GET /v6/devices/uninstalled.
CREATE INDEX devices_invalidated_idx ON devices (app_id, token_invalidated_at, id) WHERE token_invalidated_at IS NOT NULL;
