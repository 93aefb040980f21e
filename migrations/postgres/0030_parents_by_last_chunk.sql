-- A chunk's parent is the one whose range [first_chunk, last_chunk] holds it. Parents partition
-- their source's chunks in order, so it is the first parent of the source, by last chunk, whose
-- last chunk is at or past it: one seek in this index and one row, where the primary key (by
-- parent number) made retrieval walk every parent of the source before it, for each hit.
CREATE INDEX parents_by_last_chunk ON parents (run_id, source_id, last_chunk);
