-- Personal pushes (issue 66): what templates render with.

-- A notification's per-send values (`data`, `data_by`) and a journey send's entrants' events (`event_by`),
-- read once per notification when its payload has templates; null for the others.
ALTER TABLE notifications ADD COLUMN template_data jsonb;

-- The event that moved the entrant last (its trigger's, then the one a wait_for received): name, date and
-- properties, which a send step's templates read as `event`. Kept here, not in the per-device event aggregates.
ALTER TABLE journey_entrants ADD COLUMN event jsonb;
