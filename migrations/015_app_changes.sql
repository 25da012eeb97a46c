-- Processes cache the API keys and push credentials every request and batch reads. Each committed change to them
-- is announced on a channel, whoever makes it (the CLI, another process, SQL by hand), and every process drops what
-- it cached when it hears one (src/db/app-changes.ts). Statement triggers: one announcement a statement, and none for
-- the apps columns that change while sending (pace_next_at) or that nothing caches.
CREATE FUNCTION pushd_announce_app_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  PERFORM pg_notify('pushd_app_changes', TG_TABLE_NAME);
  RETURN NULL;
END
$$;

CREATE TRIGGER api_keys_announce_change AFTER UPDATE OR DELETE OR TRUNCATE ON api_keys
  FOR EACH STATEMENT EXECUTE FUNCTION pushd_announce_app_change();

CREATE TRIGGER apps_announce_change AFTER UPDATE OF bundle_id, apns_credentials, fcm_credentials OR DELETE OR TRUNCATE ON apps
  FOR EACH STATEMENT EXECUTE FUNCTION pushd_announce_app_change();
