-- Content per language (issue 42): the `localized` entries of a notification, beside its payload; each device is
-- sent the entry of its locale or language, else the payload. Null for a notification in one language.
ALTER TABLE notifications ADD COLUMN localized jsonb;
