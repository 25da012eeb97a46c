-- Frequency caps (issue 42): an app's ceilings on the pushes one device receives per window, e.g.
-- [{"limit": 3, "window": "day"}, {"limit": 1, "window": "hour"}]; null: none. Cached with its campaign settings,
-- so the trigger lists every column of 028's list and this one.
ALTER TABLE apps ADD COLUMN frequency_caps jsonb;
DROP TRIGGER apps_announce_change ON apps;
CREATE TRIGGER apps_announce_change
  AFTER UPDATE OF bundle_id, apns_credentials, fcm_credentials, web_push_credentials, hms_credentials, max_per_minute,
    default_time_zone, identity_secret, identity_verification, quiet_hours, frequency_caps
  OR DELETE OR TRUNCATE ON apps
  FOR EACH STATEMENT EXECUTE FUNCTION pushd_announce_app_change();

-- Whether the app's caps apply to a notification: what its request says (`cap`), else yes for a campaign and no
-- for a transactional send (it has a group); never for a Live Activity push. One rule, read by every send path.
ALTER TABLE notifications ADD COLUMN capped boolean GENERATED ALWAYS AS (
  live_activity IS NULL
  AND coalesce((request ->> 'cap')::boolean, (request #>> '{notification,cap}')::boolean, send_group IS NULL)
) STORED;

-- The devices of a notification not sent to because they had reached a cap; done with, like expired ones.
ALTER TABLE notifications ADD COLUMN pushes_capped integer NOT NULL DEFAULT 0;
ALTER TABLE delivery_batches ADD COLUMN capped integer NOT NULL DEFAULT 0;

-- The pushes each device was given in each fixed window (window_seconds long, starting at window_start, UTC-aligned):
-- one row per device and window, taken under its row lock, so concurrent notifications never exceed a cap.
CREATE TABLE device_cap_counts (
  device_id uuid NOT NULL,
  window_seconds integer NOT NULL,
  window_start timestamptz NOT NULL,
  count integer NOT NULL,
  PRIMARY KEY (device_id, window_seconds, window_start)
);
-- for the sweep of windows long over
CREATE INDEX device_cap_counts_window_start ON device_cap_counts (window_start);
