-- A batch's row is updated once per attempt (its state, pending devices, counters, updated_at). With no b-tree on
-- a column the update changes, PostgreSQL (16 and later) updates it in place on its page (a HOT update): no new
-- index entries, less WAL, less to vacuum. The pending batches of a notification are found through the unique
-- (notification_id, generation, seq) index, which makes the partial index on state redundant; updated_at (the
-- statistics' day of a batch) is summarised by a BRIN index, which does not prevent HOT updates, and whose order
-- the rows follow as they are written. Pages are left a fifth free so the updated row fits beside the old one.
DROP INDEX delivery_batches_open_idx;
DROP INDEX delivery_batches_updated_idx;
CREATE INDEX delivery_batches_updated_brin ON delivery_batches USING brin (updated_at);
ALTER TABLE delivery_batches SET (fillfactor = 80);
