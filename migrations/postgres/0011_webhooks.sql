-- Webhook subscriptions: a receiver URL told about job lifecycle events, for one world or for
-- all (`world_id` NULL). `events` lists the event types it wants, each between commas
-- (`,job.completed,job.failed,`). The signing secret is sealed with `security.master_key`, as
-- provider keys are.
CREATE TABLE webhooks (
    id              UUID PRIMARY KEY,
    world_id        UUID REFERENCES worlds (id) ON DELETE CASCADE,
    url             TEXT NOT NULL,
    events          TEXT NOT NULL,
    description     TEXT,
    secret_ciphertext BYTEA NOT NULL,
    secret_nonce    BYTEA NOT NULL,
    created_at      TIMESTAMPTZ NOT NULL
);

-- The outbox and the delivery log in one: a row per event per subscription, written by the
-- triggers below in the statement that changes the job, so no committed change can lack its
-- deliveries. Times are the database's clock in seconds since the epoch (`*_s`), as in the
-- replica registry. `payload` is fixed at the first attempt, so every retry sends the same body.
CREATE TABLE webhook_deliveries (
    id              BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    webhook_id      UUID NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event           TEXT NOT NULL,
    job_id          UUID NOT NULL,
    world_id        UUID NOT NULL,
    waiting_reason  TEXT,
    waiting_until   TIMESTAMPTZ,
    payload         TEXT,
    status          TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts        BIGINT NOT NULL DEFAULT 0,
    last_status_code BIGINT,
    last_error      TEXT,
    created_s       DOUBLE PRECISION NOT NULL,
    next_attempt_s  DOUBLE PRECISION NOT NULL,
    last_attempt_s  DOUBLE PRECISION,
    lease_owner     TEXT,
    lease_until_s   DOUBLE PRECISION
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_s) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, id);
CREATE INDEX webhook_deliveries_settled ON webhook_deliveries (created_s) WHERE status <> 'pending';

-- A job that ends: `job.completed`, `job.failed` or `job.cancelled`.
CREATE FUNCTION webhook_job_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_deliveries (webhook_id, event, job_id, world_id, created_s, next_attempt_s)
    SELECT w.id, 'job.' || NEW.status, NEW.id, NEW.world_id,
           EXTRACT(EPOCH FROM clock_timestamp()), EXTRACT(EPOCH FROM clock_timestamp())
    FROM webhooks w
    WHERE (w.world_id IS NULL OR w.world_id = NEW.world_id)
      AND strpos(w.events, ',job.' || NEW.status || ',') > 0;
    RETURN NULL;
END
$$;

CREATE TRIGGER webhook_job_ended AFTER UPDATE OF status ON jobs
    FOR EACH ROW
    WHEN (NEW.status <> OLD.status AND NEW.status IN ('completed', 'failed', 'cancelled'))
    EXECUTE FUNCTION webhook_job_ended();

-- A running job that starts waiting (or waits for another reason), for a minute or more or for
-- as long as nobody knows: `job.waiting`. Shorter waits (a per-minute quota's next window) are
-- part of a job's normal pace and are not announced.
CREATE FUNCTION webhook_job_waiting() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.waiting_until IS NOT NULL AND NEW.waiting_until < clock_timestamp() + interval '60 seconds' THEN
        RETURN NULL;
    END IF;
    INSERT INTO webhook_deliveries (webhook_id, event, job_id, world_id, waiting_reason, waiting_until,
                                    created_s, next_attempt_s)
    SELECT w.id, 'job.waiting', NEW.id, NEW.world_id, NEW.waiting_reason, NEW.waiting_until,
           EXTRACT(EPOCH FROM clock_timestamp()), EXTRACT(EPOCH FROM clock_timestamp())
    FROM webhooks w
    WHERE (w.world_id IS NULL OR w.world_id = NEW.world_id)
      AND strpos(w.events, ',job.waiting,') > 0;
    RETURN NULL;
END
$$;

CREATE TRIGGER webhook_job_waiting AFTER UPDATE OF waiting_reason ON jobs
    FOR EACH ROW
    WHEN (NEW.status = 'running' AND NEW.waiting_reason IS NOT NULL
          AND NEW.waiting_reason IS DISTINCT FROM OLD.waiting_reason)
    EXECUTE FUNCTION webhook_job_waiting();
