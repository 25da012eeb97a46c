-- The day's counters in 64 shards instead of 16. A new device's transaction holds its shard's installs counter from
-- its insert to its commit, so registrations from 50 clients at once queued on 16 rows (most of a registration's
-- time in PostgreSQL was that wait). Readers sum the shards, and a device keeps one shard from here on, so the rows
-- written in 16 shards before still add up.
CREATE OR REPLACE FUNCTION pushd_stats_shard(device_id uuid) RETURNS smallint LANGUAGE sql IMMUTABLE PARALLEL SAFE
  RETURN (get_byte(uuid_send(device_id), 15) & 63)::smallint;
