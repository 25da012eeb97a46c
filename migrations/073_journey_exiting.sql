-- Archiving a journey exits its entrants in batches: the request exits the first, the workers the rest (a million took
-- 17.8 s in one statement, longer than a client waits). This marks a journey whose entrants are still leaving.
ALTER TABLE journeys ADD COLUMN exiting boolean NOT NULL DEFAULT false;
-- what every journey poll reads: usually nothing
CREATE INDEX journeys_exiting_idx ON journeys (id) WHERE exiting;
