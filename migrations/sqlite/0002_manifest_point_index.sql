-- Retrieval verifies every search hit by its point id: look entries up by it directly.
CREATE INDEX manifest_point ON manifest_entries (point_id);
