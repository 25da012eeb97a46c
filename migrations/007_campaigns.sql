-- Campaign control: send later (at one instant, or at a wall time in each device's zone), at a pace, cancel.
ALTER TABLE notifications DROP CONSTRAINT notifications_state_check;
ALTER TABLE notifications
  ADD CONSTRAINT notifications_state_check CHECK (state IN ('scheduled', 'sending', 'sent', 'failed', 'canceled')),
  -- the instant asked for (a local-time send keeps its wall time in `request`)
  ADD COLUMN send_at timestamptz,
  -- when the fan-out is next due: set while waiting for send_at or the next local-time wave, null once released
  ADD COLUMN next_due_at timestamptz,
  -- local-time waves: [{"at": iso, "zones": [...]}] in time order; `wave` is the next one to fan out
  ADD COLUMN local_plan jsonb,
  ADD COLUMN wave integer NOT NULL DEFAULT 0,
  ADD COLUMN skipped_past_local_time integer NOT NULL DEFAULT 0,
  ADD COLUMN throttle_per_minute integer CHECK (throttle_per_minute >= 1),
  -- pacing (GCRA): the instant the next batch of this notification may start
  ADD COLUMN pace_next_at timestamptz,
  ADD COLUMN canceled_at timestamptz;
CREATE INDEX notifications_due_idx ON notifications (next_due_at) WHERE next_due_at IS NOT NULL;
CREATE INDEX notifications_app_state_idx ON notifications (app_id, state, created_at DESC);

ALTER TABLE delivery_batches DROP CONSTRAINT delivery_batches_state_check;
ALTER TABLE delivery_batches
  ADD CONSTRAINT delivery_batches_state_check CHECK (state IN ('pending', 'done', 'superseded', 'canceled')),
  -- a paced batch is not sent before this instant
  ADD COLUMN not_before timestamptz;

ALTER TABLE apps
  ADD COLUMN default_time_zone text,
  ADD COLUMN max_per_minute integer CHECK (max_per_minute >= 1),
  ADD COLUMN pace_next_at timestamptz;

-- a local-time wave pages the devices of its zones
CREATE INDEX devices_app_zone_idx ON devices (app_id, time_zone, id) WHERE erased_at IS NULL;
