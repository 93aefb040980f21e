-- How big each source is in each run: its chunk count and token total, written in the
-- transaction that inserts its chunks and gone with its source or run. `mode: auto` decides
-- between the whole corpus and a search from these rows on every request, so it reads one row
-- per source instead of grouping every chunk of the run. Existing runs are counted here once.
CREATE TABLE run_sources (
    run_id          BLOB NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    source_id       BLOB NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    world_id        BLOB NOT NULL REFERENCES worlds (id) ON DELETE CASCADE,
    book_number     INTEGER NOT NULL,
    chunks          INTEGER NOT NULL,
    tokens          INTEGER NOT NULL,
    PRIMARY KEY (run_id, source_id)
);
INSERT INTO run_sources (run_id, source_id, world_id, book_number, chunks, tokens)
SELECT run_id, source_id, MIN(world_id), MIN(book_number), COUNT(*), COALESCE(SUM(token_count), 0)
FROM chunks GROUP BY run_id, source_id;
