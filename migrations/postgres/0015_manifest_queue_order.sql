-- A claim takes the first pending entries of a job in reading order. The order lived only in
-- `chunks`, so every claim looked up and sorted all of the job's pending entries (1,000 for a
-- 1,000-chunk source). With the order kept on the entry and indexed after (job, state), a claim
-- reads its batch straight off the index. The (job, state) index becomes its prefix.
ALTER TABLE manifest_entries
    ADD COLUMN book_number BIGINT NOT NULL DEFAULT 0,
    ADD COLUMN chunk_number BIGINT NOT NULL DEFAULT 0;
-- No state changes here: the counts' trigger would only net every row out.
ALTER TABLE manifest_entries DISABLE TRIGGER manifest_counts_update;
UPDATE manifest_entries m SET book_number = c.book_number, chunk_number = c.chunk_number
FROM chunks c WHERE c.id = m.chunk_id;
ALTER TABLE manifest_entries ENABLE TRIGGER manifest_counts_update;
CREATE INDEX manifest_job_queue ON manifest_entries (job_id, state, book_number, chunk_number);
DROP INDEX manifest_job_state;
