-- Every status a job takes, its first included, is recorded as a `status` event by the same
-- statement that sets it: an event stream that finds a job finished therefore also finds its
-- last status event, and no crash can leave one without the other. The application writes
-- no status events itself.
CREATE TRIGGER job_status_created AFTER INSERT ON jobs
BEGIN
    INSERT INTO job_events (job_id, kind, data, created_at)
    VALUES (NEW.id, 'status', '{"status":"' || NEW.status || '"}', NEW.created_at);
END;

CREATE TRIGGER job_status_changed AFTER UPDATE OF status ON jobs
WHEN NEW.status <> OLD.status
BEGIN
    INSERT INTO job_events (job_id, kind, data, created_at)
    VALUES (NEW.id, 'status', '{"status":"' || NEW.status || '"}', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
END;

-- One re-ingest at a time per world: the service checks first (to answer 409 with a reason),
-- and this index stops two requests that both passed the check from building two runs.
CREATE UNIQUE INDEX runs_one_building ON runs (world_id) WHERE status = 'building';
