-- +goose Up
-- Every run is updated in place once when it starts (00011), so each row
-- needs room for a second version on its page. A run's row is ~130 bytes
-- and fillfactor 80 left room for a quarter of them: 3,028 of 10,000
-- starts were HOT. At 50 all were, and leasing cost 25–26 µs per task
-- against 30–33 (pg_stat_statements, one agent leasing 200 at a time).
-- The price is space: pages of finished runs stay about half full.
ALTER TABLE ax.execution SET (fillfactor = 50);

-- +goose Down
ALTER TABLE ax.execution SET (fillfactor = 80);
