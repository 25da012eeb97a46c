-- Opens, sessions and what is counted from them (issue 12, item 3).

-- App sessions the SDK reports, one row per client-made session id of a device: a retried or later "end" report
-- names the same id, so a session counts once. duration_seconds is set by the first report that carries one.
CREATE TABLE app_sessions (
  device_id        uuid NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
  id               uuid NOT NULL,
  app_id           uuid NOT NULL,
  started_at       timestamptz NOT NULL,
  duration_seconds integer,
  created_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (device_id, id)
);

-- Push opens, one row per notification, device and kind (direct: the push was tapped; indirect: the app was
-- opened while the push was there, without a tap): a retried report counts once.
CREATE TABLE push_opens (
  notification_id uuid NOT NULL REFERENCES notifications(id) ON DELETE CASCADE,
  kind            text NOT NULL CHECK (kind IN ('direct', 'indirect')),
  device_id       uuid NOT NULL,
  app_id          uuid NOT NULL,
  opened_at       timestamptz NOT NULL,
  PRIMARY KEY (notification_id, kind, device_id)
);

-- Which device received which push, and when (the gateway accepted it): written with each delivery attempt's
-- results, read when a device's events arrive to attribute them to the pushes it received within the conversion
-- window. Only recent rows matter, so the sweeper deletes old ones (the BRIN index finds them; it costs the
-- delivery path next to nothing) and there are no foreign keys to check on that path.
CREATE TABLE device_pushes (
  device_id       uuid NOT NULL,
  notification_id uuid NOT NULL,
  received_at     timestamptz NOT NULL,
  PRIMARY KEY (device_id, notification_id)
);
CREATE INDEX device_pushes_received_idx ON device_pushes USING brin (received_at);

-- Events attributed to a push: per notification, event and device, how many the device sent within the window.
CREATE TABLE notification_conversions (
  notification_id uuid NOT NULL REFERENCES notifications(id) ON DELETE CASCADE,
  source          text NOT NULL,
  name            text NOT NULL,
  device_id       uuid NOT NULL,
  count           bigint NOT NULL,
  PRIMARY KEY (notification_id, source, name, device_id)
);

-- The daily figures of GET /v6/stats/{installs,opens,sessions,active_users}, per UTC day, kept by the triggers
-- below in the transaction that stores what they count, so a month is ~500 index rows whatever the volume. Each
-- day is split in 16 shards by device id: concurrent reports of one app update different rows instead of
-- queueing on one row's lock; a device always lands in the same shard, so distinct-device counts add up.
CREATE TABLE app_daily_stats (
  app_id       uuid NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  day          date NOT NULL,
  shard        smallint NOT NULL,
  installs     integer NOT NULL DEFAULT 0,
  sessions     integer NOT NULL DEFAULT 0,
  opens        integer NOT NULL DEFAULT 0,
  active_users integer NOT NULL DEFAULT 0,
  PRIMARY KEY (app_id, day, shard)
);

-- The devices active (a session or a push open) on a day, so each counts once in active_users. Reports may be
-- dated up to 7 days back; the sweeper deletes rows of days older than that.
CREATE TABLE app_active_devices (
  app_id    uuid NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  day       date NOT NULL,
  device_id uuid NOT NULL,
  PRIMARY KEY (app_id, day, device_id)
);
CREATE INDEX app_active_devices_day_idx ON app_active_devices USING brin (day);

CREATE FUNCTION pushd_stats_shard(device_id uuid) RETURNS smallint LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN (get_byte(uuid_send(device_id), 15) & 15)::smallint;

-- Installs: the devices inserted, counted on their created_at day. Statement-level with the inserted rows as a
-- table, so a bulk insert adds one row per day and shard; an upsert that finds the token updates and inserts none.
CREATE FUNCTION pushd_count_installs() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO app_daily_stats AS s (app_id, day, shard, installs)
  SELECT app_id, (created_at AT TIME ZONE 'UTC')::date, pushd_stats_shard(id), count(*)
  FROM inserted_devices GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
  ON CONFLICT (app_id, day, shard) DO UPDATE SET installs = s.installs + excluded.installs;
  RETURN NULL;
END $$;
CREATE TRIGGER devices_installs_counted AFTER INSERT ON devices
  REFERENCING NEW TABLE AS inserted_devices FOR EACH STATEMENT EXECUTE FUNCTION pushd_count_installs();

-- Sessions and opens: the rows inserted (a retry inserts none), counted on the UTC day of TG_ARGV[0] into the
-- counter TG_ARGV[1], and their devices into active_users when they were not yet active that day. Rows go in
-- (app, day, shard) order so two concurrent statements lock the counters in the same order.
CREATE FUNCTION pushd_count_activity() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  EXECUTE format($q$
    WITH reported AS (
      SELECT app_id, device_id, (%1$I AT TIME ZONE 'UTC')::date AS day FROM reported_rows),
    newly_active AS (
      INSERT INTO app_active_devices (app_id, day, device_id)
      SELECT DISTINCT app_id, day, device_id FROM reported ORDER BY 1, 2, 3
      ON CONFLICT DO NOTHING
      RETURNING app_id, day, device_id),
    counted AS (
      SELECT app_id, day, pushd_stats_shard(device_id) AS shard, count(*) FILTER (WHERE report) AS n, count(*) FILTER (WHERE NOT report) AS active
      FROM (SELECT app_id, day, device_id, true AS report FROM reported
            UNION ALL SELECT app_id, day, device_id, false FROM newly_active) AS r
      GROUP BY 1, 2, 3)
    INSERT INTO app_daily_stats AS s (app_id, day, shard, %2$I, active_users)
    SELECT app_id, day, shard, n, active FROM counted ORDER BY 1, 2, 3
    ON CONFLICT (app_id, day, shard) DO UPDATE SET %2$I = s.%2$I + excluded.%2$I, active_users = s.active_users + excluded.active_users
  $q$, TG_ARGV[0], TG_ARGV[1]);
  RETURN NULL;
END $$;
CREATE TRIGGER app_sessions_counted AFTER INSERT ON app_sessions
  REFERENCING NEW TABLE AS reported_rows FOR EACH STATEMENT EXECUTE FUNCTION pushd_count_activity('started_at', 'sessions');
CREATE TRIGGER push_opens_counted AFTER INSERT ON push_opens
  REFERENCING NEW TABLE AS reported_rows FOR EACH STATEMENT EXECUTE FUNCTION pushd_count_activity('opened_at', 'opens');

-- The devices registered before this migration, counted as installs on their day.
INSERT INTO app_daily_stats (app_id, day, shard, installs)
SELECT app_id, (created_at AT TIME ZONE 'UTC')::date, pushd_stats_shard(id), count(*) FROM devices GROUP BY 1, 2, 3;
