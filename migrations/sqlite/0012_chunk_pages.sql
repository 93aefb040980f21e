-- The page (1-based) a chunk of a PDF starts on; NULL for every other format. Chunks, results
-- and citations carry it as `page`.
ALTER TABLE chunks ADD COLUMN page BIGINT;
