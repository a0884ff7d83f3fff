-- CallbackBreakerAdmit decides whether a delivery to @host may go now. A
-- closed (or unknown) breaker admits; an open one whose time is up, or a
-- half-open one whose probe is older than @probe_seconds (its sender
-- died), turns half-open with this delivery as its single probe. Returns
-- the state before the call, whether this delivery is the probe, the
-- times that say how long to hold otherwise, and the failures counted
-- (a success need not write to a closed breaker without any).
-- name: CallbackBreakerAdmit :one
WITH b AS (
    SELECT cb.state, cb.open_until, cb.consecutive_failures FROM ax.callback_breaker cb WHERE cb.host = @host
), probe AS (
    UPDATE ax.callback_breaker p
    SET state = 'half_open', probe_started_at = now(), updated_at = now()
    WHERE p.host = @host
      AND ((p.state = 'open' AND p.open_until <= now())
           OR (p.state = 'half_open'
               AND p.probe_started_at <= now() - make_interval(secs => sqlc.arg('probe_seconds')::double precision)))
    RETURNING p.host
)
SELECT coalesce((SELECT state::text FROM b), 'closed')::text AS state,
       EXISTS (SELECT 1 FROM probe)::boolean AS probe,
       coalesce((SELECT open_until FROM b), now())::timestamptz AS open_until,
       coalesce((SELECT consecutive_failures FROM b), 0)::integer AS failures,
       now()::timestamptz AS now;

-- CallbackBreakerFailure counts a failed delivery to @host: the breaker
-- opens for @open_seconds after @threshold consecutive failures, or at
-- once when the failure was the half-open probe's. A breaker open already
-- keeps its time. Returns the state before and after.
-- name: CallbackBreakerFailure :one
WITH prev AS (
    SELECT pb.state FROM ax.callback_breaker pb WHERE pb.host = @host FOR UPDATE
)
INSERT INTO ax.callback_breaker AS b (host, state, consecutive_failures, opened_at, open_until)
VALUES (@host,
        CASE WHEN sqlc.arg('threshold')::integer <= 1 THEN 'open' ELSE 'closed' END::ax.breaker_state, 1,
        CASE WHEN sqlc.arg('threshold')::integer <= 1 THEN now() END,
        CASE WHEN sqlc.arg('threshold')::integer <= 1
             THEN now() + make_interval(secs => sqlc.arg('open_seconds')::double precision) END)
ON CONFLICT (host) DO UPDATE
SET consecutive_failures = b.consecutive_failures + 1,
    state = CASE WHEN b.state = 'half_open'
                      OR (b.state = 'closed' AND b.consecutive_failures + 1 >= sqlc.arg('threshold')::integer)
                 THEN 'open' ELSE b.state END::ax.breaker_state,
    opened_at = CASE WHEN b.state = 'open' THEN b.opened_at
                     WHEN b.state = 'half_open' OR b.consecutive_failures + 1 >= sqlc.arg('threshold')::integer
                     THEN now() END,
    open_until = CASE WHEN b.state = 'open' THEN b.open_until
                      WHEN b.state = 'half_open' OR b.consecutive_failures + 1 >= sqlc.arg('threshold')::integer
                      THEN now() + make_interval(secs => sqlc.arg('open_seconds')::double precision) END,
    probe_started_at = NULL,
    updated_at = now()
RETURNING coalesce((SELECT state::text FROM prev), 'closed')::text AS prev_state, b.state::text AS state;

-- CallbackBreakerSuccess closes @host's breaker after a delivery got an
-- answer; it writes only when there is something to reset. Returns the
-- state before when it did.
-- name: CallbackBreakerSuccess :many
UPDATE ax.callback_breaker b
SET state = 'closed', consecutive_failures = 0, opened_at = NULL, open_until = NULL,
    probe_started_at = NULL, updated_at = now()
FROM (SELECT pb.host, pb.state FROM ax.callback_breaker pb WHERE pb.host = @host) prev
WHERE b.host = prev.host AND (b.state <> 'closed' OR b.consecutive_failures > 0)
RETURNING prev.state::text AS prev_state;

-- CallbackBreakerDeleteIdle forgets breakers untouched for a day, open
-- ones too: no delivery went to the host for a day (a held one turns an
-- open breaker half-open once its time is up), and a later one starts
-- from a closed breaker and fails its way open again. (Only closed ones
-- went: a receiver taken down for good left its breaker open for ever and
-- the metric of open breakers said 1 for it, one series for every host
-- and port a job's callbacks ever failed on.)
-- name: CallbackBreakerDeleteIdle :execrows
DELETE FROM ax.callback_breaker
WHERE updated_at < now() - interval '1 day';

-- CallbackBreakerListRecent lists callback hosts whose circuit breaker is not
-- closed, or changed within a day (so a closed one reads 0, not gone).
-- A metrics query: every replica reads the same shared rows, so all
-- replicas report the same numbers.
-- name: CallbackBreakerListRecent :many
SELECT host, state::text AS state
FROM ax.callback_breaker
WHERE state <> 'closed' OR updated_at > now() - interval '1 day';
