-- The planner's estimate of a lookup of a push token by its key (`pushd_token_key(token) = $1`, every registration's
-- read and the writes that lock a token): PostgreSQL ignores the statistics of a partial index's expression, and
-- devices_app_token_uidx is partial, so it took the default selectivity (0.5 %: 220 rows of 44,000 where there is
-- one) and costed the index scan ~385 instead of ~8. A prepared statement's generic plan then looked dearer than
-- the custom plans its first runs made while the table was small, and PostgreSQL planned each run again: 0.2 ms of
-- its CPU a registration of a known token (0.5 ms in all), 0.09 ms a new one. Statistics of the expression itself
-- give the key's real selectivity.
CREATE STATISTICS devices_token_key_stats ON (pushd_token_key(token)) FROM devices;
ANALYZE devices;
