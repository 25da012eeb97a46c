-- Issue 61, part 3. A device registration writes fewer bytes of WAL: the indexes no query needs go, the push token's
-- unique index holds a 16-byte key of it, each row a registration writes is checked by no foreign key, a tag's row has
-- one b-tree, and the installs counter is bumped without a lock record. Then the on-the-fly audiences' retention.

-- devices_time_zone_idx (app_id, time_zone) is the head of devices_app_zone_idx (app_id, time_zone, id), which
-- answers all it did; devices_live_count_idx (app_id) counts the live devices that devices_live_idx (app_id, id)
-- holds and counts as well.
DROP INDEX devices_time_zone_idx;
DROP INDEX devices_live_count_idx;

-- registered_at moves whenever a registration changes anything, so its index made every such update write a new
-- entry in each index of devices (no HOT update); a registered_at filter is a range most devices are in, read by a
-- scan of the app's devices as well. created_at never changes, so its index stays.
DROP INDEX devices_registered_at_idx;

-- A push token is found by its key, the first 16 bytes of its SHA-256 as a uuid, not by its text (an FCM token is
-- about 160 characters): the unique index's entry and the WAL of its insert are a third as long. The lookups also
-- compare the token itself (src/db/repositories/devices.ts, holdsToken).
CREATE FUNCTION pushd_token_key(token text) RETURNS uuid LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  AS $$ SELECT encode(substring(sha256(textsend(token)) FROM 1 FOR 16), 'hex')::uuid $$;
DROP INDEX devices_app_token_uidx;
CREATE UNIQUE INDEX devices_app_token_uidx ON devices (app_id, pushd_token_key(token)) WHERE token IS NOT NULL;

-- A user_email filter names addresses, which a device without one never matches, so the index keeps only those with
-- one (most devices register without).
DROP INDEX devices_user_email_idx;
CREATE INDEX devices_user_email_idx ON devices (app_id, user_email) WHERE erased_at IS NULL AND user_email IS NOT NULL;

-- The tags filter reads device_tags (src/db/filter-sql.ts), whose rows the trigger keeps equal to devices.tags, so
-- the GIN index over the same tags goes. device_tags is keyed by (app_id, tag, device_id) alone, the index a tag's
-- filter and count read: its rows of a device are found from the device's tags (OLD.tags) and app, so the second
-- b-tree, by device, goes too.
DROP INDEX devices_tags_idx;
ALTER TABLE device_tags DROP CONSTRAINT device_tags_pkey;
DROP INDEX device_tags_tag_idx;
ALTER TABLE device_tags ADD PRIMARY KEY (app_id, tag, device_id);

-- Only the tags that change are written: on an update the old ones that go are deleted, the new ones inserted.
CREATE OR REPLACE FUNCTION pushd_sync_device_tags() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  kept text[] := CASE WHEN NEW.erased_at IS NULL THEN NEW.tags ELSE '{}' END;
  had text[] := CASE WHEN TG_OP = 'UPDATE' AND OLD.erased_at IS NULL THEN OLD.tags ELSE '{}' END;
BEGIN
  IF cardinality(had) > 0 THEN
    DELETE FROM device_tags WHERE app_id = OLD.app_id AND tag = ANY (had) AND device_id = OLD.id AND NOT tag = ANY (kept);
  END IF;
  INSERT INTO device_tags (device_id, app_id, tag)
  SELECT DISTINCT NEW.id, NEW.app_id, t FROM unnest(kept) AS t WHERE NOT t = ANY (had);
  RETURN NULL;
END $$;

-- The foreign keys a registration checks go, as those of notifications did (migration 044): each check row-locks
-- what it finds, a WAL record each, and the app's row is locked by every registration of the app at once (a
-- MultiXact of their ids under concurrent traffic). A device's attributes and tags are written in the transaction
-- that inserted or locked the device; a device is deleted only with its app (by hand), and then its rows by the
-- triggers below.
ALTER TABLE devices DROP CONSTRAINT devices_app_id_fkey;
ALTER TABLE device_attributes DROP CONSTRAINT device_attributes_device_id_fkey;
ALTER TABLE device_tags DROP CONSTRAINT device_tags_device_id_fkey;

CREATE FUNCTION pushd_delete_device_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM device_tags g USING deleted_devices d WHERE g.app_id = d.app_id AND g.tag = ANY (d.tags) AND g.device_id = d.id;
  DELETE FROM device_attributes a USING deleted_devices d WHERE a.device_id = d.id;
  RETURN NULL;
END $$;
CREATE TRIGGER devices_delete_rows AFTER DELETE ON devices
  REFERENCING OLD TABLE AS deleted_devices FOR EACH STATEMENT EXECUTE FUNCTION pushd_delete_device_rows();

-- An app's delete and TRUNCATE take its devices too (migration 044's triggers, one statement more each).
CREATE OR REPLACE FUNCTION pushd_delete_app_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM notifications WHERE app_id = OLD.id;
  DELETE FROM audiences WHERE app_id = OLD.id;
  DELETE FROM devices WHERE app_id = OLD.id;
  RETURN OLD;
END
$$;
CREATE OR REPLACE FUNCTION pushd_truncate_app_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM notifications;
  DELETE FROM audiences;
  DELETE FROM devices;
  RETURN NULL;
END
$$;

-- Installs: the day's counter updated in place when it is there, which writes no lock record first as INSERT ... ON
-- CONFLICT DO UPDATE does; inserted when it is not. Counters in (app, day, shard) order, so two statements lock
-- them in the same order.
CREATE OR REPLACE FUNCTION pushd_count_installs() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
  c record;
BEGIN
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

-- Audiences kept as long as something names them (issue 61, part 3). An on-the-fly audience older than the
-- notifications' retention that no notification or message names is first retired (retired_at set, its spec key
-- cleared, so no new notification finds it by its spec: an equal spec makes a new audience), and deleted at a later
-- sweep, past a grace longer than any transaction that found it before it was retired, if nothing names it then
-- (src/queue/retention.ts, sweepAudiences). One named by id is un-retired by the notification that names it.
ALTER TABLE audiences ADD COLUMN retired_at timestamptz;
ALTER TABLE audiences ALTER COLUMN spec_key DROP NOT NULL;
CREATE INDEX audiences_retired_idx ON audiences (retired_at) WHERE retired_at IS NOT NULL;
-- A message's audience is found by this index, as its foreign key checks it when an audience is deleted (a scan of
-- every message for each audience without it).
CREATE INDEX messages_audience_idx ON messages (audience_id);
