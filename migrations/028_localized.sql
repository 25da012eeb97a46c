-- Content per language (issue 42): the `localized` entries of a notification, beside its payload; each device is
-- sent the entry of its locale or language, else the payload. Null for a notification in one language.
ALTER TABLE notifications ADD COLUMN localized jsonb;

-- Quiet hours (issue 42): the devices of a notification due inside their quiet hours with `then: drop`, not sent to.
ALTER TABLE notifications ADD COLUMN skipped_quiet_hours integer NOT NULL DEFAULT 0;

-- An app's quiet hours, for its notifications that name none; cached with its campaign settings, so the trigger keeps
-- every column of 026's list.
ALTER TABLE apps ADD COLUMN quiet_hours jsonb;
DROP TRIGGER apps_announce_change ON apps;
CREATE TRIGGER apps_announce_change
  AFTER UPDATE OF bundle_id, apns_credentials, fcm_credentials, web_push_credentials, hms_credentials, max_per_minute,
    default_time_zone, identity_secret, identity_verification, quiet_hours
  OR DELETE OR TRUNCATE ON apps
  FOR EACH STATEMENT EXECUTE FUNCTION pushd_announce_app_change();
