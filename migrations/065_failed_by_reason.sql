-- Why each failed push of a batch failed, counted by reason ({"payload_too_large": 2, "BadDeviceToken": 1}): a
-- notification's statistics show its failures by reason, summed over its batches. Batches recorded before this have none.
ALTER TABLE delivery_batches ADD COLUMN failed_by_reason jsonb;
