-- delivery_batches' rows identified by their key (notification_id, generation, seq) for logical replication and the
-- tools that need a replica identity: since migration 043 the table has no primary key, so a publication that
-- includes it refused every UPDATE and DELETE of a batch ("does not have a replica identity").
--
-- A replica identity, not a primary key: PostgreSQL cannot make a unique constraint the primary key of a partitioned
-- table in place (ADD ... USING INDEX is refused there), so a primary key would build a second b-tree on every
-- partition under the table's lock and keep it written per batch. The unique index each partition already has is
-- named instead, a catalog change: no row is read or written, and no WAL is added at wal_level replica (at logical, a
-- batch's DELETE logs its key). It does not pass to new partitions: the maintenance gives each the parent's
-- (NotificationPartitionsRepository.create).
--
-- Each ALTER takes an ACCESS EXCLUSIVE lock on its table (the parent, then each partition) until the commit, a few
-- milliseconds later; waiting behind a long query would queue every send behind it, so the whole of it (one
-- statement) gives up after 5 seconds instead and the migration is tried again at the next start.
SET LOCAL lock_timeout = '5s';
SET LOCAL statement_timeout = '5s';

DO $$
DECLARE
  r record;
BEGIN
  ALTER TABLE delivery_batches REPLICA IDENTITY USING INDEX delivery_batches_notification_id_generation_seq_key;
  -- each partition's part of that index (the default partition's and every day's)
  FOR r IN
    SELECT p.inhrelid::regclass AS part, x.inhrelid::regclass AS idx
    FROM pg_inherits p
    JOIN pg_index i ON i.indrelid = p.inhrelid
    JOIN pg_inherits x ON x.inhrelid = i.indexrelid
    WHERE p.inhparent = 'delivery_batches'::regclass
      AND x.inhparent = 'delivery_batches_notification_id_generation_seq_key'::regclass
  LOOP
    EXECUTE format('ALTER TABLE %s REPLICA IDENTITY USING INDEX %I', r.part, (SELECT relname FROM pg_class WHERE oid = r.idx));
  END LOOP;
END $$;
