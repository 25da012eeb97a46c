-- A best-time send's batches are cut at once and held for their wave (issue 69): no delivery job exists for a held
-- batch until its wave is released, which clears this. A release takes only held batches, so one released before
-- and still sending or retrying is not paced or queued again; a cancel closes the held ones, which nothing else would.
ALTER TABLE delivery_batches ADD COLUMN held boolean NOT NULL DEFAULT false;
