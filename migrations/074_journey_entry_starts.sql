-- An entrant's first history entries (entered, and waiting until when) are the same for everyone who enters a journey
-- by the same start in one batch, yet each entrant wrote them as a row of its own: 3 µs of a 10 µs entry and 372 of
-- its ~1,000 bytes of WAL. Each start of a batch now writes that row once, under an id of its own (entrant_id of
-- journey_entrant_history, seq 0, the entrants' entered_at: the same partition, dropped with them), and its entrants
-- name it here; the rows an entrant's moves append stay its own. Entrants from before keep their own first row.
ALTER TABLE journey_entrants ADD COLUMN start_id uuid;
