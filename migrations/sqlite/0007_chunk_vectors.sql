-- The vector each embedded chunk was given, kept by the authority so that a lost point or a lost
-- collection is written again from here, with no provider call (repair). One row per chunk,
-- written in the transaction that marks its entry embedded, replaced when it is embedded again,
-- and gone with its chunk. Beside the manifest rather than in it, so the claim, chunk listings and
-- retrieval's verification never read past the bytes.
--
-- `dense` is the vector as written to the vector store: little-endian IEEE 754 f32, four bytes per
-- dimension. `text_sha256` is the hash of the text it was made from: repair uses it only while the
-- chunk still has that text. BM25 terms are not kept: quarry computes them from the chunk's text
-- (no provider), the same way every time. Chunks embedded before this migration have no row;
-- repair embeds those again when their points are lost.
CREATE TABLE chunk_vectors (
    chunk_id        BLOB PRIMARY KEY NOT NULL REFERENCES chunks (id) ON DELETE CASCADE,
    text_sha256     TEXT NOT NULL,
    dense           BLOB NOT NULL
);
