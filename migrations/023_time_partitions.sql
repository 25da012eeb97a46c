-- Push receipts and active devices partitioned by day (issue 38): the workers' maintenance creates each day's
-- partition ahead of time and drops a partition whole once it is past its retention (src/queue/retention.ts),
-- instead of DELETE purges that bloated the tables and could not keep up with a billion receipts a day.
-- Partitions are named <table>_pYYYYMMDD (a UTC day); <table>_default takes a row no partition covers (a clock
-- moved, maintenance late), so a write never fails, and the maintenance moves such rows into their day's partition.

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

-- Receipts. The primary key must hold the partition key: a push received twice by a device (a collapse_key
-- re-send, a batch recorded again) now keeps a receipt per time it was received, and conversions count an event
-- once per push however many receipts it has (ConversionsRepository.attribute). The BRIN index the purge used
-- goes: a day's rows are a partition.
ALTER TABLE device_pushes RENAME TO device_pushes_unpartitioned;
ALTER INDEX device_pushes_pkey RENAME TO device_pushes_unpartitioned_pkey;
DROP INDEX device_pushes_received_idx;
CREATE TABLE device_pushes (
  device_id       uuid NOT NULL,
  notification_id uuid NOT NULL,
  received_at     timestamptz NOT NULL,
  PRIMARY KEY (device_id, notification_id, received_at)
) PARTITION BY RANGE (received_at);
CREATE TABLE device_pushes_default PARTITION OF device_pushes DEFAULT;
SELECT pg_temp.pushd_create_day_partitions('device_pushes', 'timestamptz',
  least((SELECT min(received_at AT TIME ZONE 'UTC')::date FROM device_pushes_unpartitioned), (now() AT TIME ZONE 'UTC')::date),
  greatest((SELECT max(received_at AT TIME ZONE 'UTC')::date FROM device_pushes_unpartitioned), (now() AT TIME ZONE 'UTC')::date + 3));
INSERT INTO device_pushes SELECT device_id, notification_id, received_at FROM device_pushes_unpartitioned;
DROP TABLE device_pushes_unpartitioned;

-- Active devices of a day: the key already holds the day, so it stays as it is.
ALTER TABLE app_active_devices RENAME TO app_active_devices_unpartitioned;
ALTER TABLE app_active_devices_unpartitioned RENAME CONSTRAINT app_active_devices_pkey TO app_active_devices_unpartitioned_pkey;
ALTER TABLE app_active_devices_unpartitioned RENAME CONSTRAINT app_active_devices_app_id_fkey TO app_active_devices_unpartitioned_app_id_fkey;
DROP INDEX app_active_devices_day_idx;
CREATE TABLE app_active_devices (
  app_id    uuid NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  day       date NOT NULL,
  device_id uuid NOT NULL,
  PRIMARY KEY (app_id, day, device_id)
) PARTITION BY RANGE (day);
CREATE TABLE app_active_devices_default PARTITION OF app_active_devices DEFAULT;
SELECT pg_temp.pushd_create_day_partitions('app_active_devices', 'date',
  least((SELECT min(day) FROM app_active_devices_unpartitioned), (now() AT TIME ZONE 'UTC')::date),
  greatest((SELECT max(day) FROM app_active_devices_unpartitioned), (now() AT TIME ZONE 'UTC')::date + 3));
INSERT INTO app_active_devices SELECT app_id, day, device_id FROM app_active_devices_unpartitioned;
DROP TABLE app_active_devices_unpartitioned;
DROP FUNCTION pg_temp.pushd_create_day_partitions(text, text, date, date);
