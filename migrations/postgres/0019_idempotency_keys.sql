-- Idempotency keys of source writes (`Idempotency-Key`): the first request with a key in a
-- world reserves it (`status` NULL while it runs) with a fingerprint of what it asked; its
-- answer is kept, so a retry with the same key and request gets that answer again and one with
-- another request is refused. Times are the database's clock in seconds since the epoch; rows
-- expire (`expires_s`) and each world keeps a bounded number (the store evicts the oldest).
CREATE TABLE idempotency_keys (
    world_id    UUID NOT NULL REFERENCES worlds (id) ON DELETE CASCADE,
    idem_key    TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    status      BIGINT,
    response    TEXT,
    created_s   DOUBLE PRECISION NOT NULL,
    expires_s   DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (world_id, idem_key)
);
CREATE INDEX idempotency_keys_age ON idempotency_keys (world_id, created_s);
