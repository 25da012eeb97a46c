-- Frequency caps over rolling windows (issue 42): each device's last pushes that took a cap slot, newest first, at
-- most as many as the app's largest cap (a push is admitted when fewer than N of them fall in the last window).
-- One row per device, updated by one upsert under its row lock, so two notifications racing for a device's last
-- slot see each other: one gets it. Replaces 032's counters of fixed UTC windows.
CREATE TABLE device_cap_sends (
  device_id uuid PRIMARY KEY,
  sent_at timestamptz[] NOT NULL,
  -- sent_at's newest, for the sweep: a device whose last push left the longest window (a day) is forgotten
  last_sent_at timestamptz NOT NULL
);
CREATE INDEX device_cap_sends_last_sent_at ON device_cap_sends (last_sent_at);

-- Upgrade: the fixed windows still open say how many pushes each device had in them, not when. Each is placed at
-- the latest instant it may have been sent (a window's pushes that a smaller window does not hold went before that
-- window's start; the smallest window's, now), so a device gets no more than its caps allow, at worst fewer for a
-- window's length.
INSERT INTO device_cap_sends (device_id, sent_at, last_sent_at)
SELECT device_id, array_agg(at ORDER BY at DESC), max(at)
FROM (
  SELECT w.device_id, w.placed AS at
  FROM (
    SELECT device_id,
      greatest(0, count - coalesce(lag(count) OVER nested, 0)) AS more,
      coalesce(lag(window_start) OVER nested - interval '1 millisecond', now()) AS placed
    FROM device_cap_counts
    WHERE window_start + make_interval(secs => window_seconds) > now()
    WINDOW nested AS (PARTITION BY device_id ORDER BY window_seconds)
  ) w
  CROSS JOIN LATERAL generate_series(1, w.more)
) pushes
GROUP BY device_id;

DROP TABLE device_cap_counts;

-- A device now keeps as many send times as its app's largest cap, so caps are at most 1,000 pushes a window;
-- a larger one set before (up to 999,999) is kept at 1,000, which no device reaches in practice.
UPDATE apps
SET frequency_caps = (
  SELECT jsonb_agg(jsonb_set(cap, '{limit}', to_jsonb(least((cap ->> 'limit')::int, 1000))) ORDER BY ordinality)
  FROM jsonb_array_elements(frequency_caps) WITH ORDINALITY AS c(cap, ordinality)
)
WHERE jsonb_typeof(frequency_caps) = 'array'
  AND EXISTS (SELECT 1 FROM jsonb_array_elements(frequency_caps) AS c(cap) WHERE (cap ->> 'limit')::int > 1000);
