-- Monthly active users per country, with the share of API traffic.
WITH events AS (
    SELECT user_id, country, created_at, channel
    FROM raw.events
    WHERE created_at >= DATE '2026-01-01' AND created_at < DATE '2026-12-01'
),
monthly AS (
    SELECT date_trunc('month', created_at) AS month, country,
           COUNT(DISTINCT user_id) AS active_users,
           COUNT(*) FILTER (WHERE channel = 'api') AS api_events,
           COUNT(*) AS all_events
    FROM events
    GROUP BY 1, 2
)
SELECT month, country, active_users,
       ROUND(100.0 * api_events / NULLIF(all_events, 0), 2) AS api_share_pct
FROM monthly
WHERE active_users > 100
ORDER BY month, active_users DESC;

CREATE INDEX IF NOT EXISTS events_created_at_idx ON raw.events (created_at);
INSERT INTO audit.log (job, finished_at) VALUES ('mau_report', now());
