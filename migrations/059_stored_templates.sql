-- Stored templates (issue 66, docs/templates.md): a payload with its per-language texts, kept by the app and named
-- by id from a notification, a transactional send or a journey's send step. A change makes a new version; the old
-- ones stay readable, so a reference pinned to one keeps its words.
CREATE TABLE templates (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  app_id      uuid NOT NULL REFERENCES apps (id) ON DELETE CASCADE,
  name        text NOT NULL,
  -- the newest version: what a reference without a version takes
  version     integer NOT NULL DEFAULT 1,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX templates_app_idx ON templates (app_id, created_at);

CREATE TABLE template_versions (
  template_id  uuid NOT NULL REFERENCES templates (id) ON DELETE CASCADE,
  version      integer NOT NULL,
  payload      jsonb NOT NULL,
  -- the texts per language, as a notification's `localized` (null: none)
  localized    jsonb,
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (template_id, version)
);
