-- An audience's spec key as 16 bytes (issue 38, fewer bytes a write): the first 128 bits of the canonical spec's
-- SHA-256 as a uuid (audienceSpec) instead of the whole digest in hex, 65 bytes of text. A unicast notification to
-- a new device stores its audience, and the key is in its row and in the unique index of (app_id, spec_key).
-- The keys stored are rewritten the same way, so a spec sent again finds the audience it made before: a digest's
-- first 32 hex digits, the all-devices key '*' the nil uuid, and any other text (none is written) its own digest's.
ALTER TABLE audiences ALTER COLUMN spec_key TYPE uuid USING (
  CASE
    WHEN spec_key = '*' THEN '00000000-0000-0000-0000-000000000000'::uuid
    WHEN spec_key ~ '^[0-9a-f]{64}$' THEN left(spec_key, 32)::uuid
    ELSE encode(substring(sha256(convert_to(spec_key, 'UTF8')) FROM 1 FOR 16), 'hex')::uuid
  END);

