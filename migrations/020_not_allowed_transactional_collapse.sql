-- Devices an audience matched that were not sent a visible push because they reported notifications Disabled.
ALTER TABLE notifications ADD COLUMN devices_not_allowed integer NOT NULL DEFAULT 0;
-- A transactional send's collapse_key with its recipient (JSON ["<to.field>", "<to.value>", "<collapse_key>"]): a
-- later send with the same key to the same recipient is the same notification. Apart from collapse_key, whose
-- index makes one notification of the app's broadcasts: a per-user send never takes a broadcast over.
ALTER TABLE notifications ADD COLUMN transactional_key text;
CREATE UNIQUE INDEX notifications_app_transactional_key_uidx ON notifications (app_id, transactional_key)
  WHERE transactional_key IS NOT NULL;
