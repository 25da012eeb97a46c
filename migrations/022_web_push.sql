-- Web Push (issue 40): browsers are a third platform. A web device's token is its subscription's endpoint (unique
-- per app like a phone's token) and the subscription's keys, which every push is encrypted to, sit beside it.
ALTER TABLE devices DROP CONSTRAINT devices_platform_check;
ALTER TABLE devices ADD CONSTRAINT devices_platform_check CHECK (platform IN ('ios', 'android', 'web'));
ALTER TABLE devices
  ADD COLUMN web_push_p256dh text,
  ADD COLUMN web_push_auth text;

ALTER TABLE delivery_batches DROP CONSTRAINT delivery_batches_platform_check;
ALTER TABLE delivery_batches ADD CONSTRAINT delivery_batches_platform_check CHECK (platform IN ('ios', 'android', 'web'));

-- The app's VAPID key pair and subject ({subject, public_key, private_key}), cached like its other credentials.
ALTER TABLE apps ADD COLUMN web_push_credentials jsonb;
DROP TRIGGER apps_announce_change ON apps;
CREATE TRIGGER apps_announce_change
  AFTER UPDATE OF bundle_id, apns_credentials, fcm_credentials, web_push_credentials, max_per_minute, default_time_zone,
    identity_secret, identity_verification
  OR DELETE OR TRUNCATE ON apps
  FOR EACH STATEMENT EXECUTE FUNCTION pushd_announce_app_change();
