-- Living sources. A source may carry a caller's key (unique in its world) and has a version,
-- 1 at creation. A replace with new text is staged as a hidden source row (`replaces` names the
-- source it will become) whose chunks are embedded beside the serving ones; when the last is
-- embedded (its job is `staged_job`), one transaction moves them onto the source, deletes the old chunks and bumps the
-- version. Chunks carry the version of the text they were cut from, so that a retrieval never
-- joins neighbours of two versions.
--
-- A replace's job is stored with kind 'ingest' and `version_of` set to the source it versions
-- (the API calls it `replace`): SQLite cannot widen the CHECK on `jobs.kind` without rebuilding
-- the table, and both backends keep one schema.
ALTER TABLE sources ADD COLUMN source_key TEXT;
ALTER TABLE sources ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
ALTER TABLE sources ADD COLUMN updated_at TIMESTAMPTZ;
ALTER TABLE sources ADD COLUMN replaces UUID REFERENCES sources (id) ON DELETE CASCADE;
ALTER TABLE sources ADD COLUMN staged_job UUID;
CREATE UNIQUE INDEX sources_key ON sources (world_id, source_key) WHERE source_key IS NOT NULL;
CREATE UNIQUE INDEX sources_pending ON sources (replaces) WHERE replaces IS NOT NULL;
ALTER TABLE chunks ADD COLUMN version BIGINT NOT NULL DEFAULT 1;
ALTER TABLE jobs ADD COLUMN version_of UUID;
