-- Huawei Push Kit (issue 41): Huawei phones without Google services are a fourth platform. A device's token is its
-- HMS push token; the app's HMS credentials (its AppGallery app id and client secret) sit beside the others.
ALTER TABLE devices DROP CONSTRAINT devices_platform_check;
ALTER TABLE devices ADD CONSTRAINT devices_platform_check CHECK (platform IN ('ios', 'android', 'web', 'huawei'));

ALTER TABLE delivery_batches DROP CONSTRAINT delivery_batches_platform_check;
ALTER TABLE delivery_batches ADD CONSTRAINT delivery_batches_platform_check
  CHECK (platform IN ('ios', 'android', 'web', 'huawei'));

-- {app_id, client_secret}, cached like the app's other credentials: the trigger keeps every column of 022's list.
ALTER TABLE apps ADD COLUMN hms_credentials jsonb;
DROP TRIGGER apps_announce_change ON apps;
CREATE TRIGGER apps_announce_change
  AFTER UPDATE OF bundle_id, apns_credentials, fcm_credentials, web_push_credentials, hms_credentials, max_per_minute,
    default_time_zone, identity_secret, identity_verification
  OR DELETE OR TRUNCATE ON apps
  FOR EACH STATEMENT EXECUTE FUNCTION pushd_announce_app_change();
