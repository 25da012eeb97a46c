-- iOS Live Activities (issue 41). An activity's update token and an activity type's push-to-start token belong to a
-- device: each is forgotten on its own when APNs answers that it is no longer valid, and with the device's erasure.
CREATE TABLE live_activity_tokens (
  device_id     uuid NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
  activity_id   text NOT NULL,
  app_id        uuid NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
  activity_type text NOT NULL,
  token         text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (device_id, activity_id)
);
-- an update or end goes to every device holding the activity's token
CREATE INDEX live_activity_tokens_activity ON live_activity_tokens (app_id, activity_id, device_id);

CREATE TABLE live_activity_start_tokens (
  device_id     uuid NOT NULL REFERENCES devices (id) ON DELETE CASCADE,
  activity_type text NOT NULL,
  app_id        uuid NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
  token         text NOT NULL,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (device_id, activity_type)
);

-- Erasing a device empties it: its activity tokens go with the rest, whichever path erases it.
CREATE FUNCTION pushd_forget_live_activities() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM live_activity_tokens WHERE device_id = NEW.id;
  DELETE FROM live_activity_start_tokens WHERE device_id = NEW.id;
  RETURN NEW;
END $$;
CREATE TRIGGER devices_forget_live_activities
  AFTER UPDATE OF erased_at ON devices
  FOR EACH ROW WHEN (OLD.erased_at IS NULL AND NEW.erased_at IS NOT NULL)
  EXECUTE FUNCTION pushd_forget_live_activities();

-- A Live Activity push is a notification of its own kind: {event, activity_type, activity_id}; null for the others.
ALTER TABLE notifications ADD COLUMN live_activity jsonb;

-- The app's broadcast channels (iOS 18), created through APNs' channel management API, per environment.
CREATE TABLE live_activity_channels (
  id                     uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  app_id                 uuid NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
  channel_id             text NOT NULL,
  development            boolean NOT NULL,
  message_storage_policy int NOT NULL,
  created_at             timestamptz NOT NULL DEFAULT now(),
  UNIQUE (app_id, channel_id)
);
