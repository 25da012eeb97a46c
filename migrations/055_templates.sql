-- Personal pushes (issue 66): what templates render with, and the templates an app keeps.

-- A notification's per-send values (`data`, `data_by`) and a journey send's entrants' events (`event_by`),
-- read once per notification when its payload has templates; null for the others.
ALTER TABLE notifications ADD COLUMN template_data jsonb;

-- The event that moved the entrant last (its trigger's, then the one a wait_for received): name, date and
-- properties, which a send step's templates read as `event`. Kept here, not in the per-device event aggregates.
ALTER TABLE journey_entrants ADD COLUMN event jsonb;

-- Stored templates: a payload with its per-language content, referenced by id from a notification, a transactional
-- send or a journey's send step; a change makes a new version, the earlier ones kept.
CREATE TABLE templates (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  app_id      uuid NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  name        text NOT NULL,
  version     integer NOT NULL DEFAULT 1,
  -- {payload, localized?} as validated
  content     jsonb NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (app_id, name)
);
CREATE INDEX templates_app_idx ON templates (app_id, created_at DESC, id);

CREATE TABLE template_versions (
  template_id uuid NOT NULL REFERENCES templates(id) ON DELETE CASCADE,
  version     integer NOT NULL,
  content     jsonb NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (template_id, version)
);
