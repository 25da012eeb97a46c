-- Expiry and priority of a notification (issue 13): a push still unsent at expires_at is not sent and is counted
-- in pushes_expired. A ttl is stored as created_at + ttl, since APNs takes an absolute expiry.
ALTER TABLE notifications
  ADD COLUMN expires_at timestamptz,
  ADD COLUMN priority text CHECK (priority IN ('high', 'normal')),
  ADD COLUMN pushes_expired integer NOT NULL DEFAULT 0;
ALTER TABLE delivery_batches ADD COLUMN expired integer NOT NULL DEFAULT 0;
