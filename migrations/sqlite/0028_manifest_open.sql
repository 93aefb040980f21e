-- The entries still to do, pending or failed, under the name PostgreSQL keeps them by (its
-- migration 0028 moves them into a table of their own so that claims and marks are HOT updates
-- there). Here a view: every lookup through it is a lookup of `manifest_entries` by the same
-- indexes as before, since SQLite rewrites an index entry only for the columns an update changes.
CREATE VIEW manifest_open AS
SELECT chunk_id, world_id, run_id, source_id, job_id, state, book_number, chunk_number, last_error_code,
    last_error_message
FROM manifest_entries WHERE state <> 'embedded';
