-- A statement's new devices get their tag rows from one insert of the statement, not from a plpgsql call a device:
-- registrations arriving together are inserted by one statement (src/db/repositories/new-devices.ts), where the
-- row trigger's call and its own insert took 12 % of PostgreSQL's time a new device. A device inserted erased holds
-- no tags, as before; updates still sync a device's tags row by row (pushd_sync_device_tags).
CREATE FUNCTION pushd_insert_device_tags() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO device_tags (device_id, app_id, tag)
  SELECT DISTINCT d.id, d.app_id, t
  FROM inserted_devices AS d, unnest(d.tags) AS t
  WHERE d.erased_at IS NULL;
  RETURN NULL;
END $$;

DROP TRIGGER devices_tags_inserted ON devices;
CREATE TRIGGER devices_tags_inserted AFTER INSERT ON devices REFERENCING NEW TABLE AS inserted_devices
  FOR EACH STATEMENT EXECUTE FUNCTION pushd_insert_device_tags();
