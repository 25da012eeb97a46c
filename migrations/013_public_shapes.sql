-- What GeoIP said of the device's address, shown as the device record's `location.geoip` (public API shape):
-- its city and country. `country` stays the device's own country (sent by the SDK, else filled from GeoIP).
ALTER TABLE devices
  ADD COLUMN ip_city text,
  ADD COLUMN ip_country text;
