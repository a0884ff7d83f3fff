-- +goose Up
-- Before each lease, RateClassTake asks which classes have ready tasks
-- waiting; this index answers per class without reading the backlog.
CREATE INDEX task_class_pending_idx ON ax.task (rate_class, not_before)
    WHERE state = 'pending' AND rate_class IS NOT NULL;

-- +goose Down
DROP INDEX ax.task_class_pending_idx;
