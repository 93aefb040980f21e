-- A contextual prefix (issue 40): a world, and each of its runs, may embed every chunk with its
-- source's title and section path before the chunk's text. The prefix a chunk was embedded
-- with is kept beside it (the stored text is unchanged), with its token count, so a worker can
-- send exactly that text and count it against the quota. Existing worlds and chunks have none.
ALTER TABLE worlds ADD COLUMN context_prefix BOOLEAN NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN context_prefix BOOLEAN NOT NULL DEFAULT 0;
ALTER TABLE chunks ADD COLUMN embed_prefix TEXT NOT NULL DEFAULT '';
ALTER TABLE chunks ADD COLUMN embed_prefix_tokens INTEGER NOT NULL DEFAULT 0;
