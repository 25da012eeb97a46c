-- A large broadcast's audience is cut into ranges of the device id space (UUIDs, random: equal ranges hold about
-- as many devices), each fanned out by a job of its own on any worker, from its own checkpoint. A range's
-- batches take seq numbers of a block of their own ((range + 1) * 1,000,000 on), so ranges never collide.
CREATE TABLE fanout_ranges (
  notification_id     uuid NOT NULL REFERENCES notifications(id) ON DELETE CASCADE,
  generation          integer NOT NULL,
  range_no            integer NOT NULL,
  -- the checkpoint: the last device id fanned out (at first the range's exclusive lower bound)
  cursor_id           uuid NOT NULL,
  -- the range's inclusive upper bound; null: to the end of the id space
  up_to_id            uuid,
  next_seq            integer NOT NULL,
  done                boolean NOT NULL DEFAULT false,
  -- the range's share of the notification's devices_targeted and devices_not_allowed (summed on read)
  devices_targeted    integer NOT NULL DEFAULT 0,
  devices_not_allowed integer NOT NULL DEFAULT 0,
  updated_at          timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (notification_id, generation, range_no)
);

-- A notification's push counters are the sums of its batches' (which every attempt already updated): recording
-- a batch no longer updates the notification's row, on which every worker sending one broadcast queued. The
-- reason nothing was delivered is kept per batch too; the notification shows its latest. The row's own push
-- counters keep only pushes sent without a batch (a Live Activity channel's): those of notifications with
-- batches, which their batches also counted, are zeroed, so the sum on read counts each push once.
ALTER TABLE delivery_batches ADD COLUMN failure_reason text;
UPDATE notifications n
SET pushes_succeeded = 0, pushes_failed = 0, tokens_invalidated = 0, pushes_expired = 0
WHERE (n.pushes_succeeded, n.pushes_failed, n.tokens_invalidated, n.pushes_expired) <> (0, 0, 0, 0)
  AND EXISTS (SELECT 1 FROM delivery_batches b WHERE b.notification_id = n.id);
