-- A due batch is one journey's entrants at one step (JourneyEntrantsRepository.lockDue). With the due moment alone in
-- the due index, a batch among many journeys' entrants due at the same moment (a morning's delays, many journeys'
-- sends) fetched every due entrant's row to test its journey, so a poll's batches read them all once a journey each.
-- Named after the moment, the journey is tested in the index and only a batch's own rows are read; the poll still
-- reads the earliest due entrants of all journeys in order, and when nothing is due an empty range of it.
DROP INDEX journey_entrants_due_idx;
CREATE INDEX journey_entrants_due_idx ON journey_entrants (due_at, journey_id) WHERE due_at IS NOT NULL;
