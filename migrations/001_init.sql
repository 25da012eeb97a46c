-- Apps, their API keys, devices (with custom attributes and event aggregates), audiences, notifications.
CREATE TABLE apps (
  id               uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  bundle_id        text NOT NULL UNIQUE,
  name             text NOT NULL,
  apns_credentials jsonb,
  fcm_credentials  jsonb,
  created_at       timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_keys (
  id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  app_id     uuid NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  role       text NOT NULL CHECK (role IN ('read', 'write', 'sdk')),
  -- SHA-256 of the key: keys carry >= 128 random bits, so a fast hash is enough and allows lookup.
  key_hash   bytea NOT NULL UNIQUE,
  key_hint   text NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);
CREATE INDEX api_keys_app_idx ON api_keys (app_id);

CREATE TABLE devices (
  id                    uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  app_id                uuid NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  platform              text NOT NULL CHECK (platform IN ('ios', 'android')),
  token                 text,
  development           boolean NOT NULL DEFAULT false,
  locale                text,
  time_zone             text,
  os_name               text,
  os_version            text,
  app_version           text,
  sdk_version           text,
  marketing_name        text,
  badge                 integer,
  user_id               text,
  user_email            text,
  tags                  text[] NOT NULL DEFAULT '{}',
  country               text,
  notifications_allowed text CHECK (notifications_allowed IN ('Enabled', 'Disabled', 'Unknown')),
  sdk_latitude          double precision,
  sdk_longitude         double precision,
  ip_address            inet,
  ip_latitude           double precision,
  ip_longitude          double precision,
  created_at            timestamptz NOT NULL DEFAULT now(),
  registered_at         timestamptz NOT NULL DEFAULT now(),
  erased_at             timestamptz,
  token_invalidated_at  timestamptz,
  token_invalid_reason  text
);
-- One device per app and push token: registering a known token returns that device.
CREATE UNIQUE INDEX devices_app_token_uidx ON devices (app_id, token) WHERE token IS NOT NULL;
CREATE INDEX devices_app_id_idx ON devices (app_id, id);
CREATE INDEX devices_app_user_idx ON devices (app_id, user_id) WHERE user_id IS NOT NULL;

-- Custom attributes, one row per value (arrays have one row per element), typed columns for indexable filters.
CREATE TABLE device_attributes (
  device_id  uuid NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
  app_id     uuid NOT NULL,
  name       text NOT NULL,
  type       text NOT NULL CHECK (type IN ('string', 'integer', 'float', 'date', 'boolean')),
  position   smallint NOT NULL DEFAULT 0,
  is_array   boolean NOT NULL DEFAULT false,
  str_value  text,
  num_value  double precision,
  date_value timestamptz,
  bool_value boolean,
  PRIMARY KEY (device_id, name, position)
);

-- Per device and event: how often, first and last time. source '' = the SDK.
CREATE TABLE device_events (
  device_id         uuid NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
  app_id            uuid NOT NULL,
  source            text NOT NULL DEFAULT '',
  name              text NOT NULL,
  count             bigint NOT NULL DEFAULT 0,
  first_happened_at timestamptz NOT NULL,
  last_happened_at  timestamptz NOT NULL,
  PRIMARY KEY (device_id, source, name)
);

CREATE TABLE audiences (
  id         uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  app_id     uuid NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  name       text NOT NULL,
  kind       text NOT NULL CHECK (kind IN ('all', 'filters')),
  -- canonical filter list (null for the all-devices audience)
  filters    jsonb,
  -- the canonical form as text: equal specs collide here, which is what makes the upsert dedupe
  spec_key   text NOT NULL,
  test       boolean NOT NULL DEFAULT false,
  created_at timestamptz NOT NULL DEFAULT now(),
  updated_at timestamptz NOT NULL DEFAULT now(),
  UNIQUE (app_id, spec_key)
);
CREATE INDEX audiences_app_created_idx ON audiences (app_id, created_at, id);

CREATE TABLE notifications (
  id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  app_id             uuid NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  audience_id        uuid NOT NULL REFERENCES audiences(id),
  request            jsonb NOT NULL,
  payload            jsonb NOT NULL,
  collapse_key       text,
  state              text NOT NULL DEFAULT 'scheduled' CHECK (state IN ('scheduled', 'sending', 'sent', 'failed')),
  -- bumped each time a collapse_key request re-sends the same notification
  generation         integer NOT NULL DEFAULT 1,
  devices_targeted   bigint NOT NULL DEFAULT 0,
  pushes_succeeded   bigint NOT NULL DEFAULT 0,
  pushes_failed      bigint NOT NULL DEFAULT 0,
  tokens_invalidated bigint NOT NULL DEFAULT 0,
  failure_reason     text,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  published_at       timestamptz,
  finished_at        timestamptz
);
CREATE UNIQUE INDEX notifications_app_collapse_uidx ON notifications (app_id, collapse_key) WHERE collapse_key IS NOT NULL;
CREATE INDEX notifications_state_idx ON notifications (state, updated_at) WHERE state IN ('scheduled', 'sending');
