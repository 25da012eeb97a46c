-- A rate limit of its own for one key (pushd key set-limit); NULL keeps the configured default for its role.
ALTER TABLE api_keys
  ADD COLUMN rate_limit_per_second double precision CHECK (rate_limit_per_second >= 0),
  ADD COLUMN rate_limit_burst integer CHECK (rate_limit_burst >= 1),
  ADD CONSTRAINT api_keys_rate_limit_both CHECK ((rate_limit_per_second IS NULL) = (rate_limit_burst IS NULL));
