-- The sessions' and opens' counting trigger (migration 012) built its statement with EXECUTE for the column it
-- counts, so PostgreSQL planned it anew on every report: 0.15 ms of planning a session against 0.12 of execution.
-- Its statements are now static, so plpgsql keeps their plans: the report's days are read off the transition table by
-- the branch of its own column, and one statement counts them, unless the report inserted nothing (a session's end).
-- Replacing the function takes no lock on the tables.
CREATE OR REPLACE FUNCTION pushd_count_activity() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  apps uuid[];
  devices uuid[];
  days date[];
BEGIN
  IF TG_ARGV[0] = 'started_at' THEN
    SELECT array_agg(app_id), array_agg(device_id), array_agg((started_at AT TIME ZONE 'UTC')::date)
    INTO apps, devices, days FROM reported_rows;
  ELSE
    SELECT array_agg(app_id), array_agg(device_id), array_agg((opened_at AT TIME ZONE 'UTC')::date)
    INTO apps, devices, days FROM reported_rows;
  END IF;
  -- a report of a session already stored (its end) inserted nothing
  IF apps IS NULL THEN
    RETURN NULL;
  END IF;
  WITH reported AS (
    SELECT * FROM unnest(apps, devices, days) AS r(app_id, device_id, day)),
  newly_active AS (
    INSERT INTO app_active_devices (app_id, day, device_id)
    SELECT DISTINCT app_id, day, device_id FROM reported ORDER BY 1, 2, 3
    ON CONFLICT DO NOTHING
    RETURNING app_id, day, device_id),
  counted AS (
    SELECT app_id, day, pushd_stats_shard(device_id) AS shard, count(*) FILTER (WHERE report) AS n,
      count(*) FILTER (WHERE NOT report) AS active
    FROM (SELECT app_id, day, device_id, true AS report FROM reported
          UNION ALL SELECT app_id, day, device_id, false FROM newly_active) AS r
    GROUP BY 1, 2, 3)
  INSERT INTO app_daily_stats AS s (app_id, day, shard, sessions, opens, active_users)
  SELECT app_id, day, shard, CASE WHEN TG_ARGV[1] = 'sessions' THEN n ELSE 0 END,
    CASE WHEN TG_ARGV[1] = 'opens' THEN n ELSE 0 END, active
  FROM counted ORDER BY 1, 2, 3
  ON CONFLICT (app_id, day, shard) DO UPDATE SET sessions = s.sessions + excluded.sessions,
    opens = s.opens + excluded.opens, active_users = s.active_users + excluded.active_users;
  RETURN NULL;
END $$;
