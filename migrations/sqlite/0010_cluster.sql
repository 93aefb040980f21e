-- The replicas (quarry processes) working on this store: each writes its row at startup and
-- every `cluster.heartbeat_s`, with the database's clock (`heartbeat_s`, seconds since the
-- epoch), so replicas on machines whose clocks disagree still agree on who is alive. A row not
-- renewed within `cluster.dead_after_s` belongs to a dead replica: the first replica to see it
-- deletes it and gives its claimed work back.
CREATE TABLE replicas (
    id TEXT PRIMARY KEY,
    address TEXT NOT NULL,
    version TEXT NOT NULL,
    started_at TEXT NOT NULL,
    heartbeat_s REAL NOT NULL,
    workers INTEGER NOT NULL,
    in_flight INTEGER NOT NULL
);

-- The provider budgets replicas share (a quota group's or a key's requests or tokens per
-- minute), each a sliding window: at most its capacity drawn in any span. `budgets` has one row
-- per budget, locked while a draw decides; `budget_draws` holds the draws still in the window
-- (`at_s`, the database's clock; a draw larger than the capacity is recorded as pieces one span
-- apart, the later ones ahead of now). Queries may go over the capacity; ingestion on every
-- replica then waits until the window has room again.
CREATE TABLE budgets (
    budget TEXT PRIMARY KEY
);

CREATE TABLE budget_draws (
    budget TEXT NOT NULL,
    at_s REAL NOT NULL,
    amount REAL NOT NULL
);

CREATE INDEX budget_draws_by_budget ON budget_draws (budget, at_s);

-- Units of a per-day budget spent per provider day (`day` is the date the provider's daily
-- quota resets on, e.g. Pacific time for Google).
CREATE TABLE budget_days (
    budget TEXT NOT NULL,
    day TEXT NOT NULL,
    used REAL NOT NULL,
    PRIMARY KEY (budget, day)
);
