-- Why a running job is not moving, when the workers know: every key of its provider is cooling
-- down (a rate limit or a spent daily quota), no key is left, its provider is out of reach, or
-- the vector store is. Set when work is given back for that reason, with the time it should be
-- tried again (none when nobody knows); cleared when the job next gets a chunk embedded.
ALTER TABLE jobs ADD COLUMN waiting_reason TEXT;
ALTER TABLE jobs ADD COLUMN waiting_until TEXT;
