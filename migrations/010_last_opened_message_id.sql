-- Columns more than one part of issue 12 reads or writes, added first so those parts can be built side by side:
-- the device's last app open (set by the SDK's session and open reports, shown as `last_opened`), and the in-app
-- message a notification was sent with (its push carries the message id; statistics show it as `message_id`).
ALTER TABLE devices ADD COLUMN last_opened_at timestamptz;
ALTER TABLE notifications ADD COLUMN message_id uuid;
