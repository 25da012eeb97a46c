-- A notification's end (notification.completed, notification.canceled) is written once a statement instead of once a
-- row, as journey entries are (migration 067): the record of attempts closes a group of one-device notifications by
-- one UPDATE, and the row trigger's plpgsql call, with its probe of the app's endpoints, ran for each of them, even
-- for an app without an endpoint. A statement trigger with transition tables cannot name its columns, so it runs
-- after every UPDATE of notifications and keeps the rows whose state became an end.
DROP TRIGGER notifications_webhook_event ON notifications;
DROP FUNCTION pushd_notification_webhook_event();

CREATE FUNCTION pushd_notification_webhook_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO webhook_events (endpoint_id, app_id, type, data)
  SELECT e.id, e.app_id, ended.type,
         CASE WHEN ended.type = 'notification.canceled' THEN jsonb_build_object('notification_id', ended.id)
              -- its counts are its batches' sums and its fan-out ranges' (NotificationsRepository.withCounters)
              ELSE (SELECT jsonb_build_object(
                      'notification_id', ended.id, 'state', ended.state,
                      'devices_targeted', ended.devices_targeted
                        + coalesce((SELECT sum(r.devices_targeted) FROM fanout_ranges r WHERE r.notification_id = ended.id), 0),
                      'pushes_succeeded', coalesce(sum(b.succeeded), 0), 'pushes_failed', coalesce(sum(b.failed), 0),
                      'pushes_invalidated', coalesce(sum(b.invalidated), 0), 'pushes_expired', coalesce(sum(b.expired), 0))
                    FROM delivery_batches b
                    WHERE b.notification_id = ended.id AND b.generation = ended.generation) END
  FROM (
    SELECT n.id, n.app_id, n.state, n.generation, n.devices_targeted,
           CASE WHEN n.state = 'canceled' THEN 'notification.canceled' ELSE 'notification.completed' END AS type
    FROM updated_rows n
    JOIN previous_rows o ON o.id = n.id
    WHERE o.state IS DISTINCT FROM n.state AND n.state IN ('sent', 'failed', 'canceled')
  ) AS ended
  JOIN webhook_endpoints e ON e.app_id = ended.app_id AND e.enabled AND e.events && ARRAY['*', ended.type];
  RETURN NULL;
END
$$;
CREATE TRIGGER notifications_webhook_events AFTER UPDATE ON notifications
  REFERENCING OLD TABLE AS previous_rows NEW TABLE AS updated_rows
  FOR EACH STATEMENT EXECUTE FUNCTION pushd_notification_webhook_events();
