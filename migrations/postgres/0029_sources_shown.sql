-- SQLite's migration 0029 gives the columns retrieval shows of a source an index of their own,
-- so that reading them does not walk the overflow pages of the document's text. PostgreSQL keeps
-- long texts out of line (TOAST) already: its source rows are short, and nothing changes here.
SELECT 1;
