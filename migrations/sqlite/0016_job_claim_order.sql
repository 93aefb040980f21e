-- A claim takes the running job claimed least recently that has something to claim. Without an
-- index in that order it tested every running job for claimable entries and then sorted them
-- (1,000 jobs for 1,000 uploads in flight: about 10 ms per claim, under the write lock); with
-- it, the claim walks the running jobs in order and stops at the first that has work.
-- (SQLite puts NULLs first in ascending order: never-claimed jobs come first, as the claim asks.)
CREATE INDEX jobs_claim_order ON jobs (claimed_at, created_at, id) WHERE status = 'running';
