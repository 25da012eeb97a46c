-- When each key was last used, to the minutes (`pushd key list`): written by the processes that authenticate with it,
-- at most once per key every few minutes. That write changes nothing a process caches, so the keys' change trigger
-- announces only the columns that do.
ALTER TABLE api_keys ADD COLUMN last_used_at timestamptz;

DROP TRIGGER api_keys_announce_change ON api_keys;
CREATE TRIGGER api_keys_announce_change
  AFTER UPDATE OF app_id, role, key_hash, revoked_at, rate_limit_per_second, rate_limit_burst OR DELETE OR TRUNCATE ON api_keys
  FOR EACH STATEMENT EXECUTE FUNCTION pushd_announce_app_change();
