-- Sessions, push opens, conversions and message streams partitioned by UTC day (issue 38), as migration 023 did for
-- receipts: the workers' maintenance creates each day's partition ahead and drops a partition whole once it is past
-- its table's retention (src/queue/retention.ts), instead of DELETE purges. A partitioned table's primary key must
-- hold its partition key; where the old key deduplicated reports, the repositories now look the old key up first,
-- under the device's row lock that every report already takes (ActivityRepository).

-- Creates <parent>_pYYYYMMDD for each UTC day from first to last (both included) that has none yet.
CREATE FUNCTION pg_temp.pushd_create_day_partitions(parent text, key_type text, first date, last date) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  d date;
BEGIN
  FOR d IN SELECT generate_series(first, last, interval '1 day')::date LOOP
    EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L)',
      parent || '_p' || to_char(d, 'YYYYMMDD'), parent,
      CASE key_type WHEN 'date' THEN d::text ELSE d::text || ' 00:00:00+00' END,
      CASE key_type WHEN 'date' THEN (d + 1)::text ELSE (d + 1)::text || ' 00:00:00+00' END);
  END LOOP;
END $$;

-- Creates the partitions of each UTC day of the last 90 (the longest default retention) the rows of `source` have in
-- `key` (a date, or a timestamptz taken at UTC), and of today and the next three days; a day with no row gets none.
-- Older rows go to the default partition, which the maintenance purges or splits by the retention configured: a
-- partition for every day of years of history would take more locks than one transaction may hold.
CREATE FUNCTION pg_temp.pushd_partitions_for(parent text, key_type text, source text, key text) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  d date;
  today date := (now() AT TIME ZONE 'UTC')::date;
BEGIN
  PERFORM pg_temp.pushd_create_day_partitions(parent, key_type, today, today + 3);
  FOR d IN EXECUTE format(
    CASE key_type
      WHEN 'date' THEN 'SELECT DISTINCT day FROM (SELECT %I AS day FROM %I) r WHERE day >= $1'
      ELSE 'SELECT DISTINCT day FROM (SELECT (%I AT TIME ZONE ''UTC'')::date AS day FROM %I) r WHERE day >= $1'
    END,
    key, source) USING today - 90 LOOP
    PERFORM pg_temp.pushd_create_day_partitions(parent, key_type, d, d);
  END LOOP;
END $$;

-- Sessions, by when they started. The key (device_id, id) deduplicated a report sent again; with started_at in
-- the key, the repository finds a session by (device_id, id) in any partition before it inserts one.
ALTER TABLE app_sessions RENAME TO app_sessions_unpartitioned;
ALTER TABLE app_sessions_unpartitioned RENAME CONSTRAINT app_sessions_pkey TO app_sessions_unpartitioned_pkey;
ALTER TABLE app_sessions_unpartitioned RENAME CONSTRAINT app_sessions_device_id_fkey TO app_sessions_unpartitioned_device_id_fkey;
DROP TRIGGER app_sessions_counted ON app_sessions_unpartitioned;
CREATE TABLE app_sessions (
  device_id        uuid NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
  id               uuid NOT NULL,
  app_id           uuid NOT NULL,
  started_at       timestamptz NOT NULL,
  duration_seconds integer,
  created_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (device_id, id, started_at)
) PARTITION BY RANGE (started_at);
CREATE TABLE app_sessions_default PARTITION OF app_sessions DEFAULT;
SELECT pg_temp.pushd_partitions_for('app_sessions', 'timestamptz', 'app_sessions_unpartitioned', 'started_at');
INSERT INTO app_sessions SELECT device_id, id, app_id, started_at, duration_seconds, created_at FROM app_sessions_unpartitioned;
DROP TABLE app_sessions_unpartitioned;
-- made after the copy: the sessions it moved were counted when they were reported
CREATE TRIGGER app_sessions_counted AFTER INSERT ON app_sessions
  REFERENCING NEW TABLE AS reported_rows FOR EACH STATEMENT EXECUTE FUNCTION pushd_count_activity('started_at', 'sessions');

-- Push opens, by when they were opened; deduplicated as sessions are, by (notification_id, kind, device_id).
ALTER TABLE push_opens RENAME TO push_opens_unpartitioned;
ALTER TABLE push_opens_unpartitioned RENAME CONSTRAINT push_opens_pkey TO push_opens_unpartitioned_pkey;
ALTER TABLE push_opens_unpartitioned RENAME CONSTRAINT push_opens_notification_id_fkey TO push_opens_unpartitioned_notification_id_fkey;
ALTER TABLE push_opens_unpartitioned RENAME CONSTRAINT push_opens_kind_check TO push_opens_unpartitioned_kind_check;
DROP TRIGGER push_opens_counted ON push_opens_unpartitioned;
CREATE TABLE push_opens (
  notification_id uuid NOT NULL REFERENCES notifications(id) ON DELETE CASCADE,
  kind            text NOT NULL CHECK (kind IN ('direct', 'indirect')),
  device_id       uuid NOT NULL,
  app_id          uuid NOT NULL,
  opened_at       timestamptz NOT NULL,
  PRIMARY KEY (notification_id, kind, device_id, opened_at)
) PARTITION BY RANGE (opened_at);
CREATE TABLE push_opens_default PARTITION OF push_opens DEFAULT;
SELECT pg_temp.pushd_partitions_for('push_opens', 'timestamptz', 'push_opens_unpartitioned', 'opened_at');
INSERT INTO push_opens SELECT notification_id, kind, device_id, app_id, opened_at FROM push_opens_unpartitioned;
DROP TABLE push_opens_unpartitioned;
CREATE TRIGGER push_opens_counted AFTER INSERT ON push_opens
  REFERENCING NEW TABLE AS reported_rows FOR EACH STATEMENT EXECUTE FUNCTION pushd_count_activity('opened_at', 'opens');

