-- Small-to-large retrieval. Each source is partitioned, per run, into parents: runs of
-- consecutive chunks cut at heading and paragraph boundaries, up to the run's
-- `parent_max_tokens`. A chunk's parent is the one whose chunk range holds its number.
-- Existing worlds and runs get the default, four times their chunk size; their parents are
-- built from the stored chunks by a background pass at startup (no provider call).
ALTER TABLE worlds ADD COLUMN parent_max_tokens INTEGER NOT NULL DEFAULT 0;
UPDATE worlds SET parent_max_tokens = 4 * max_tokens;
ALTER TABLE runs ADD COLUMN parent_max_tokens INTEGER NOT NULL DEFAULT 0;
UPDATE runs SET parent_max_tokens = 4 * max_tokens;

CREATE TABLE parents (
    world_id        BLOB NOT NULL REFERENCES worlds (id) ON DELETE CASCADE,
    run_id          BLOB NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    source_id       BLOB NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    parent_number   INTEGER NOT NULL,
    first_chunk     INTEGER NOT NULL,
    last_chunk      INTEGER NOT NULL CHECK (last_chunk >= first_chunk),
    char_start      INTEGER NOT NULL,
    char_end        INTEGER NOT NULL CHECK (char_end >= char_start),
    token_count     INTEGER NOT NULL,
    PRIMARY KEY (run_id, source_id, parent_number)
);
CREATE INDEX parents_world_run ON parents (world_id, run_id);
