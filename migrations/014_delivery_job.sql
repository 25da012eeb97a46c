-- The delivery job that sends a batch: batches stored together (the notifications created in one group) are sent by
-- one job, named after the first of them. NULL: the batch's own job (its id). The sweeper asks the queue for it.
ALTER TABLE delivery_batches ADD COLUMN job_id text;
