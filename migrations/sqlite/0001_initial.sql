-- quarry data model, SQLite. The relational store is the authority; Qdrant only indexes it.

-- A world: one isolated corpus, locked to one embedding profile.
CREATE TABLE worlds (
    id              BLOB PRIMARY KEY NOT NULL,
    name            TEXT NOT NULL,
    provider        TEXT NOT NULL,
    model           TEXT NOT NULL,
    dimensions      INTEGER NOT NULL CHECK (dimensions > 0),
    distance        TEXT NOT NULL DEFAULT 'cosine' CHECK (distance = 'cosine'),
    max_tokens      INTEGER NOT NULL CHECK (max_tokens > 0),
    overlap_tokens  INTEGER NOT NULL CHECK (overlap_tokens >= 0),
    hybrid          BOOLEAN NOT NULL,
    -- The run retrieval serves. Not a foreign key: runs reference worlds, and the world row is
    -- written first in the same transaction.
    active_run_id   BLOB NOT NULL,
    collection      TEXT NOT NULL,
    -- Next book_number to hand out; bumped in the source-insert transaction.
    next_book_number INTEGER NOT NULL DEFAULT 1,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL
);

-- A generation of a world's chunks and vectors. A re-ingest builds a new run with its own
-- profile beside the active one and switches when it completes.
CREATE TABLE runs (
    id              BLOB PRIMARY KEY NOT NULL,
    world_id        BLOB NOT NULL REFERENCES worlds (id) ON DELETE CASCADE,
    provider        TEXT NOT NULL,
    model           TEXT NOT NULL,
    dimensions      INTEGER NOT NULL,
    max_tokens      INTEGER NOT NULL,
    overlap_tokens  INTEGER NOT NULL,
    collection      TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('building', 'active', 'retired')),
    created_at      TEXT NOT NULL
);
CREATE INDEX runs_world ON runs (world_id);

-- A source document ("book"). The full text stays here so a re-ingest needs no upload.
CREATE TABLE sources (
    id              BLOB PRIMARY KEY NOT NULL,
    world_id        BLOB NOT NULL REFERENCES worlds (id) ON DELETE CASCADE,
    book_number     INTEGER NOT NULL,
    filename        TEXT NOT NULL,
    content_type    TEXT NOT NULL,
    text            TEXT NOT NULL,
    sha256          TEXT NOT NULL,
    chars           INTEGER NOT NULL,
    created_at      TEXT NOT NULL,
    UNIQUE (world_id, book_number)
);

-- One chunk of one source in one run. Offsets count chars of the source text, end exclusive.
CREATE TABLE chunks (
    id              BLOB PRIMARY KEY NOT NULL,
    world_id        BLOB NOT NULL REFERENCES worlds (id) ON DELETE CASCADE,
    run_id          BLOB NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
    source_id       BLOB NOT NULL REFERENCES sources (id) ON DELETE CASCADE,
    book_number     INTEGER NOT NULL,
    chunk_number    INTEGER NOT NULL,
    char_start      INTEGER NOT NULL,
    char_end        INTEGER NOT NULL CHECK (char_end >= char_start),
    token_count     INTEGER NOT NULL,
    chunk_text      TEXT NOT NULL,
    overlap_text    TEXT NOT NULL,
    text_sha256     TEXT NOT NULL,
    UNIQUE (run_id, source_id, chunk_number)
);
CREATE INDEX chunks_world_run ON chunks (world_id, run_id);
CREATE INDEX chunks_text_hash ON chunks (text_sha256);

