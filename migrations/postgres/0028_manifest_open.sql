-- Claims and marks as HOT updates.
--
-- PostgreSQL writes an updated row in place of the old one on the same page, with no new index
-- entries (a heap-only tuple), only when the update changes no indexed column and the page has
-- room. Every claim set `lease_owner` (indexed for release and takeover) and every mark changed
-- `state` (in three indexes), so each one wrote a new entry into all six of the entry's indexes
-- and left the old ones for vacuum: at a million chunks the load ran at about half SQLite's rate.
--
-- The entries that are still to do, pending or failed, are now kept in `manifest_open` as well:
-- one row per such entry, with what the queue and the checks look them up by, written by the
-- triggers below in the statement that changes the entry. Every lookup of pending or failed
-- entries reads it (SQLite has a view of the same name over its entries, which its own indexes
-- serve), so `manifest_entries` needs no index on `state` or on the lease: a claim and a mark
-- change only unindexed columns of the entry. A mark deletes the open row, which writes no
-- index entry either.
CREATE TABLE manifest_open (
    chunk_id     UUID PRIMARY KEY,
    world_id     UUID NOT NULL,
    run_id       UUID NOT NULL,
    source_id    UUID NOT NULL,
    job_id       UUID,
    state        TEXT NOT NULL CHECK (state IN ('pending', 'failed')),
    book_number  BIGINT NOT NULL,
    chunk_number BIGINT NOT NULL,
    -- Why the entry failed, or went back to the queue (a job's errors are read from here).
    last_error_code    TEXT,
    last_error_message TEXT
);
-- The claim's queue (a job's pending entries in reading order) and a job's failures.
CREATE INDEX manifest_open_job ON manifest_open (job_id, state, book_number, chunk_number);
-- A run's pending and failed entries (a re-ingest's finish, a world's failures).
CREATE INDEX manifest_open_run ON manifest_open (world_id, run_id, state);
-- A source's unfinished entries (a replace's switch).
CREATE INDEX manifest_open_source ON manifest_open (source_id, run_id, state);

CREATE FUNCTION manifest_open_insert() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO manifest_open (chunk_id, world_id, run_id, source_id, job_id, state, book_number, chunk_number,
        last_error_code, last_error_message)
    SELECT chunk_id, world_id, run_id, source_id, job_id, state, book_number, chunk_number, last_error_code,
        last_error_message
    FROM new_entries WHERE state <> 'embedded';
    RETURN NULL;
END
$$;

CREATE FUNCTION manifest_open_delete() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM manifest_open WHERE chunk_id IN (SELECT chunk_id FROM old_entries WHERE state <> 'embedded');
    RETURN NULL;
END
$$;

-- One row at a time, and only for the rows whose state, job, place (a replace's switch moves its
-- entries to the source they replace) or error changed: a claim, a lease's renewal or a release
-- fires nothing.
CREATE FUNCTION manifest_open_update() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.state = 'embedded' THEN
        DELETE FROM manifest_open WHERE chunk_id = OLD.chunk_id;
    ELSE
        INSERT INTO manifest_open (chunk_id, world_id, run_id, source_id, job_id, state, book_number, chunk_number,
        last_error_code, last_error_message)
        VALUES (NEW.chunk_id, NEW.world_id, NEW.run_id, NEW.source_id, NEW.job_id, NEW.state, NEW.book_number,
                NEW.chunk_number, NEW.last_error_code, NEW.last_error_message)
        ON CONFLICT (chunk_id) DO UPDATE SET world_id = EXCLUDED.world_id, run_id = EXCLUDED.run_id,
            source_id = EXCLUDED.source_id, job_id = EXCLUDED.job_id, state = EXCLUDED.state,
            book_number = EXCLUDED.book_number, chunk_number = EXCLUDED.chunk_number,
            last_error_code = EXCLUDED.last_error_code, last_error_message = EXCLUDED.last_error_message;
    END IF;
    RETURN NULL;
END
$$;

-- The triggers first, then the copy: creating them locks manifest_entries against writers until
-- this migration commits, so no entry written meanwhile escapes both.
CREATE TRIGGER manifest_open_insert AFTER INSERT ON manifest_entries
    REFERENCING NEW TABLE AS new_entries
    FOR EACH STATEMENT EXECUTE FUNCTION manifest_open_insert();
CREATE TRIGGER manifest_open_delete AFTER DELETE ON manifest_entries
    REFERENCING OLD TABLE AS old_entries
    FOR EACH STATEMENT EXECUTE FUNCTION manifest_open_delete();
CREATE TRIGGER manifest_open_update
    AFTER UPDATE OF state, job_id, world_id, run_id, source_id, book_number, chunk_number, last_error_code,
        last_error_message ON manifest_entries
    FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state OR OLD.job_id IS DISTINCT FROM NEW.job_id
        OR OLD.world_id IS DISTINCT FROM NEW.world_id OR OLD.run_id IS DISTINCT FROM NEW.run_id
        OR OLD.source_id IS DISTINCT FROM NEW.source_id OR OLD.book_number IS DISTINCT FROM NEW.book_number
        OR OLD.chunk_number IS DISTINCT FROM NEW.chunk_number OR OLD.last_error_code IS DISTINCT FROM NEW.last_error_code
        OR OLD.last_error_message IS DISTINCT FROM NEW.last_error_message)
    EXECUTE FUNCTION manifest_open_update();

INSERT INTO manifest_open (chunk_id, world_id, run_id, source_id, job_id, state, book_number, chunk_number,
        last_error_code, last_error_message)
SELECT chunk_id, world_id, run_id, source_id, job_id, state, book_number, chunk_number, last_error_code,
    last_error_message
FROM manifest_entries WHERE state <> 'embedded';

-- The entry's indexes no longer name `state` or the lease. A source's listing and counts, and a
-- repair's walk of a run, read its entries by source or run and test the state on the row; a
-- job's entries (a deleted source's job left with none) are found by job.
DROP INDEX manifest_lease_owner;
DROP INDEX manifest_job_queue;
DROP INDEX manifest_world_state;
DROP INDEX manifest_source_state;
CREATE INDEX manifest_world_run ON manifest_entries (world_id, run_id);
CREATE INDEX manifest_source_run ON manifest_entries (source_id, run_id);
CREATE INDEX manifest_job ON manifest_entries (job_id);

-- Room on each page for the claims' and marks' new versions, so that they stay on the page (HOT).
-- A load claims and marks every entry of a page within moments, each version larger than the last
-- (an entry of about 170 bytes, 180 with its lease, 230 marked with its text hash), and the
-- versions a statement replaces are not free until it commits (then the next access prunes them):
-- a page has room for its entries with their claimed versions, and then, the originals pruned,
-- for the marked ones beside the claimed, only when filled to about 40 % (at 50 %, 2 of
-- 64 claims already left the page, and a mark's version is larger still). The jobs' rows are
-- updated by every mark (its counts; a claim's `claimed_at` is indexed, for the claim order).
ALTER TABLE manifest_entries SET (fillfactor = 40);
ALTER TABLE jobs SET (fillfactor = 50);
