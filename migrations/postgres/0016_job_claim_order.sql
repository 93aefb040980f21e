-- A claim takes the running job claimed least recently that has something to claim. Without an
-- index in that order it tested every running job for claimable entries and then sorted them;
-- with it, the claim walks the running jobs in order and stops at the first that has work.
CREATE INDEX jobs_claim_order ON jobs (claimed_at NULLS FIRST, created_at, id) WHERE status = 'running';
