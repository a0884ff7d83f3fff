-- +goose Up

-- ax.notice_add runs in the transaction that ends a run (inside the
-- completion batch every agent's results share), and its rate limit read
-- every notice ever sent to the target's URL, across all jobs naming it:
-- the last one sent (max(id)), and the ones held back since. Notices are
-- kept, so a Slack URL shared by many jobs made each notice slower, for
-- every run ended in the same batch. The notice now carries its URL, and
-- each read is one walk of an index from its newest end:
--   * sent in the last minute: at most per_minute rows, newest first;
--   * the last one sent: the newest not rate_limited;
--   * held back since: a rate_limited notice records in coalesced how
--     many were held back before it since the last one sent, so the
--     count is the newest one's, plus one (no count of them all).
-- As before, counted and not locked: concurrent ends may each let one
-- more through, or count one less.
ALTER TABLE ax.notice ADD COLUMN url text;
UPDATE ax.notice n SET url = t.url FROM ax.notice_target t WHERE t.id = n.target_id;
ALTER TABLE ax.notice ALTER COLUMN url SET NOT NULL;
-- A URL fits a btree entry: ax.notice_target's url index holds it.
CREATE INDEX notice_url_sent_idx ON ax.notice (url, id) WHERE state <> 'rate_limited';
CREATE INDEX notice_url_held_idx ON ax.notice (url, id) WHERE state = 'rate_limited';
-- The held-back counts of the notices already held back since the last
-- one sent to their URL (rows of one URL since that one, in order).
UPDATE ax.notice n SET coalesced = h.before
FROM (SELECT x.id, (row_number() OVER (PARTITION BY x.url ORDER BY x.id) - 1)::integer AS before
      FROM ax.notice x
      WHERE x.state = 'rate_limited'
        AND x.id > coalesce((SELECT max(s.id) FROM ax.notice s WHERE s.url = x.url AND s.state <> 'rate_limited'), 0)) h
WHERE h.id = n.id;

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.notice_add(p_target ax.notice_target, p_event ax.notice_event, p_execution uuid,
                                         p_detail text, p_failed_runs integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    per_minute integer;
    sent       integer;
    last_sent  bigint;
    newest     ax.notice;
    held       integer;
BEGIN
    IF NOT (p_event = ANY(p_target.events)) THEN
        RETURN;
    END IF;
    SELECT s.per_minute INTO per_minute FROM ax.notice_setting s;
    SELECT count(*) INTO sent
    FROM (SELECT n.created_at FROM ax.notice n
          WHERE n.url = p_target.url AND n.state <> 'rate_limited'
          ORDER BY n.id DESC LIMIT per_minute) r
    WHERE r.created_at > now() - interval '1 minute';
    SELECT max(n.id) INTO last_sent
    FROM ax.notice n WHERE n.url = p_target.url AND n.state <> 'rate_limited';
    SELECT * INTO newest
    FROM ax.notice n WHERE n.url = p_target.url AND n.state = 'rate_limited'
    ORDER BY n.id DESC LIMIT 1;
    held := CASE WHEN newest.id > coalesce(last_sent, 0) THEN newest.coalesced + 1 ELSE 0 END;
    IF sent >= per_minute THEN
        INSERT INTO ax.notice (job_id, target_id, url, event, execution_id, detail, failed_runs, coalesced, state)
        VALUES (p_target.job_id, p_target.id, p_target.url, p_event, p_execution, left(p_detail, 1000),
                p_failed_runs, held, 'rate_limited');
        RETURN;
    END IF;
    INSERT INTO ax.notice (job_id, target_id, url, event, execution_id, detail, failed_runs, coalesced)
    VALUES (p_target.job_id, p_target.id, p_target.url, p_event, p_execution, left(p_detail, 1000),
            p_failed_runs, held);
END $$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
CREATE OR REPLACE FUNCTION ax.notice_add(p_target ax.notice_target, p_event ax.notice_event, p_execution uuid,
                              p_detail text, p_failed_runs integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    sent integer;
    last_sent bigint;
    held integer;
BEGIN
    IF NOT (p_event = ANY(p_target.events)) THEN
        RETURN;
    END IF;
    SELECT count(*) INTO sent
    FROM ax.notice_target t JOIN ax.notice n ON n.target_id = t.id
    WHERE t.url = p_target.url AND n.state <> 'rate_limited'
      AND n.created_at > now() - interval '1 minute';
    IF sent >= (SELECT per_minute FROM ax.notice_setting) THEN
        INSERT INTO ax.notice (job_id, target_id, event, execution_id, detail, failed_runs, state)
        VALUES (p_target.job_id, p_target.id, p_event, p_execution, left(p_detail, 1000), p_failed_runs, 'rate_limited');
        RETURN;
    END IF;
    SELECT max(n.id) INTO last_sent
    FROM ax.notice_target t JOIN ax.notice n ON n.target_id = t.id
    WHERE t.url = p_target.url AND n.state <> 'rate_limited';
    SELECT count(*) INTO held
    FROM ax.notice_target t JOIN ax.notice n ON n.target_id = t.id
    WHERE t.url = p_target.url AND n.state = 'rate_limited' AND n.id > coalesce(last_sent, 0);
    INSERT INTO ax.notice (job_id, target_id, event, execution_id, detail, failed_runs, coalesced)
    VALUES (p_target.job_id, p_target.id, p_event, p_execution, left(p_detail, 1000), p_failed_runs, held);
END $$;
-- +goose StatementEnd
DROP INDEX ax.notice_url_held_idx;
DROP INDEX ax.notice_url_sent_idx;
ALTER TABLE ax.notice DROP COLUMN url;
