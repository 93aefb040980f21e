//! BM25 sparse vectors, computed by quarry itself so both vector backends score alike: the
//! same tokenisation (English, lowercase, stop words, Snowball stemmer, murmur3 term ids —
//! Qdrant's own BM25 pipeline, as shipped in `qdrant-edge`) for documents at ingestion and
//! for queries at retrieval. The IDF part comes from the collection's `Idf` modifier.

use std::sync::OnceLock;

use qdrant_edge::bm25_embed::{EdgeBm25, EdgeBm25Config};

use crate::vector::SparseVector;

fn model() -> Option<&'static EdgeBm25> {
    static MODEL: OnceLock<Option<EdgeBm25>> = OnceLock::new();
    MODEL
        .get_or_init(|| match EdgeBm25::new(EdgeBm25Config::default()) {
            Ok(model) => Some(model),
            Err(err) => {
                tracing::error!(error = %err, "the BM25 tokenizer cannot be built; hybrid vectors will be empty");
                None
            }
        })
        .as_ref()
}

/// Term weights of a chunk (BM25 term frequency part).
pub fn document(text: &str) -> SparseVector {
    model().map_or_else(SparseVector::default, |m| {
        let v = m.embed_document(text);
        SparseVector {
            indices: v.indices,
            values: v.values,
        }
    })
}

/// Terms of a query (weight 1 each; the IDF modifier weighs them).
pub fn query(text: &str) -> SparseVector {
    model().map_or_else(SparseVector::default, |m| {
        let v = m.embed_query(text);
        SparseVector {
            indices: v.indices,
            values: v.values,
        }
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn documents_and_queries_share_term_ids() {
        let doc = super::document("The dragons guarded the castle");
        let query = super::query("dragon");
        assert!(!doc.indices.is_empty());
        assert_eq!(query.indices.len(), 1);
        assert!(
            doc.indices.contains(&query.indices[0]),
            "stemming maps dragons and dragon to one term"
        );
    }
}
