-- +goose Up

-- GET /v1/keys is paged (oldest first, by creation then id): each page
-- reads its keys in this index's order from the cursor's, not every key
-- sorted. Every agent registration mints a key, so the table holds a key
-- per agent start of the last history horizon (migration 00091).
CREATE INDEX api_key_created_idx ON ax.api_key (created_at, id);

-- +goose Down
DROP INDEX ax.api_key_created_idx;
