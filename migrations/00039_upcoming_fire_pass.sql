-- +goose Up

-- A pass of the upcoming list used to delete every tick and insert them
-- all again: with 55 every-second jobs, 198,000 rows deleted and
-- inserted (each checked against ax.job) every half minute, 4.4-5.0 s a
-- pass, though 30 s later all but 1/120 of an hour's ticks are the same.
-- A pass now deletes the ticks no longer listed and inserts the new ones;
-- when the list was last computed, which tells the other replicas it is
-- fresh, is kept on one row of its own instead of on every tick.
CREATE TABLE ax.upcoming_fire_pass (
    singleton boolean PRIMARY KEY DEFAULT true CONSTRAINT upcoming_fire_pass_singleton CHECK (singleton),
    computed_at timestamptz NOT NULL
);
INSERT INTO ax.upcoming_fire_pass (computed_at)
SELECT max(computed_at) FROM ax.upcoming_fire HAVING max(computed_at) IS NOT NULL;
ALTER TABLE ax.upcoming_fire DROP COLUMN computed_at;

-- +goose Down

ALTER TABLE ax.upcoming_fire ADD COLUMN computed_at timestamptz NOT NULL DEFAULT now();
UPDATE ax.upcoming_fire SET computed_at = p.computed_at FROM ax.upcoming_fire_pass p;
DROP TABLE ax.upcoming_fire_pass;
