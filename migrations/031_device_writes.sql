-- Devices: fewer bytes per write (issue 38, part 4). devices_app_id_idx (app_id, id) held the same entries as
-- devices_live_idx plus the erased devices, which no query reads by app (an erased device is in no audience, list or
-- count; by id it is the primary key). Pages keep a tenth free, so a write that changes no indexed column (a
-- device registering again as it was: registered_at now moves only when something changes) can be a HOT update,
-- the new row version on the same page and no index entry written.
DROP INDEX devices_app_id_idx;
ALTER TABLE devices SET (fillfactor = 90);
