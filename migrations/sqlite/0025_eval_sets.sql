-- Evaluation test sets (`/v1/worlds/{world_id}/evals`): questions with what a good answer
-- holds, kept per world and deleted with it. `items` is the JSON array of items as the API
-- took them (each `{query, expected}`); `item_count` lets a listing skip reading it.
CREATE TABLE eval_sets (
    id         BLOB PRIMARY KEY NOT NULL,
    world_id   BLOB NOT NULL REFERENCES worlds (id) ON DELETE CASCADE,
    name       TEXT NOT NULL,
    items      TEXT NOT NULL,
    item_count INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX eval_sets_world ON eval_sets (world_id, created_at);
