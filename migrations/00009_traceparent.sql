-- +goose Up
-- A run carries a W3C trace context so it can be followed across systems:
-- the caller's traceparent when the run was submitted with one, else one
-- whose trace id is the execution id. Agents and callbacks get it.
ALTER TABLE ax.execution
    ADD COLUMN traceparent text,
    ADD CONSTRAINT execution_traceparent_format
        CHECK (traceparent ~ '^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$');

-- +goose Down
ALTER TABLE ax.execution DROP COLUMN traceparent;
