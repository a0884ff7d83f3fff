-- +goose Up

-- A re-run with cascade re-runs its job's downstream jobs, and each of
-- those cascades in turn; a job after several upstreams of the cascade
-- is re-run once per upstream that re-ran, and so is everything after it.
-- Through layers of width w that is w^(depth-1) runs from one call (50
-- upstreams a job, 100 downstream jobs each: millions). Each cascading
-- re-run now records the re-run that started its cascade (its root; the
-- root's own is itself), and the after-firer makes at most
-- axtype.MaxCascadeReruns re-runs a root; past that it records the
-- downstream's time as skipped, reason cascade_bound. Re-runs made before
-- this migration have none: a cascade under way counts from the re-run
-- it reaches next.
ALTER TYPE ax.skip_reason ADD VALUE IF NOT EXISTS 'cascade_bound';
ALTER TABLE ax.execution_rerun ADD COLUMN cascade_root uuid;
CREATE INDEX execution_rerun_cascade_root_idx ON ax.execution_rerun (cascade_root) WHERE cascade_root IS NOT NULL;

-- +goose Down
-- The enum value 'cascade_bound' stays: Postgres cannot drop one, and skip
-- records may use it.
DROP INDEX ax.execution_rerun_cascade_root_idx;
ALTER TABLE ax.execution_rerun DROP COLUMN cascade_root;
