-- Parents are now the sections of a source (cut at its headings, whatever the format), no longer
-- runs cut only at Markdown headings once half full. The old ones are dropped; the startup pass
-- (and retrieval, for the sources of its hits) builds the new ones from the stored text and
-- chunks, without a provider call.
DELETE FROM parents;