-- Conversions, by the UTC day of the events counted: a device's events of one push on another day are another row,
-- and a notification's figures are their sum, as before. The rows already there had no day: they take their
-- notification's, the day the window they were counted in began.
ALTER TABLE notification_conversions RENAME TO notification_conversions_unpartitioned;
ALTER TABLE notification_conversions_unpartitioned RENAME CONSTRAINT notification_conversions_pkey TO notification_conversions_unpartitioned_pkey;
ALTER TABLE notification_conversions_unpartitioned
  RENAME CONSTRAINT notification_conversions_notification_id_fkey TO notification_conversions_unpartitioned_notification_id_fkey;
ALTER TABLE notification_conversions_unpartitioned ADD COLUMN day date;
UPDATE notification_conversions_unpartitioned c SET day = (n.created_at AT TIME ZONE 'UTC')::date
FROM notifications n WHERE n.id = c.notification_id;
CREATE TABLE notification_conversions (
  notification_id uuid NOT NULL REFERENCES notifications(id) ON DELETE CASCADE,
  source          text NOT NULL,
  name            text NOT NULL,
  device_id       uuid NOT NULL,
  day             date NOT NULL,
  count           bigint NOT NULL,
  PRIMARY KEY (notification_id, source, name, device_id, day)
) PARTITION BY RANGE (day);
CREATE TABLE notification_conversions_default PARTITION OF notification_conversions DEFAULT;
SELECT pg_temp.pushd_partitions_for('notification_conversions', 'date', 'notification_conversions_unpartitioned', 'day');
INSERT INTO notification_conversions
SELECT notification_id, source, name, device_id, day, count FROM notification_conversions_unpartitioned;
DROP TABLE notification_conversions_unpartitioned;

-- Message streams, by when their message's retention starts (retention_from: its unpublish_at, or its publish_at
-- without one, as messages.expires_at counts it): a day's rows are all past retention MESSAGE_RETENTION_DAYS after
-- it. The message decides it, so (device_id, message_id) stays unique.
ALTER TABLE device_messages RENAME TO device_messages_unpartitioned;
ALTER TABLE device_messages_unpartitioned RENAME CONSTRAINT device_messages_pkey TO device_messages_unpartitioned_pkey;
ALTER TABLE device_messages_unpartitioned RENAME CONSTRAINT device_messages_device_id_fkey TO device_messages_unpartitioned_device_id_fkey;
ALTER TABLE device_messages_unpartitioned RENAME CONSTRAINT device_messages_message_id_fkey TO device_messages_unpartitioned_message_id_fkey;
ALTER INDEX device_messages_message_idx RENAME TO device_messages_unpartitioned_message_idx;
ALTER TABLE device_messages_unpartitioned ADD COLUMN retention_from timestamptz;
UPDATE device_messages_unpartitioned s SET retention_from = coalesce(m.unpublish_at, m.publish_at)
FROM messages m WHERE m.id = s.message_id;
CREATE TABLE device_messages (
  device_id                uuid NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
  message_id               uuid NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
  retention_from           timestamptz NOT NULL,
  added_at                 timestamptz NOT NULL DEFAULT now(),
  read_at                  timestamptz,
  deleted_at               timestamptz,
  stream_impressions       integer NOT NULL DEFAULT 0,
  full_screen_impressions  integer NOT NULL DEFAULT 0,
  in_app_impressions       integer NOT NULL DEFAULT 0,
  PRIMARY KEY (device_id, message_id, retention_from)
) PARTITION BY RANGE (retention_from);
-- a message's statistics (an index-only sum) and whether it still has stream rows (the purge of messages)
CREATE INDEX device_messages_message_idx ON device_messages (message_id)
  INCLUDE (stream_impressions, full_screen_impressions, in_app_impressions);
CREATE TABLE device_messages_default PARTITION OF device_messages DEFAULT;
SELECT pg_temp.pushd_partitions_for('device_messages', 'timestamptz', 'device_messages_unpartitioned', 'retention_from');
INSERT INTO device_messages
SELECT device_id, message_id, retention_from, added_at, read_at, deleted_at, stream_impressions, full_screen_impressions, in_app_impressions
FROM device_messages_unpartitioned;
DROP TABLE device_messages_unpartitioned;

DROP FUNCTION pg_temp.pushd_partitions_for(text, text, text, text);
DROP FUNCTION pg_temp.pushd_create_day_partitions(text, text, date, date);
