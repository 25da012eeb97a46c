-- The console's lists: an app's notifications newest first, and pushes per day (batches by their last attempt).
CREATE INDEX notifications_app_created_idx ON notifications (app_id, created_at DESC, id DESC);
CREATE INDEX delivery_batches_updated_idx ON delivery_batches (updated_at);
