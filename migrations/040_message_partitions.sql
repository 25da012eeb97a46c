-- In-app messages partitioned by UTC day (issue 38), the last growing table a DELETE purged: the workers'
-- maintenance drops a day's messages whole (src/queue/retention.ts), as migration 030 did for their stream rows.
--
-- The key is the message's id, a version 7 UUID (migration 033), so a lookup by id (a read, a cancel, a stream's
-- join) prunes to one partition and (id) stays the primary key. A message's id is now made from the instant its
-- retention ends (expires_at: publish_at, or unpublish_at when set, + MESSAGE_RETENTION_DAYS), not from its creation
-- (MessagesRepository.insert): a day's partition then holds the messages whose retention ends that day, every row of
-- it is past retention once the day is over, and the maintenance drops it then, never before. A scheduled message or
-- one with a distant unpublish_at has an id as late as its retention: its day's partition is made ahead of time (the
-- maintenance keeps the days of the retention and three more made, the row falling into the default partition until
-- its day's is made, which moves it there), so none is dropped while in use.
-- The rows of before keep their ids (made when they were created, or random before 033): they go to the default
-- partition (today's, for those made today). A day partition's row still in use when its day is dropped (only those
-- rows) is copied into the default partition first; the default partition, once its oldest row is a day past
-- retention, is made again with only the rows still in use, and the old one dropped whole. Reads filter on
-- expires_at, so a message past retention is never read, whenever its partition goes.
--
-- No foreign key into messages any more: PostgreSQL 15 checks one into a partitioned table through a generic plan
-- over every partition (migration 037), and a partition could not be dropped while rows named it. The stream rows
-- (device_messages, by retention_from: the same day, MESSAGE_RETENTION_DAYS before) go with their own partition;
-- a notification's message_id, shown as it was stored, may name a message past retention.

ALTER TABLE device_messages DROP CONSTRAINT device_messages_message_id_fkey;
ALTER TABLE notifications DROP CONSTRAINT notifications_message_id_fkey;

-- The old table keeps its rows until they are copied; its keys and indexes go first, as the new table takes their
-- names.
ALTER TABLE messages RENAME TO messages_unpartitioned;
ALTER TABLE messages_unpartitioned DROP CONSTRAINT messages_pkey;
ALTER TABLE messages_unpartitioned DROP CONSTRAINT messages_app_id_fkey;
ALTER TABLE messages_unpartitioned DROP CONSTRAINT messages_audience_id_fkey;
DROP INDEX messages_app_created_idx, messages_app_open_idx, messages_expires_idx;

CREATE TABLE messages (LIKE messages_unpartitioned INCLUDING DEFAULTS INCLUDING CONSTRAINTS)
  PARTITION BY RANGE (id);
ALTER TABLE messages ADD CONSTRAINT messages_pkey PRIMARY KEY (id);
ALTER TABLE messages ADD CONSTRAINT messages_app_id_fkey FOREIGN KEY (app_id) REFERENCES apps(id) ON DELETE CASCADE;
ALTER TABLE messages ADD CONSTRAINT messages_audience_id_fkey FOREIGN KEY (audience_id) REFERENCES audiences(id);
-- the app's list, newest first
CREATE INDEX messages_app_created_idx ON messages (app_id, created_at DESC, id DESC);
-- the messages a stream read evaluates against the device
CREATE INDEX messages_app_open_idx ON messages (app_id, publish_at) WHERE canceled_at IS NULL AND NOT resolved;
CREATE TABLE messages_default PARTITION OF messages DEFAULT;
-- the default partition's own: the maintenance finds when its oldest row went past retention without reading it
CREATE INDEX messages_default_expires_idx ON messages_default (expires_at);

-- Today's and the next three days' partitions; the maintenance makes the others of the retention ahead.
DO $$
DECLARE
  d date;
  today date := (now() AT TIME ZONE 'UTC')::date;
  day_id text;
  next_id text;
BEGIN
  FOR d IN SELECT generate_series(today, today + 3, interval '1 day')::date LOOP
    -- the lowest id of a UTC day: its first 48 bits the milliseconds at the day's start, the others zero
    day_id := lpad(to_hex((extract(epoch FROM d::timestamp) * 1000)::bigint), 12, '0') || repeat('0', 20);
    next_id := lpad(to_hex((extract(epoch FROM (d + 1)::timestamp) * 1000)::bigint), 12, '0') || repeat('0', 20);
    EXECUTE format('CREATE TABLE messages_p%s PARTITION OF messages FOR VALUES FROM (%L) TO (%L)',
      to_char(d, 'YYYYMMDD'), day_id::uuid, next_id::uuid);
  END LOOP;
END $$;

INSERT INTO messages SELECT * FROM messages_unpartitioned;
DROP TABLE messages_unpartitioned;
