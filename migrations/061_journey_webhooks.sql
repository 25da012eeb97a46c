-- Journeys' webhook and best-time steps (issue 69). A journey's webhook steps sign their requests with the
-- journey's own secret, shown once when a version first has one and stored sealed under the secrets key as the
-- endpoints' are (src/domain/secrets.ts).
ALTER TABLE journeys ADD COLUMN webhook_secret text CHECK (webhook_secret IS NULL OR webhook_secret LIKE 'pushd:v1:%');

-- A delay until the best time reads a device's opens of the last weeks; opens were found by notification only.
CREATE INDEX push_opens_device_idx ON push_opens (device_id, opened_at);
