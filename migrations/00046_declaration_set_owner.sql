-- +goose Up

-- A declaration set belongs to whoever first applied it: owned turns true
-- then, and owner_groups holds the groups of the key that applied it (NULL
-- for a key limited to no groups: then only such keys may change the set).
-- A key limited to groups may change a set only when it holds every owner
-- group and every group of the set's jobs; it sees only those sets in
-- GET /v1/declarations. Existing sets are owned by the groups of their
-- jobs; a set without jobs stays unowned, and the next key to apply it
-- owns it.
ALTER TABLE ax.declaration_set
    ADD COLUMN owned boolean NOT NULL DEFAULT false,
    ADD COLUMN owner_groups text[],
    ADD CONSTRAINT declaration_set_owner_when_owned CHECK (owned OR owner_groups IS NULL);

UPDATE ax.declaration_set s
SET owned = true,
    owner_groups = (SELECT array_agg(DISTINCT j.group_name ORDER BY j.group_name) FROM ax.job j WHERE j.managed_by = s.managed_by)
WHERE EXISTS (SELECT 1 FROM ax.job j WHERE j.managed_by = s.managed_by);

-- +goose Down

ALTER TABLE ax.declaration_set DROP CONSTRAINT declaration_set_owner_when_owned,
    DROP COLUMN owner_groups, DROP COLUMN owned;
