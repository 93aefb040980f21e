-- Every status a job takes, its first included, is recorded as a `status` event by the same
-- statement that sets it: an event stream that finds a job finished therefore also finds its
-- last status event, and no crash can leave one without the other. The application writes
-- no status events itself.
CREATE FUNCTION job_status_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.status <> OLD.status THEN
        INSERT INTO job_events (job_id, kind, data, created_at)
        VALUES (NEW.id, 'status', '{"status":"' || NEW.status || '"}', clock_timestamp());
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER job_status_event AFTER INSERT OR UPDATE OF status ON jobs
    FOR EACH ROW EXECUTE FUNCTION job_status_event();

-- One re-ingest at a time per world: the service checks first (to answer 409 with a reason),
-- and this index stops two requests that both passed the check from building two runs.
CREATE UNIQUE INDEX runs_one_building ON runs (world_id) WHERE status = 'building';
