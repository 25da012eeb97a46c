-- The holdout of an A/B test as a baseline (issue 42): the devices of its holdout share its test's fan-out met, and
-- when (`since`, the moment it cut their page: their variants' devices of that page were sent from then), so their
-- app opens and events in the window after it can be set beside the variants' (AbTestsRepository.figures).
-- Bounded by the holdout share of the audience; kept with the notification, as its batches' device lists are: the
-- notification partitions' maintenance deletes a dropped day's rows (NotificationPartitionsRepository.drop). No
-- foreign key to notifications: a day partition of them could not be detached while rows here name it.
CREATE TABLE ab_holdout_devices (
  notification_id uuid NOT NULL,
  device_id       uuid NOT NULL,
  since           timestamptz NOT NULL,
  PRIMARY KEY (notification_id, device_id)
);
-- an event looks its device's holdouts up as it looks up the pushes it received (ConversionsRepository.attribute)
CREATE INDEX ab_holdout_devices_device_idx ON ab_holdout_devices (device_id, since);

-- The events a holdout device sent within the conversion window after `since`, per event: the conversions it
-- would have counted for the notification had it been sent a variant (notification_conversions, which only
-- pushes received count in).
CREATE TABLE ab_holdout_conversions (
  notification_id uuid NOT NULL,
  device_id       uuid NOT NULL,
  source          text NOT NULL,
  name            text NOT NULL,
  count           bigint NOT NULL,
  PRIMARY KEY (notification_id, device_id, source, name)
);
