-- Gated re-ingests (`POST /v1/worlds/{world_id}/reingest` with `gate`). When the new run is
-- embedded, a test set is scored on it and on the run the world serves, and the world switches
-- only if the gate's metric did not drop by more than its tolerance. The two evaluation runs are
-- created with the re-ingest, `waiting` until the new run is embedded (then `queued`);
-- `target_run_id` names the index each measures (NULL: whatever the world serves), and
-- `gate_job_id` the re-ingest it decides.
--
-- `state`: `waiting` (the new run is being built), `evaluating`, `held` (the metric dropped, or
-- the evaluation could not finish: promote or discard decides), `passed`, `promoted`,
-- `discarded` (or the re-ingest ended otherwise: failed, cancelled). The job stays `running`
-- while held (the API shows it `held`), so sources added meanwhile are still cut into the new
-- run and embedded.
ALTER TABLE eval_runs ADD COLUMN target_run_id UUID;
ALTER TABLE eval_runs ADD COLUMN gate_job_id UUID;
CREATE TABLE reingest_gates (
    job_id        UUID PRIMARY KEY NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    world_id      UUID NOT NULL REFERENCES worlds (id) ON DELETE CASCADE,
    eval_id       UUID NOT NULL,
    metric        TEXT NOT NULL,
    tolerance     DOUBLE PRECISION NOT NULL,
    state         TEXT NOT NULL,
    before_run_id UUID NOT NULL,
    after_run_id  UUID NOT NULL,
    before_value  DOUBLE PRECISION,
    after_value   DOUBLE PRECISION,
    reason        TEXT,
    created_at    TIMESTAMPTZ NOT NULL,
    decided_at    TIMESTAMPTZ
);
CREATE INDEX reingest_gates_state ON reingest_gates (state);

-- A gate that holds its re-ingest: `job.held`, for the subscriptions of the job's world.
CREATE FUNCTION webhook_job_held() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO webhook_deliveries (webhook_id, event, job_id, world_id, created_s, next_attempt_s)
    SELECT w.id, 'job.held', NEW.job_id, NEW.world_id,
           EXTRACT(EPOCH FROM clock_timestamp()), EXTRACT(EPOCH FROM clock_timestamp())
    FROM webhooks w
    WHERE (w.world_id IS NULL OR w.world_id = NEW.world_id)
      AND strpos(w.events, ',job.held,') > 0;
    RETURN NULL;
END
$$;

CREATE TRIGGER webhook_job_held AFTER UPDATE OF state ON reingest_gates
    FOR EACH ROW
    WHEN (NEW.state = 'held' AND OLD.state <> 'held')
    EXECUTE FUNCTION webhook_job_held();
