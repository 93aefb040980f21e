-- A claim takes the first pending entries of a job in reading order. The order lived only in
-- `chunks`, so every claim looked up and sorted all of the job's pending entries: 1,000 random
-- lookups for a 1,000-chunk source, under the database's write lock, which made it the
-- bottleneck of a large load (about 250 chunks/s by a million chunks in one world). With the
-- order kept on the entry and indexed after (job, state), a claim reads its batch straight off
-- the index. The (job, state) index becomes its prefix.
ALTER TABLE manifest_entries ADD COLUMN book_number INTEGER NOT NULL DEFAULT 0;
ALTER TABLE manifest_entries ADD COLUMN chunk_number INTEGER NOT NULL DEFAULT 0;
UPDATE manifest_entries SET
    book_number = (SELECT c.book_number FROM chunks c WHERE c.id = manifest_entries.chunk_id),
    chunk_number = (SELECT c.chunk_number FROM chunks c WHERE c.id = manifest_entries.chunk_id);
CREATE INDEX manifest_job_queue ON manifest_entries (job_id, state, book_number, chunk_number);
DROP INDEX manifest_job_state;
