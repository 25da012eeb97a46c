-- The device credential (docs/identity.md): the SHA-256 of the secret a registration that creates a device answers
-- once, and whether the device's client has sent it back (from then on the sdk key's changes of where its pushes go
-- need it). Devices registered before have none and keep the rules they had.
ALTER TABLE devices ADD COLUMN credential_hash bytea;
ALTER TABLE devices ADD COLUMN credential_held boolean NOT NULL DEFAULT false;

-- APNs tokens are hex, which APNs reads in any case: an iPhone's token is stored lower-case (as the service now
-- writes and looks it up), so its two cases are one device. Devices already holding the same token in two cases
-- (an app's, any platform with that hex) are merged into one: the bound one (user or e-mail; of several, the first
-- created, since a copy in the other case came later), else the one registered last. The others lose the token, as
-- a device does when another reports it (DevicesRepository.releaseToken): their history, attributes and the rows
-- naming them stay theirs, and nothing is sent to them any more.
WITH hex AS (
  SELECT id, app_id, lower(token) AS normal, platform, token,
    (user_id IS NOT NULL OR user_email IS NOT NULL) AS bound, created_at, registered_at
  FROM devices
  WHERE token IS NOT NULL AND token ~ '^[0-9A-Fa-f]+$'
),
ranked AS (
  SELECT id, row_number() OVER (
    PARTITION BY app_id, normal
    ORDER BY bound DESC, CASE WHEN bound THEN created_at END, registered_at DESC, id
  ) AS rank
  FROM hex h
  WHERE EXISTS (SELECT 1 FROM hex u WHERE u.app_id = h.app_id AND u.normal = h.normal AND u.platform = 'ios' AND u.token <> u.normal)
)
UPDATE devices d SET token = NULL
FROM ranked r
WHERE d.id = r.id AND r.rank > 1;

UPDATE devices SET token = lower(token)
WHERE platform = 'ios' AND token ~ '^[0-9A-Fa-f]+$' AND token <> lower(token);

-- A Live Activity's tokens are APNs tokens too: looked up by device, so only their case changes.
UPDATE live_activity_tokens SET token = lower(token) WHERE token ~ '^[0-9A-Fa-f]+$' AND token <> lower(token);
UPDATE live_activity_start_tokens SET token = lower(token) WHERE token ~ '^[0-9A-Fa-f]+$' AND token <> lower(token);
