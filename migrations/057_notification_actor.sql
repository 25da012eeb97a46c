-- Who created a notification is kept on its own row: the key (its id and role), the client's address and the
-- request's id, as the audit log records an actor. A notification to a few devices (most of the traffic) then writes
-- no audit row: the audit log records changes of consequence (broadcasts, cancellations, configuration), and a copy
-- of every notification there was a second notifications table. Nullable columns: adding them rewrites nothing, and
-- a notification nobody's request made (a journey's step) leaves them null; no CHECK, which would read every row.
ALTER TABLE notifications
  ADD COLUMN actor_key_id uuid,
  ADD COLUMN actor_role text,
  ADD COLUMN client_address text,
  ADD COLUMN request_id text;

-- GET /v6/audit?notification_id=: the rows of one notification (its creation when a broadcast, its cancellation,
-- its winner picked) without reading every row of its app since it was created.
CREATE INDEX audit_log_notification_idx ON audit_log ((details ->> 'notification_id'), at) WHERE details ? 'notification_id';
