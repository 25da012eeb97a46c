-- Identity verification (issue 44): an sdk key binds a device to a user id or an e-mail address only with the
-- HMAC-SHA256 of that value keyed with the app's identity secret, which the customer's backend holds and the phone
-- never does. The secret is stored as the push credentials are (it must be read back to check a hash) and is kept
-- while verification is off, so turning it on again accepts the hashes already issued. Apps created before this
-- migration start with it off, so their released app versions keep working; `pushd app create` turns it on.
ALTER TABLE apps
  ADD COLUMN identity_secret text,
  ADD COLUMN identity_verification boolean NOT NULL DEFAULT false,
  ADD CONSTRAINT apps_identity_verification_has_secret CHECK (NOT identity_verification OR identity_secret IS NOT NULL);

-- Every request of an sdk key reads both with its key (cached by each process): a change is announced as the
-- credentials' are (migrations 015 and 016).
DROP TRIGGER apps_announce_change ON apps;
CREATE TRIGGER apps_announce_change
  AFTER UPDATE OF bundle_id, apns_credentials, fcm_credentials, max_per_minute, default_time_zone, identity_secret, identity_verification
    OR DELETE OR TRUNCATE ON apps
  FOR EACH STATEMENT EXECUTE FUNCTION pushd_announce_app_change();
