-- Fewer bytes a batch writes (issue 38): one b-tree entry instead of two, no stored id, its device list once, and a
-- recording that stays a HOT update on PostgreSQL 15 too.
--
-- A batch's id, <notification id>-g<generation>-b<seq> (src/domain/batch-id.ts), is a function of
-- (notification_id, generation, seq), which the unique index already finds it by: the primary key on (id,
-- notification_id) indexed each batch a second time and the id column stored what the other three say. Both go;
-- the unique constraint stays the key (not rebuilt as a primary key, which would build an index on every day's
-- partition under the table's lock), and the repositories make the id from the three when they answer it.
ALTER TABLE delivery_batches DROP CONSTRAINT delivery_batches_pkey;
ALTER TABLE delivery_batches DROP COLUMN id;

-- PostgreSQL 15 updates a row in place (HOT) only when no index, a BRIN one included, covers a column the update
-- changes (16 and later exempt summarising indexes): the BRIN on updated_at, which the statistics find a day's
-- batches by, made every recording of an attempt write a new entry in each index. The statistics now count a
-- batch's pushes on the day it started, its reserved start or else when it was made, which no recording changes;
-- rows are written about in that order, which is what a BRIN index needs.
DROP INDEX delivery_batches_updated_brin;
CREATE INDEX delivery_batches_started_brin ON delivery_batches USING brin ((coalesce(not_before, created_at)));

-- A batch's pending devices are all of its devices until an attempt is recorded: not written twice at insert (a
-- unicast batch's one-device array is some 40 bytes), null until then, read as device_ids (DeliveryRepository).
ALTER TABLE delivery_batches ALTER COLUMN pending_device_ids DROP NOT NULL;
