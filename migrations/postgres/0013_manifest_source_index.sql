-- One source's entries of one run: its counts (GET …/sources/{id}) and the total of its chunk
-- listing are counted from this index alone, instead of walking the whole world's entries.
CREATE INDEX manifest_source_state ON manifest_entries (source_id, run_id, state);
