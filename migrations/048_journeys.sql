-- Journeys (issue 58): definitions with their versions, per-step counters, and the entrants' state. An entrant is
-- one row moved from step to step by single conditional UPDATEs (its seq), found when due by the journey poller
-- through the partial index on due_at; entrants are kept by the UTC day they entered (partitioned, dropped whole
-- after RETENTION_JOURNEY_ENTRANTS_DAYS by the workers' maintenance, src/queue/retention.ts).
CREATE TABLE journeys (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  app_id        uuid NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  name          text NOT NULL,
  state         text NOT NULL CHECK (state IN ('active', 'paused', 'archived')),
  version       integer NOT NULL DEFAULT 1,
  -- the current version's definition (trigger, entry_filters, re_entry, exit_on, steps) as parsed
  definition    jsonb NOT NULL,
  -- the event that enters it (null: entered through the API only)
  trigger_event text,
  -- the events any of its versions waits for or exits on: what an event recorded for an entrant must be checked for
  listens       text[] NOT NULL DEFAULT '{}',
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX journeys_app_idx ON journeys (app_id, created_at DESC, id);
-- what recording an event looks up: the app's journeys that may take it
CREATE INDEX journeys_listening_idx ON journeys (app_id) WHERE state <> 'archived';

CREATE TABLE journey_versions (
  journey_id  uuid NOT NULL REFERENCES journeys(id) ON DELETE CASCADE,
  version     integer NOT NULL,
  definition  jsonb NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (journey_id, version)
);

-- Counters per step ('' is the trigger), spread over a few shards so concurrent entries do not queue on one row.
CREATE TABLE journey_step_counts (
  journey_id  uuid NOT NULL REFERENCES journeys(id) ON DELETE CASCADE,
  step_id     text NOT NULL,
  shard       smallint NOT NULL,
  entered     bigint NOT NULL DEFAULT 0,
  waiting     bigint NOT NULL DEFAULT 0,
  passed      bigint NOT NULL DEFAULT 0,
  sent        bigint NOT NULL DEFAULT 0,
  failed      bigint NOT NULL DEFAULT 0,
  converted   bigint NOT NULL DEFAULT 0,
  exited      bigint NOT NULL DEFAULT 0,
  skipped     bigint NOT NULL DEFAULT 0,
  filtered    bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (journey_id, step_id, shard)
);

CREATE TABLE journey_entrants (
  id           uuid NOT NULL DEFAULT gen_random_uuid(),
  journey_id   uuid NOT NULL,
  -- the version it entered, which it finishes
  version      integer NOT NULL,
  app_id       uuid NOT NULL,
  -- 'u:' || user_id, or 'd:' || device_id for a device without a user
  entrant_key  text NOT NULL,
  -- the device it entered with: entry and branch filters are evaluated on it
  device_id    uuid NOT NULL,
  -- the step it is at, or left at once it has an outcome
  step_id      text NOT NULL,
  -- arrived: the step runs when due; waiting: a delay or wait_for ends at due_at; done: it left
  phase        text NOT NULL CHECK (phase IN ('arrived', 'waiting', 'done')),
  -- bumped by every transition: each UPDATE is conditional on the seq it read
  seq          integer NOT NULL DEFAULT 0,
  due_at       timestamptz,
  -- while at a wait_for: the event it waits for and the step that event leads to
  wait_event   text,
  on_event     text,
  outcome      text CHECK (outcome IN ('completed', 'converted', 'exited', 'failed')),
  entered_at   timestamptz NOT NULL,
  left_at      timestamptz,
  PRIMARY KEY (id, entered_at)
) PARTITION BY RANGE (entered_at);
CREATE TABLE journey_entrants_default PARTITION OF journey_entrants DEFAULT;
-- the poller's only read when nothing is due: an empty range of this index
CREATE INDEX journey_entrants_due_idx ON journey_entrants (due_at) WHERE due_at IS NOT NULL;
-- an event recorded for an entrant: its re-entry, exits and waits
CREATE INDEX journey_entrants_key_idx ON journey_entrants (app_id, entrant_key, journey_id);

DO $$
DECLARE
  d date;
BEGIN
  FOR d IN SELECT generate_series((now() AT TIME ZONE 'UTC')::date - 1, (now() AT TIME ZONE 'UTC')::date + 3, interval '1 day')::date LOOP
    EXECUTE format('CREATE TABLE %I PARTITION OF journey_entrants FOR VALUES FROM (%L) TO (%L)',
      'journey_entrants_p' || to_char(d, 'YYYYMMDD'), d::text || ' 00:00:00+00', (d + 1)::text || ' 00:00:00+00');
  END LOOP;
END $$;
