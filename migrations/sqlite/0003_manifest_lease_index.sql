-- After a claim, a worker reads back what it holds by owner: look that up directly instead of
-- walking the whole manifest.
CREATE INDEX manifest_lease_owner ON manifest_entries (lease_owner);
