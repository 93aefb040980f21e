-- The audit log (`GET /v1/audit`): administrative actions that succeeded — who (a managed
-- token's id and name, or `bootstrap`), what (`world.created`, `token.revoked`, ...), on what
-- (`target`, an id), from which address, when. `seq` orders and pages the listing; rows older
-- than `audit.keep_days` days are deleted by the hour.
CREATE TABLE audit_events (
    seq        BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at         TIMESTAMPTZ NOT NULL,
    action     TEXT NOT NULL,
    token_id   UUID,
    actor_name TEXT NOT NULL,
    target     TEXT,
    address    TEXT
);
CREATE INDEX audit_events_at ON audit_events (at);
