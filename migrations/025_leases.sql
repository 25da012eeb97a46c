-- Work one process of the deployment does for all (the sweeper's scan for stalled notifications): the process
-- holding the lease, until it expires unless renewed, so another takes over within seconds when its holder dies.
CREATE TABLE leases (
  name text PRIMARY KEY,
  holder text NOT NULL,
  expires_at timestamptz NOT NULL
);
