-- Audience filters at scale: geo helpers and the indexes the filter compiler (src/db/filter-sql.ts) relies on.
-- Every devices index is partial on live devices: erased devices are in no audience and never counted.

-- cube gives a 3-D point type with GiST support; distance filters search a box around the centre in it.
CREATE EXTENSION IF NOT EXISTS cube;

-- A latitude/longitude as a point on the unit sphere. Our own function instead of earthdistance's ll_to_earth:
-- its SQL-standard body binds cube() at creation, so index builds under the restricted search_path of
-- PostgreSQL 17+ maintenance work, and being non-STRICT it is inlined (no function call per row).
CREATE FUNCTION pushd_geo_cube(lat double precision, lng double precision) RETURNS cube
  LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN CASE WHEN lat IS NULL OR lng IS NULL THEN NULL
    ELSE cube(ARRAY[cos(radians(lat)) * cos(radians(lng)), cos(radians(lat)) * sin(radians(lng)), sin(radians(lat))]) END;

-- A location is both coordinates or neither, so `location` may coalesce the GPS pair over the GeoIP pair.
-- No coordinate lies strictly between 0 and 1e-100 (the API snaps those to 0): float8 products in the geo
-- predicates would underflow, and PostgreSQL raises an error on underflow, failing every location query.
ALTER TABLE devices
  ADD CONSTRAINT devices_sdk_location_pair CHECK ((sdk_latitude IS NULL) = (sdk_longitude IS NULL)),
  ADD CONSTRAINT devices_ip_location_pair CHECK ((ip_latitude IS NULL) = (ip_longitude IS NULL)),
  ADD CONSTRAINT devices_coordinates_not_tiny CHECK (
    (sdk_latitude = 0 OR abs(sdk_latitude) >= 1e-100) AND (sdk_longitude = 0 OR abs(sdk_longitude) >= 1e-100) AND
    (ip_latitude = 0 OR abs(ip_latitude) >= 1e-100) AND (ip_longitude = 0 OR abs(ip_longitude) >= 1e-100));

-- The keyset listing and fan-out (ORDER BY id), and joins by id.
CREATE INDEX devices_live_idx ON devices (app_id, id) WHERE erased_at IS NULL;
-- The live total of an app (a negated filter is often total - matches): de-duplicated into a few pages, and
-- read in heap order, which keeps the visibility-map checks of an index-only scan cheap.
CREATE INDEX devices_live_count_idx ON devices (app_id) WHERE erased_at IS NULL;

-- One btree per filterable column: equality and ranges become index(-only) scans; a negated filter scans
-- the same small index instead of the table. No INCLUDE (id): it would turn off btree de-duplication, and
-- these indexes are mostly repeated values (measured: single-column and negated counts twice as slow).
CREATE INDEX devices_locale_idx ON devices (app_id, locale) WHERE erased_at IS NULL;
CREATE INDEX devices_time_zone_idx ON devices (app_id, time_zone) WHERE erased_at IS NULL;
CREATE INDEX devices_os_name_idx ON devices (app_id, os_name) WHERE erased_at IS NULL;
CREATE INDEX devices_os_version_idx ON devices (app_id, os_version) WHERE erased_at IS NULL;
CREATE INDEX devices_app_version_idx ON devices (app_id, app_version) WHERE erased_at IS NULL;
CREATE INDEX devices_sdk_version_idx ON devices (app_id, sdk_version) WHERE erased_at IS NULL;
CREATE INDEX devices_country_idx ON devices (app_id, country) WHERE erased_at IS NULL;
CREATE INDEX devices_marketing_name_idx ON devices (app_id, marketing_name) WHERE erased_at IS NULL;
CREATE INDEX devices_user_email_idx ON devices (app_id, user_email) WHERE erased_at IS NULL;
CREATE INDEX devices_notifications_allowed_idx ON devices (app_id, notifications_allowed) WHERE erased_at IS NULL;
CREATE INDEX devices_badge_idx ON devices (app_id, badge) WHERE erased_at IS NULL;
CREATE INDEX devices_created_at_idx ON devices (app_id, created_at) WHERE erased_at IS NULL;
CREATE INDEX devices_registered_at_idx ON devices (app_id, registered_at) WHERE erased_at IS NULL;
-- development devices are few: a small partial index answers `development: [true]`.
CREATE INDEX devices_development_idx ON devices (app_id) WHERE erased_at IS NULL AND development;
-- `tags && array` (any listed tag).
CREATE INDEX devices_tags_idx ON devices USING gin (tags) WHERE erased_at IS NULL;

-- Geo: a GiST on the unit-sphere point for distance (box search, then the exact chord test) and a GiST on
-- (lng, lat) for the bounding box of polygons (then the exact point-in-polygon test), for both locations.
-- `location` is the GPS location when there is one, else the GeoIP one.
CREATE INDEX devices_sdk_geo_idx ON devices USING gist (pushd_geo_cube(sdk_latitude, sdk_longitude))
  WHERE erased_at IS NULL AND sdk_latitude IS NOT NULL;
