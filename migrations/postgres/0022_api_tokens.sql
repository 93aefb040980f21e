-- API tokens managed through the API (`/v1/tokens`): a name, scopes (`read,ingest`), the
-- worlds the token may touch (a JSON array of world ids; NULL: every world), an optional expiry.
-- Only the SHA-256 digest of the secret is kept; during a rotation's grace period the previous
-- secret's digest is accepted until `previous_until`. `rate_per_minute` bounds the requests a
-- minute the token may make on each replica (NULL: no bound of its own).
CREATE TABLE api_tokens (
    id              UUID PRIMARY KEY,
    name            TEXT NOT NULL,
    scopes          TEXT NOT NULL,
    worlds          TEXT,
    secret_sha256   BYTEA NOT NULL,
    previous_sha256 BYTEA,
    previous_until  TIMESTAMPTZ,
    created_at      TIMESTAMPTZ NOT NULL,
    expires_at      TIMESTAMPTZ,
    last_used_at    TIMESTAMPTZ,
    rate_per_minute BIGINT
);
