-- Time-ordered ids for notifications and messages (issue 38): a UUID of version 7 (RFC 9562), whose first 48 bits
-- are the milliseconds since the epoch when it was made and the other 74 of its 122 random, so a day's ids are one
-- range of the uuid order. That is what lets these tables be partitioned by day on their id, the key every foreign
-- key to them names, and it writes each day's rows at the right edge of the primary key instead of on a random page
-- of it. The service makes the ids of the notifications it sends (timeOrderedUuid, src/platform/random-id.ts); these
-- defaults make those of the others. Ids made before stay as they are: still UUIDs, spread over the whole order.

-- A version 7 UUID of `at` (by default the moment of the call): a random one with its first 48 bits replaced by the
-- time and its version digit made 7 (bits 52 and 53 set on version 4's 0100).
CREATE FUNCTION pushd_uuid7(at timestamptz DEFAULT clock_timestamp()) RETURNS uuid
LANGUAGE sql VOLATILE PARALLEL SAFE AS $$
  SELECT encode(
    set_bit(set_bit(
      overlay(uuid_send(gen_random_uuid()) PLACING substring(int8send(floor(extract(epoch FROM at) * 1000)::bigint) FROM 3) FROM 1 FOR 6),
      52, 1), 53, 1),
    'hex')::uuid
$$;

ALTER TABLE notifications ALTER COLUMN id SET DEFAULT pushd_uuid7();
ALTER TABLE messages ALTER COLUMN id SET DEFAULT pushd_uuid7();
