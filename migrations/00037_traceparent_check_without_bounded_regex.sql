-- +goose Up

-- execution_traceparent_format holds the same rule without the regular
-- expression's bounded repeats ({32}, {16}, {2}): PostgreSQL checks every
-- CHECK constraint on every UPDATE of a row, so the run's start (the
-- lease) paid for it as its fire did, and that expression cost about
-- 8 µs a row (200,000 inserts into a table with the check: 1.67 s
-- against 0.10 s without; 0.52 s in this form). BenchmarkWritePath:
-- fire and lease 10-20 µs a task less of the database's CPU with the
-- check dropped. The length, the dashes' places and one unbounded
-- expression say the same: "00-", 32 hex digits, "-", 16, "-", 2.
ALTER TABLE ax.execution
    DROP CONSTRAINT execution_traceparent_format,
    ADD CONSTRAINT execution_traceparent_format
        CHECK (length(traceparent) = 55
               AND traceparent ~ '^00-[0-9a-f]*-[0-9a-f]*-[0-9a-f]*$'
               AND substr(traceparent, 36, 1) = '-' AND substr(traceparent, 53, 1) = '-');

-- +goose Down
ALTER TABLE ax.execution
    DROP CONSTRAINT execution_traceparent_format,
    ADD CONSTRAINT execution_traceparent_format
        CHECK (traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');
