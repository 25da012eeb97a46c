-- Transactional sends (POST /v6/transactional/notifications) go to the devices the request names, through no
-- stored audience; their group gathers them for statistics.
ALTER TABLE notifications ALTER COLUMN audience_id DROP NOT NULL;
ALTER TABLE notifications ADD COLUMN send_group text;
CREATE INDEX notifications_app_group_idx ON notifications (app_id, send_group, created_at) WHERE send_group IS NOT NULL;
