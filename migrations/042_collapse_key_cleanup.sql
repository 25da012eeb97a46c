-- A collapse key's row goes with its notification (issue 38), as a transactional key's does (migration 041): the
-- notification partitions' maintenance deletes those naming a dropped day's notifications but for those it keeps,
-- and those of the default partition's notifications it purges. Before, one row per distinct key stayed while its
-- app did (migration 037): a table growing with every per-user key ever sent. A key whose notification went starts
-- a new notification on its next send, as it did.
CREATE INDEX notification_collapse_keys_notification_idx ON notification_collapse_keys (notification_id);
