-- What a source says about itself, given at upload: a title, the URL it came from, and flat
-- metadata (a JSON object of string values, keys sorted, written by quarry). Sources stored
-- before this migration read back with no title or URL and metadata `{}`. Retrieval's metadata
-- filter is matched against the world's listed sources, not in SQL, so the column is plain text
-- on both backends (as `job_events.data` is).
ALTER TABLE sources ADD COLUMN title TEXT;
ALTER TABLE sources ADD COLUMN url TEXT;
ALTER TABLE sources ADD COLUMN metadata TEXT NOT NULL DEFAULT '{}';
