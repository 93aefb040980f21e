-- Webhook subscriptions: a receiver URL told about job lifecycle events, for one world or for
-- all (`world_id` NULL). `events` lists the event types it wants, each between commas
-- (`,job.completed,job.failed,`). The signing secret is sealed with `security.master_key`, as
-- provider keys are.
CREATE TABLE webhooks (
    id              BLOB PRIMARY KEY NOT NULL,
    world_id        BLOB REFERENCES worlds (id) ON DELETE CASCADE,
    url             TEXT NOT NULL,
    events          TEXT NOT NULL,
    description     TEXT,
    secret_ciphertext BLOB NOT NULL,
    secret_nonce    BLOB NOT NULL,
    created_at      TEXT NOT NULL
);

-- The outbox and the delivery log in one: a row per event per subscription, written by the
-- triggers below in the statement that changes the job, so no committed change can lack its
-- deliveries. Times are the database's clock in seconds since the epoch (`*_s`), as in the
-- replica registry. `payload` is fixed at the first attempt, so every retry sends the same body.
CREATE TABLE webhook_deliveries (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    webhook_id      BLOB NOT NULL REFERENCES webhooks (id) ON DELETE CASCADE,
    event           TEXT NOT NULL,
    job_id          BLOB NOT NULL,
    world_id        BLOB NOT NULL,
    waiting_reason  TEXT,
    waiting_until   TEXT,
    payload         TEXT,
    status          TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts        INTEGER NOT NULL DEFAULT 0,
    last_status_code INTEGER,
    last_error      TEXT,
    created_s       REAL NOT NULL,
    next_attempt_s  REAL NOT NULL,
    last_attempt_s  REAL,
    lease_owner     TEXT,
    lease_until_s   REAL
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_s) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_by_webhook ON webhook_deliveries (webhook_id, id);
CREATE INDEX webhook_deliveries_settled ON webhook_deliveries (created_s) WHERE status <> 'pending';

-- A job that ends: `job.completed`, `job.failed` or `job.cancelled`.
CREATE TRIGGER webhook_job_ended AFTER UPDATE OF status ON jobs
WHEN NEW.status <> OLD.status AND NEW.status IN ('completed', 'failed', 'cancelled')
BEGIN
    INSERT INTO webhook_deliveries (webhook_id, event, job_id, world_id, created_s, next_attempt_s)
    SELECT w.id, 'job.' || NEW.status, NEW.id, NEW.world_id,
           (julianday('now') - 2440587.5) * 86400.0, (julianday('now') - 2440587.5) * 86400.0
    FROM webhooks w
    WHERE (w.world_id IS NULL OR w.world_id = NEW.world_id)
      AND instr(w.events, ',job.' || NEW.status || ',') > 0;
END;

-- A running job that starts waiting (or waits for another reason), for a minute or more or for
-- as long as nobody knows: `job.waiting`. Shorter waits (a per-minute quota's next window) are
-- part of a job's normal pace and are not announced.
CREATE TRIGGER webhook_job_waiting AFTER UPDATE OF waiting_reason ON jobs
WHEN NEW.status = 'running' AND NEW.waiting_reason IS NOT NULL
     AND NEW.waiting_reason IS NOT OLD.waiting_reason
     AND (NEW.waiting_until IS NULL OR julianday(NEW.waiting_until) >= julianday('now') + 60.0 / 86400.0)
BEGIN
    INSERT INTO webhook_deliveries (webhook_id, event, job_id, world_id, waiting_reason, waiting_until,
                                    created_s, next_attempt_s)
    SELECT w.id, 'job.waiting', NEW.id, NEW.world_id, NEW.waiting_reason, NEW.waiting_until,
           (julianday('now') - 2440587.5) * 86400.0, (julianday('now') - 2440587.5) * 86400.0
    FROM webhooks w
    WHERE (w.world_id IS NULL OR w.world_id = NEW.world_id)
      AND instr(w.events, ',job.waiting,') > 0;
END;
