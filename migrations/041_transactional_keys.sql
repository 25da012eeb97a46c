-- Which notification a transactional send's key names (issue 38), as notification_collapse_keys does for collapse
-- keys (migration 037): the lookup of a send with a key was a probe of the plain (app_id, transactional_key) index of
-- every day partition of notifications, ninety-odd after RETENTION_NOTIFICATIONS_DAYS' 90 days; here it is one.
-- The key's row is upserted by the send (NotificationsRepository.claimTransactional), which row-locks it until the
-- commit, whether or not a notification had the key: concurrent sends with it take turns, as the advisory lock made
-- them. A row goes with its notification: the notification partitions' maintenance deletes those of a dropped day
-- but for the notifications it keeps, and those of the default partition's notifications it purges, by the
-- notification_id index.
CREATE TABLE notification_transactional_keys (
  app_id            uuid NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  transactional_key text NOT NULL,
  notification_id   uuid NOT NULL,
  PRIMARY KEY (app_id, transactional_key)
);
CREATE INDEX notification_transactional_keys_notification_idx ON notification_transactional_keys (notification_id);

-- The keys of the notifications there are; the lookup took any one of a key's notifications, and a send with a key
-- makes a second only when it found none, so there is one (the latest updated, should a database hold two).
INSERT INTO notification_transactional_keys (app_id, transactional_key, notification_id)
SELECT DISTINCT ON (app_id, transactional_key) app_id, transactional_key, id
FROM notifications
WHERE transactional_key IS NOT NULL
ORDER BY app_id, transactional_key, updated_at DESC, id DESC;

-- nothing else reads the key off the notifications
DROP INDEX notifications_app_transactional_key_idx;
