-- A/B tests (issue 42): a notification with `variants` goes out in two stages. Its test share first (ab_stage null);
-- then it waits for the winner (`waiting`, next_due_at the time its metric picks one, or infinity for a manual pick);
-- then the rest is sent the winner (`rest`). Each device's bucket is a hash of (notification id, device id).
ALTER TABLE notifications ADD COLUMN ab_stage text CHECK (ab_stage IN ('waiting', 'rest'));
ALTER TABLE notifications ADD COLUMN ab_winner smallint;
ALTER TABLE notifications ADD COLUMN ab_picked_at timestamptz;
-- devices of the holdout share met during the test's fan-out (sent nothing: the baseline)
ALTER TABLE notifications ADD COLUMN ab_holdout integer NOT NULL DEFAULT 0;

-- The variant a batch's devices are sent (its payload and localized are the request's variants[variant]), and whether
-- it is the rest's (sent the winner) rather than the test's; null for a notification of one payload.
ALTER TABLE delivery_batches ADD COLUMN variant smallint;
ALTER TABLE delivery_batches ADD COLUMN ab_rest boolean NOT NULL DEFAULT false;
