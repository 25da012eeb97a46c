-- A new device's tag rows and its install count by one trigger a statement instead of two: the row trigger that wrote
-- the tags ran a PL/pgSQL call of its own for each device (its variables, its plan), and the installs' statement
-- trigger a second. One AFTER INSERT statement trigger now inserts the tags of every inserted device from the
-- transition table, as the row trigger did for a new device (none for one inserted erased), then counts the installs
-- as migration 052 does. Updates keep their row trigger (devices_tags_updated). Safe while the API and workers run:
-- the triggers are swapped in this migration's transaction, so every insert sees one pair or the other.
CREATE FUNCTION pushd_devices_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  c record;
BEGIN
  INSERT INTO device_tags (device_id, app_id, tag)
  SELECT DISTINCT d.id, d.app_id, t FROM inserted_devices d, unnest(d.tags) AS t WHERE d.erased_at IS NULL;
  FOR c IN
    SELECT app_id, (created_at AT TIME ZONE 'UTC')::date AS day, pushd_stats_shard(id) AS shard, count(*)::int AS n
    FROM inserted_devices GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
  LOOP
    UPDATE app_daily_stats SET installs = installs + c.n WHERE app_id = c.app_id AND day = c.day AND shard = c.shard;
    IF NOT FOUND THEN
      INSERT INTO app_daily_stats AS s (app_id, day, shard, installs) VALUES (c.app_id, c.day, c.shard, c.n)
      ON CONFLICT (app_id, day, shard) DO UPDATE SET installs = s.installs + excluded.installs;
    END IF;
  END LOOP;
  RETURN NULL;
END $$;

DROP TRIGGER devices_tags_inserted ON devices;
DROP TRIGGER devices_installs_counted ON devices;
CREATE TRIGGER devices_inserted AFTER INSERT ON devices
  REFERENCING NEW TABLE AS inserted_devices FOR EACH STATEMENT EXECUTE FUNCTION pushd_devices_inserted();
DROP FUNCTION pushd_count_installs();
