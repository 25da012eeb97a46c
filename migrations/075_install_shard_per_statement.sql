-- A statement's new devices counted in one installs counter of their app and day, not in the shard of each device:
-- registrations arriving together are inserted by one statement (src/db/repositories/new-devices.ts), and a group
-- of 16 devices spread over 64 shards held ~14 counters until its commit, so the next group's insert waited for that
-- commit's flush on one of them nearly every time. The shard is the one of the statement's first device of the app and day (as
-- random as each id); one device alone still counts in its own. Installs are only ever added up over the shards.
CREATE OR REPLACE FUNCTION pushd_count_installs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  c record;
BEGIN
  FOR c IN
    SELECT app_id, (created_at AT TIME ZONE 'UTC')::date AS day, pushd_stats_shard((array_agg(id))[1]) AS shard, count(*)::int AS n
    FROM inserted_devices GROUP BY 1, 2 ORDER BY 1, 2, 3
  LOOP
    UPDATE app_daily_stats SET installs = installs + c.n WHERE app_id = c.app_id AND day = c.day AND shard = c.shard;
    IF NOT FOUND THEN
      INSERT INTO app_daily_stats AS s (app_id, day, shard, installs) VALUES (c.app_id, c.day, c.shard, c.n)
      ON CONFLICT (app_id, day, shard) DO UPDATE SET installs = s.installs + excluded.installs;
    END IF;
  END LOOP;
  RETURN NULL;
END $$;