CREATE INDEX devices_geo_idx ON devices
  USING gist (pushd_geo_cube(coalesce(sdk_latitude, ip_latitude), coalesce(sdk_longitude, ip_longitude)))
  WHERE erased_at IS NULL AND coalesce(sdk_latitude, ip_latitude) IS NOT NULL;
CREATE INDEX devices_sdk_point_idx ON devices USING gist (point(sdk_longitude, sdk_latitude))
  WHERE erased_at IS NULL AND sdk_latitude IS NOT NULL;
CREATE INDEX devices_point_idx ON devices
  USING gist (point(coalesce(sdk_longitude, ip_longitude), coalesce(sdk_latitude, ip_latitude)))
  WHERE erased_at IS NULL AND coalesce(sdk_latitude, ip_latitude) IS NOT NULL;

-- Custom attributes: one partial btree per value type, (app, name, value) with the device id included, so a
-- filter reads the matching device ids with an index-only scan (is_array too: a lone filter counts scalar
-- rows without de-duplicating them).
CREATE INDEX device_attributes_string_idx ON device_attributes (app_id, name, str_value) INCLUDE (device_id, is_array) WHERE type = 'string';
CREATE INDEX device_attributes_integer_idx ON device_attributes (app_id, name, num_value) INCLUDE (device_id, is_array) WHERE type = 'integer';
CREATE INDEX device_attributes_float_idx ON device_attributes (app_id, name, num_value) INCLUDE (device_id, is_array) WHERE type = 'float';
CREATE INDEX device_attributes_date_idx ON device_attributes (app_id, name, date_value) INCLUDE (device_id, is_array) WHERE type = 'date';
CREATE INDEX device_attributes_boolean_idx ON device_attributes (app_id, name, bool_value) INCLUDE (device_id, is_array) WHERE type = 'boolean';

-- Events: "happened" and "last happened in range" read the first, counts the second.
CREATE INDEX device_events_last_idx ON device_events (app_id, source, name, last_happened_at) INCLUDE (device_id);
CREATE INDEX device_events_count_idx ON device_events (app_id, source, name, count) INCLUDE (device_id);

-- Better row estimates for the EAV and event indexes (name and value are far from independent).
CREATE STATISTICS device_attributes_name_str (mcv, dependencies) ON name, str_value FROM device_attributes;
CREATE STATISTICS device_attributes_name_num (mcv, dependencies) ON name, num_value FROM device_attributes;
CREATE STATISTICS device_events_source_name (mcv, dependencies) ON source, name FROM device_events;

-- Tags as rows too, kept equal to devices.tags by a trigger, so a tag count is an index-only scan instead of
-- a GIN bitmap scan that must visit the heap. Erased devices have none.
CREATE TABLE device_tags (
  device_id uuid NOT NULL REFERENCES devices(id) ON DELETE CASCADE,
  app_id    uuid NOT NULL,
  tag       text NOT NULL,
  PRIMARY KEY (device_id, tag)
);
CREATE INDEX device_tags_tag_idx ON device_tags (app_id, tag) INCLUDE (device_id);

CREATE FUNCTION pushd_sync_device_tags() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM device_tags WHERE device_id = NEW.id;
  IF NEW.erased_at IS NULL THEN
    INSERT INTO device_tags (device_id, app_id, tag) SELECT DISTINCT NEW.id, NEW.app_id, t FROM unnest(NEW.tags) AS t;
  END IF;
  RETURN NULL;
END $$;
CREATE TRIGGER devices_tags_inserted AFTER INSERT ON devices
  FOR EACH ROW WHEN (cardinality(NEW.tags) > 0) EXECUTE FUNCTION pushd_sync_device_tags();
CREATE TRIGGER devices_tags_updated AFTER UPDATE OF tags, erased_at ON devices
  FOR EACH ROW WHEN (OLD.tags IS DISTINCT FROM NEW.tags OR OLD.erased_at IS DISTINCT FROM NEW.erased_at)
  EXECUTE FUNCTION pushd_sync_device_tags();

-- Every attribute, event and tag row belongs to a live device of its app: erasing a device deletes them here,
-- whoever sets erased_at, and the service writes none to an erased device. device_count relies on it to
-- count a lone attribute, event or tag filter on its own table.
CREATE FUNCTION pushd_device_erased() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM device_attributes WHERE device_id = NEW.id;
  DELETE FROM device_events WHERE device_id = NEW.id;
  RETURN NULL;
END $$;
CREATE TRIGGER devices_erased AFTER UPDATE OF erased_at ON devices
  FOR EACH ROW WHEN (OLD.erased_at IS NULL AND NEW.erased_at IS NOT NULL) EXECUTE FUNCTION pushd_device_erased();
