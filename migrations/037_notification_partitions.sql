-- Notifications, their delivery batches and fan-out ranges partitioned by UTC day (issue 38), as migrations 023, 030
-- and 034 did for receipts, activity and idempotency keys. The key is the notification's id: a version 7 UUID since
-- migration 033, whose first 48 bits are the milliseconds it was made, so a day's notifications are one range of
-- ids, [the day's lowest id, the next day's), and (id) stays the primary key. The batches and ranges are partitioned
-- by their notification_id on the same bounds: the workers' maintenance drops a day's batches and ranges, then its
-- notifications (src/queue/retention.ts), keeping the rows still in use. They keep no foreign key to notifications:
-- PostgreSQL 15 checks one into a partitioned table through a generic plan over every partition, which took a
-- notification's insert with its batch from 2,880 to 1,990 a second on one connection (2,700 without the key). Each
-- is written in the statement that writes or locks its notification, and goes with it (the maintenance's drops and
-- purge; apps are not deleted).
--
-- A partitioned table's unique index must hold its partition key, so three unique indexes go:
-- * (app_id, collapse_key): a collapse key now names its notification in notification_collapse_keys, whose upsert
--   answers the id a second send with the key takes (NotificationsRepository.insertOrCollapse), atomically;
-- * (app_id, transactional_key): sends with a key already take a transaction-scoped advisory lock on it, then look
--   it up (NotificationsRepository.lockTransactional): a plain index serves the lookup;
-- * (message_id): a message's push is inserted once, in the transaction that creates the message.
-- Opens and conversions are kept longer than notifications may be (RETENTION_ACTIVITY_DAYS against
-- RETENTION_NOTIFICATIONS_DAYS) and are partitioned by another key, so their foreign keys to notifications go: the
-- notification_id stays a plain column, checked by the service when an open is reported (a notification of the app).

ALTER TABLE push_opens DROP CONSTRAINT push_opens_notification_id_fkey;
ALTER TABLE notification_conversions DROP CONSTRAINT notification_conversions_notification_id_fkey;
ALTER TABLE delivery_batches DROP CONSTRAINT delivery_batches_notification_id_fkey;
ALTER TABLE fanout_ranges DROP CONSTRAINT fanout_ranges_notification_id_fkey;

-- The old tables keep their rows until they are copied; their indexes and keys go first, as the new tables take
-- their names (a copy needs none).
ALTER TABLE notifications RENAME TO notifications_unpartitioned;
ALTER TABLE notifications_unpartitioned DROP CONSTRAINT notifications_pkey;
ALTER TABLE notifications_unpartitioned DROP CONSTRAINT notifications_app_id_fkey;
ALTER TABLE notifications_unpartitioned DROP CONSTRAINT notifications_audience_id_fkey;
ALTER TABLE notifications_unpartitioned DROP CONSTRAINT notifications_message_id_fkey;
DROP INDEX notifications_app_collapse_uidx, notifications_app_created_idx, notifications_app_group_idx, notifications_app_state_idx,
  notifications_app_transactional_key_uidx, notifications_due_idx, notifications_message_uidx, notifications_state_idx;
ALTER TABLE delivery_batches RENAME TO delivery_batches_unpartitioned;
ALTER TABLE delivery_batches_unpartitioned DROP CONSTRAINT delivery_batches_pkey;
ALTER TABLE delivery_batches_unpartitioned DROP CONSTRAINT delivery_batches_notification_id_generation_seq_key;
DROP INDEX delivery_batches_updated_brin;
ALTER TABLE fanout_ranges RENAME TO fanout_ranges_unpartitioned;
ALTER TABLE fanout_ranges_unpartitioned DROP CONSTRAINT fanout_ranges_pkey;

CREATE TABLE notifications (LIKE notifications_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS INCLUDING GENERATED)
  PARTITION BY RANGE (id);
ALTER TABLE notifications ADD CONSTRAINT notifications_pkey PRIMARY KEY (id);
ALTER TABLE notifications ADD CONSTRAINT notifications_app_id_fkey FOREIGN KEY (app_id) REFERENCES apps(id) ON DELETE CASCADE;
ALTER TABLE notifications ADD CONSTRAINT notifications_audience_id_fkey FOREIGN KEY (audience_id) REFERENCES audiences(id);
ALTER TABLE notifications ADD CONSTRAINT notifications_message_id_fkey FOREIGN KEY (message_id) REFERENCES messages(id) ON DELETE SET NULL;
CREATE INDEX notifications_app_created_idx ON notifications (app_id, created_at DESC, id DESC);
CREATE INDEX notifications_app_group_idx ON notifications (app_id, send_group, created_at) WHERE send_group IS NOT NULL;
CREATE INDEX notifications_app_state_idx ON notifications (app_id, state, created_at DESC);
CREATE INDEX notifications_app_transactional_key_idx ON notifications (app_id, transactional_key) WHERE transactional_key IS NOT NULL;
CREATE INDEX notifications_due_idx ON notifications (next_due_at) WHERE next_due_at IS NOT NULL;
CREATE INDEX notifications_message_idx ON notifications (message_id) WHERE message_id IS NOT NULL;
CREATE INDEX notifications_state_idx ON notifications (state, updated_at) WHERE state IN ('scheduled', 'sending');
CREATE TABLE notifications_default PARTITION OF notifications DEFAULT;
-- the default partition's own: its purge finds the rows past retention (those of before migration 033, and those
-- a drop kept while in use) without reading the others; the day partitions, written per send, do without
CREATE INDEX notifications_default_updated_idx ON notifications_default (updated_at);

