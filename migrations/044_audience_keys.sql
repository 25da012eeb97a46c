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

-- The foreign keys a unicast notification checks as it is inserted go, as those of the batches did (migration 037):
-- each check is a query run for the row, and it row-locks what it finds (FOR KEY SHARE). The audience's lock is a WAL
-- record a notification; the app's row is locked by every transaction sending for the app at once, so under
-- concurrent traffic each lock makes a MultiXact of their ids and writes its members too. Nothing is lost by it:
-- a notification names an audience of its app that its own statement or transaction found or inserted, audiences
-- are never deleted but with their app (no route, command or sweep deletes them), and apps are not deleted but by
-- hand, whose delete still takes the app's notifications and audiences, by the trigger below.
ALTER TABLE notifications DROP CONSTRAINT notifications_audience_id_fkey;
ALTER TABLE notifications DROP CONSTRAINT notifications_app_id_fkey;
ALTER TABLE audiences DROP CONSTRAINT audiences_app_id_fkey;

-- Runs after the foreign keys' own cascades (triggers fire by name, and theirs, RI_…, sort first): the app's
-- messages, which name its audiences, are deleted by then.
CREATE FUNCTION pushd_delete_app_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM notifications WHERE app_id = OLD.id;
  DELETE FROM audiences WHERE app_id = OLD.id;
  RETURN OLD;
END
$$;
CREATE TRIGGER apps_delete_rows AFTER DELETE ON apps FOR EACH ROW EXECUTE FUNCTION pushd_delete_app_rows();

-- TRUNCATE apps CASCADE emptied them through the keys too (by DELETE: the messages that name audiences are being
-- truncated by the same statement, which a TRUNCATE here would have to include).
CREATE FUNCTION pushd_truncate_app_rows() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  DELETE FROM notifications;
  DELETE FROM audiences;
  RETURN NULL;
END
$$;
CREATE TRIGGER apps_truncate_rows AFTER TRUNCATE ON apps FOR EACH STATEMENT EXECUTE FUNCTION pushd_truncate_app_rows();
