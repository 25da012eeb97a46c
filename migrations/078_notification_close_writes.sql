-- What closing a notification writes. Every notification's state changes at least once (sending, then sent), and
-- each change added an entry to the index on (app_id, state, created_at): two index inserts, about 200 bytes of WAL,
-- a one-device notification. Listing an app's notifications by state reads the app's newest (app_created_idx) for
-- the states most rows have, the open ones through notifications_state_idx, and the rare ends through this index,
-- written only when a notification fails or is canceled.
DROP INDEX notifications_app_state_idx;
CREATE INDEX notifications_app_ended_badly_idx ON notifications (app_id, state, created_at DESC, id DESC)
  WHERE state IN ('failed', 'canceled');

-- The close is an update of the whole row that cannot be HOT (state is indexed); on a full page its new version went
-- to another page, which locks the old one first (a record of its own). A fifth of each page is left for it, as
-- delivery_batches does (migration 017); the maintenance gives each new day's partition the default one's options.
DO $$
DECLARE
  part regclass;
BEGIN
  FOR part IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 'notifications'::regclass LOOP
    EXECUTE format('ALTER TABLE %s SET (fillfactor = 80)', part);
  END LOOP;
END $$;
