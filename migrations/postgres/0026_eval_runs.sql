-- Evaluation runs (`/v1/worlds/{world_id}/evals/{eval_id}/runs`): a test set scored against a
-- world under a few retrieval settings, in the background. `items` is a snapshot of the set's
-- items when the run was asked for (later edits of the set do not change what it measures);
-- `scores` holds one record per item scored so far, `done` their count, so a run taken up again
-- after a restart goes on from there. A run is held by one process at a time: `owner` until
-- `lease_until_s` (seconds since the epoch, by the database's clock), renewed as it saves.
CREATE TABLE eval_runs (
    id            UUID PRIMARY KEY,
    world_id      UUID NOT NULL REFERENCES worlds (id) ON DELETE CASCADE,
    eval_id       UUID NOT NULL REFERENCES eval_sets (id) ON DELETE CASCADE,
    eval_name     TEXT NOT NULL,
    status        TEXT NOT NULL,
    settings      TEXT NOT NULL,
    budgets       TEXT NOT NULL,
    items         TEXT NOT NULL,
    item_count    BIGINT NOT NULL,
    done          BIGINT NOT NULL DEFAULT 0,
    scores        TEXT NOT NULL DEFAULT '[]',
    measured      TEXT,
    attempts      BIGINT NOT NULL DEFAULT 0,
    error         TEXT,
    owner         TEXT,
    lease_until_s DOUBLE PRECISION,
    created_at    TIMESTAMPTZ NOT NULL,
    started_at    TIMESTAMPTZ,
    finished_at   TIMESTAMPTZ
);
CREATE INDEX eval_runs_set ON eval_runs (eval_id, created_at);
CREATE INDEX eval_runs_world ON eval_runs (world_id, status);
CREATE INDEX eval_runs_open ON eval_runs (status, created_at);
