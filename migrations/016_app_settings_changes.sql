-- Processes also cache each app's campaign settings (max_per_minute, default_time_zone), which every notification
-- reads: their changes are announced as those of keys and credentials are (migration 015).
DROP TRIGGER apps_announce_change ON apps;
CREATE TRIGGER apps_announce_change
  AFTER UPDATE OF bundle_id, apns_credentials, fcm_credentials, max_per_minute, default_time_zone OR DELETE OR TRUNCATE ON apps
  FOR EACH STATEMENT EXECUTE FUNCTION pushd_announce_app_change();
