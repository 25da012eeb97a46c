-- In-app messages (POST /v6/messages) and each device's message stream.
CREATE TABLE messages (
  id             uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  app_id         uuid NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  audience_id    uuid NOT NULL REFERENCES audiences(id),
  -- the message as submitted (the record's `message`)
  request        jsonb NOT NULL,
  title          text NOT NULL,
  text           text,
  url            text,
  type           text NOT NULL,
  custom         jsonb NOT NULL DEFAULT '{}',
  -- the send time asked for (null: at once)
  send_at        timestamptz,
  -- when it enters streams: send_at, or when it was created
  publish_at     timestamptz NOT NULL,
  unpublish_at   timestamptz,
  -- retention: deleted once this has passed (publish_at + MESSAGE_RETENTION_DAYS)
  expires_at     timestamptz NOT NULL,
  -- its audience named a few devices or users, resolved into device_messages when it was created: it is never
  -- evaluated again when a device reads its stream
  resolved       boolean NOT NULL DEFAULT false,
  canceled_at    timestamptz,
  created_at     timestamptz NOT NULL DEFAULT now(),
  CHECK (unpublish_at IS NULL OR unpublish_at > publish_at)
);
-- the app's list, newest first
CREATE INDEX messages_app_created_idx ON messages (app_id, created_at DESC, id DESC);
-- the messages a stream read evaluates against the device
CREATE INDEX messages_app_open_idx ON messages (app_id, publish_at) WHERE canceled_at IS NULL AND NOT resolved;
-- the workers' retention purge, oldest first
CREATE INDEX messages_expires_idx ON messages (expires_at);

-- A message in a device's stream: a row once the device has been in the message's audience while it was live
-- (so leaving the audience later does not take it away), with the device's read and deleted state and impressions.
CREATE TABLE device_messages (
  device_id                uuid NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
  message_id               uuid NOT NULL REFERENCES messages(id) ON DELETE CASCADE,
  added_at                 timestamptz NOT NULL DEFAULT now(),
  read_at                  timestamptz,
  -- deleted by the device: out of its stream for good
  deleted_at               timestamptz,
  stream_impressions       integer NOT NULL DEFAULT 0,
  full_screen_impressions  integer NOT NULL DEFAULT 0,
  in_app_impressions       integer NOT NULL DEFAULT 0,
  PRIMARY KEY (device_id, message_id)
);
-- a message's statistics (an index-only sum) and its purge
CREATE INDEX device_messages_message_idx ON device_messages (message_id)
  INCLUDE (stream_impressions, full_screen_impressions, in_app_impressions);

-- The push a message was sent with (migration 010's column): at most one a message; a purged message leaves
-- its notification without one.
ALTER TABLE notifications
  ADD CONSTRAINT notifications_message_id_fkey FOREIGN KEY (message_id) REFERENCES messages(id) ON DELETE SET NULL;
CREATE UNIQUE INDEX notifications_message_uidx ON notifications (message_id) WHERE message_id IS NOT NULL;

-- An erased device's stream empties: its rows leave the stream and forget when they were read; their impressions
-- stay in the messages' statistics. (An erased device is in no audience, so nothing joins its stream again.)
CREATE FUNCTION pushd_device_messages_erased() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  UPDATE device_messages SET deleted_at = coalesce(deleted_at, now()), read_at = NULL WHERE device_id = NEW.id;
  RETURN NULL;
END $$;
CREATE TRIGGER devices_messages_erased AFTER UPDATE OF erased_at ON devices
  FOR EACH ROW WHEN (OLD.erased_at IS NULL AND NEW.erased_at IS NOT NULL) EXECUTE FUNCTION pushd_device_messages_erased();