-- A batch's id is made of its notification's, generation and seq (src/queue/fanout.ts batchId), so (id,
-- notification_id) is as unique as id was; lookups by id alone read each partition's part of it.
CREATE TABLE delivery_batches (LIKE delivery_batches_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
  PARTITION BY RANGE (notification_id);
ALTER TABLE delivery_batches ADD CONSTRAINT delivery_batches_pkey PRIMARY KEY (id, notification_id);
ALTER TABLE delivery_batches ADD CONSTRAINT delivery_batches_notification_id_generation_seq_key UNIQUE (notification_id, generation, seq);
CREATE INDEX delivery_batches_updated_brin ON delivery_batches USING brin (updated_at);
-- a partitioned table has no storage of its own: each partition leaves a fifth of its pages free, as migration 017
-- did for the table, and the maintenance gives a new partition the default one's options
CREATE TABLE delivery_batches_default PARTITION OF delivery_batches DEFAULT WITH (fillfactor = 80);

CREATE TABLE fanout_ranges (LIKE fanout_ranges_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
  PARTITION BY RANGE (notification_id);
ALTER TABLE fanout_ranges ADD CONSTRAINT fanout_ranges_pkey PRIMARY KEY (notification_id, generation, range_no);
CREATE TABLE fanout_ranges_default PARTITION OF fanout_ranges DEFAULT;

-- Which notification a collapse key names: the earlier notification of the app with the key is the same one, updated
-- in place. One row per distinct key, kept while its app is (a key whose notification went past retention names an
-- id no row has: the next send with it starts that notification again).
CREATE TABLE notification_collapse_keys (
  app_id          uuid NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  collapse_key    text NOT NULL,
  notification_id uuid NOT NULL,
  PRIMARY KEY (app_id, collapse_key)
);
INSERT INTO notification_collapse_keys (app_id, collapse_key, notification_id)
SELECT app_id, collapse_key, id FROM notifications_unpartitioned WHERE collapse_key IS NOT NULL;

-- The lowest id of a UTC day: its first 48 bits the milliseconds at the day's start, the others zero.
CREATE FUNCTION pg_temp.pushd_day_id(d date) RETURNS uuid
LANGUAGE sql IMMUTABLE AS $$
  SELECT (lpad(to_hex((extract(epoch FROM d::timestamp) * 1000)::bigint), 12, '0') || repeat('0', 20))::uuid
$$;

-- The partitions of one UTC day, of the three tables.
CREATE FUNCTION pg_temp.pushd_notification_day(d date) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
  parent text;
BEGIN
  FOREACH parent IN ARRAY ARRAY['notifications', 'delivery_batches', 'fanout_ranges'] LOOP
    EXECUTE format('CREATE TABLE IF NOT EXISTS %I PARTITION OF %I FOR VALUES FROM (%L) TO (%L) %s',
      parent || '_p' || to_char(d, 'YYYYMMDD'), parent, pg_temp.pushd_day_id(d), pg_temp.pushd_day_id(d + 1),
      CASE parent WHEN 'delivery_batches' THEN 'WITH (fillfactor = 80)' ELSE '' END);
  END LOOP;
END $$;

-- Today's and the next three days' partitions, and those of each day of the last 90 (the default retention) that a
-- notification made since migration 033 has (a version 7 id). Older ids are random: their rows go to the default
-- partition, which the maintenance purges by their last update (a partition for each of them would be one for
-- each of thousands of years). A random id may fall in a day's range: it then goes with that day.
DO $$
DECLARE
  d date;
  today date := (now() AT TIME ZONE 'UTC')::date;
BEGIN
  FOR d IN SELECT generate_series(today, today + 3, interval '1 day')::date LOOP
    PERFORM pg_temp.pushd_notification_day(d);
  END LOOP;
  FOR d IN
    SELECT DISTINCT (to_timestamp(('x' || substr(replace(id::text, '-', ''), 1, 12))::bit(48)::bigint / 1000.0) AT TIME ZONE 'UTC')::date
    FROM notifications_unpartitioned WHERE substr(id::text, 15, 1) = '7'
  LOOP
    IF d >= today - 90 AND d < today THEN
      PERFORM pg_temp.pushd_notification_day(d);
    END IF;
  END LOOP;
END $$;

-- No statistics of the documents and device lists, as migration 018 set for the tables before (set on a parent, it
-- holds for its partitions of now; the maintenance gives a new partition the default one's)
ALTER TABLE notifications
  ALTER COLUMN request SET STATISTICS 0,
  ALTER COLUMN payload SET STATISTICS 0,
  ALTER COLUMN local_plan SET STATISTICS 0;
ALTER TABLE delivery_batches
  ALTER COLUMN device_ids SET STATISTICS 0,
  ALTER COLUMN pending_device_ids SET STATISTICS 0;

-- The rows, with every column but the generated one (`capped`), notifications before what refers to them.
DO $$
DECLARE
  columns text;
BEGIN
  SELECT string_agg(quote_ident(attname), ', ' ORDER BY attnum) INTO columns
  FROM pg_attribute WHERE attrelid = 'notifications_unpartitioned'::regclass AND attnum > 0 AND NOT attisdropped AND attgenerated = '';
  EXECUTE format('INSERT INTO notifications (%s) SELECT %s FROM notifications_unpartitioned', columns, columns);
END $$;
INSERT INTO delivery_batches SELECT * FROM delivery_batches_unpartitioned;
INSERT INTO fanout_ranges SELECT * FROM fanout_ranges_unpartitioned;
DROP TABLE fanout_ranges_unpartitioned, delivery_batches_unpartitioned, notifications_unpartitioned;

DROP FUNCTION pg_temp.pushd_notification_day(date);
DROP FUNCTION pg_temp.pushd_day_id(date);
