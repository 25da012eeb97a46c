-- Secrets at rest (issue 60): the apps' credentials and identity secrets are stored sealed with AES-256-GCM under a
-- key the database never holds (src/domain/secrets.ts), as text `pushd:v1:<key id>:…`. The key is not here, so the
-- values stored before are sealed by the first process that starts on this schema (src/services/secrets.ts).
-- A column's type cannot change while a trigger names it: the change trigger is made again after.
DROP TRIGGER apps_announce_change ON apps;

ALTER TABLE apps
  ALTER COLUMN apns_credentials TYPE text USING apns_credentials::text,
  ALTER COLUMN fcm_credentials TYPE text USING fcm_credentials::text,
  ALTER COLUMN web_push_credentials TYPE text USING web_push_credentials::text,
  ALTER COLUMN hms_credentials TYPE text USING hms_credentials::text;

-- What is written from now on is sealed; NOT VALID: the plain values of before stay until start-up seals them.
ALTER TABLE apps ADD CONSTRAINT apps_secrets_sealed CHECK (
  (apns_credentials IS NULL OR apns_credentials LIKE 'pushd:v1:%')
  AND (fcm_credentials IS NULL OR fcm_credentials LIKE 'pushd:v1:%')
  AND (web_push_credentials IS NULL OR web_push_credentials LIKE 'pushd:v1:%')
  AND (hms_credentials IS NULL OR hms_credentials LIKE 'pushd:v1:%')
  AND (identity_secret IS NULL OR identity_secret LIKE 'pushd:v1:%')
) NOT VALID;

-- 032's columns; a rotation's reseal (pushd.resealing set in its transaction) changes no value that processes keep
-- opened in memory, so it is not announced: they go on sending with what they hold.
CREATE TRIGGER apps_announce_change
  AFTER UPDATE OF bundle_id, apns_credentials, fcm_credentials, web_push_credentials, hms_credentials, max_per_minute,
    default_time_zone, identity_secret, identity_verification, quiet_hours, frequency_caps
  OR DELETE OR TRUNCATE ON apps
  FOR EACH STATEMENT
  WHEN (current_setting('pushd.resealing', true) IS DISTINCT FROM 'on')
  EXECUTE FUNCTION pushd_announce_app_change();