-- One manifest entry per chunk slot: what is known about its vector.
CREATE TABLE manifest_entries (
    chunk_id        BLOB PRIMARY KEY NOT NULL REFERENCES chunks (id) ON DELETE CASCADE,
    world_id        BLOB NOT NULL REFERENCES worlds (id) ON DELETE CASCADE,
    run_id          BLOB NOT NULL,
    source_id       BLOB NOT NULL,
    job_id          BLOB,
    point_id        BLOB NOT NULL,
    state           TEXT NOT NULL CHECK (state IN ('pending', 'embedded', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_error_code TEXT,
    last_error_message TEXT,
    warning_code    TEXT,
    -- Hash of the text whose vector is in Qdrant (set when embedded).
    embedded_text_sha256 TEXT,
    -- A worker's claim: who holds it and until when. Expired leases return to pending.
    lease_owner     TEXT,
    lease_expires_at TEXT,
    updated_at      TEXT NOT NULL
);
CREATE INDEX manifest_world_state ON manifest_entries (world_id, run_id, state);
CREATE INDEX manifest_job_state ON manifest_entries (job_id, state);

CREATE TABLE jobs (
    id              BLOB PRIMARY KEY NOT NULL,
    world_id        BLOB NOT NULL REFERENCES worlds (id) ON DELETE CASCADE,
    kind            TEXT NOT NULL CHECK (kind IN ('ingest', 'reingest', 'repair')),
    status          TEXT NOT NULL CHECK (status IN ('queued', 'running', 'paused', 'cancelled', 'completed', 'failed')),
    run_id          BLOB NOT NULL,
    total           INTEGER NOT NULL DEFAULT 0,
    embedded        INTEGER NOT NULL DEFAULT 0,
    failed          INTEGER NOT NULL DEFAULT 0,
    retries         INTEGER NOT NULL DEFAULT 0,
    rate_limited    INTEGER NOT NULL DEFAULT 0,
    reused          INTEGER NOT NULL DEFAULT 0,
    created_at      TEXT NOT NULL,
    started_at      TEXT,
    finished_at     TEXT,
    -- Last time a worker claimed entries of this job: claims rotate between jobs (and so
    -- between worlds) by taking the job claimed least recently.
    claimed_at      TEXT
);
CREATE INDEX jobs_world ON jobs (world_id, created_at);

-- Append-only job history, replayed over server-sent events from Last-Event-ID.
CREATE TABLE job_events (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    job_id          BLOB NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    kind            TEXT NOT NULL CHECK (kind IN ('progress', 'warning', 'error', 'status')),
    data            TEXT NOT NULL,
    created_at      TEXT NOT NULL
);
CREATE INDEX job_events_job ON job_events (job_id, id);

-- Provider API keys: added through the API (secret encrypted at rest) or mirrored from
-- configuration (no secret here) so that cooldowns and retirements persist for both.
CREATE TABLE provider_keys (
    id              BLOB PRIMARY KEY NOT NULL,
    provider        TEXT NOT NULL,
    label           TEXT NOT NULL,
    origin          TEXT NOT NULL CHECK (origin IN ('api', 'config')),
    quota_group     TEXT,
    secret_ciphertext BLOB,
    secret_nonce    BLOB,
    fingerprint     TEXT NOT NULL,
    enabled         BOOLEAN NOT NULL DEFAULT TRUE,
    retired         BOOLEAN NOT NULL DEFAULT FALSE,
    retired_reason  TEXT,
    cooldown_until  TEXT,
    consecutive_failures INTEGER NOT NULL DEFAULT 0,
    requests        INTEGER NOT NULL DEFAULT 0,
    rate_limited    INTEGER NOT NULL DEFAULT 0,
    failures        INTEGER NOT NULL DEFAULT 0,
    created_at      TEXT NOT NULL,
    updated_at      TEXT NOT NULL,
    UNIQUE (provider, fingerprint)
);

-- Cooldowns shared by every key of one quota group (keys of one Google project share quota).
CREATE TABLE quota_group_cooldowns (
    provider        TEXT NOT NULL,
    quota_group     TEXT NOT NULL,
    cooldown_until  TEXT NOT NULL,
    reason          TEXT,
    PRIMARY KEY (provider, quota_group)
);
