//! How the store keeps a chunk's dense vector (`chunk_vectors.dense`): little-endian IEEE 754
//! f32, four bytes per dimension, nothing else — the length gives the dimensions, and the same
//! bytes read the same on every machine. Written with the entry's embedded mark
//! ([`super::WorkStore::complete_work`], and repair's adoption of a pending entry whose point
//! stands, [`super::RepairStore::adopt_entries`]), read back by repair
//! ([`super::RepairStore::kept_points`]).

use sqlx::{QueryBuilder, Transaction};

use super::Result;
use super::backend::Backend;
use crate::domain::EmbeddedVector;

/// Kept vectors written per statement (three parameters each; a claim is 32).
const VECTORS_PER_STATEMENT: usize = 64;

/// Keeps the vectors of entries the transaction `tx` has just marked embedded (replacing one
/// kept before): a kept vector always belongs to a mark. No chunk may come twice.
pub(super) async fn keep<DB: Backend>(tx: &mut Transaction<'_, DB>, marked: &[&EmbeddedVector]) -> Result<()> {
    for batch in marked.chunks(VECTORS_PER_STATEMENT) {
        let mut insert = QueryBuilder::<DB>::new("INSERT INTO chunk_vectors (chunk_id, text_sha256, dense) ");
        insert.push_values(batch, |mut row, embedded| {
            row.push_bind(embedded.chunk_id.0)
                .push_bind(&embedded.text_sha256)
                .push_bind(encode(&embedded.dense));
        });
        insert.push(" ON CONFLICT (chunk_id) DO UPDATE SET text_sha256 = excluded.text_sha256, dense = excluded.dense");
        insert.build().execute(&mut **tx).await?;
    }
    Ok(())
}

/// The bytes kept for `dense`.
pub(super) fn encode(dense: &[f32]) -> Vec<u8> {
    let mut bytes = Vec::with_capacity(dense.len() * 4);
    for x in dense {
        bytes.extend_from_slice(&x.to_le_bytes());
    }
    bytes
}

/// The vector kept as `bytes`; `None` when they are not a whole number of f32s.
pub(super) fn decode(bytes: &[u8]) -> Option<Vec<f32>> {
    let (chunks, rest) = bytes.as_chunks::<4>();
    rest.is_empty()
        .then(|| chunks.iter().map(|b| f32::from_le_bytes(*b)).collect())
}

#[cfg(test)]
mod tests {
    use super::{decode, encode};

    #[test]
    fn vectors_round_trip_exactly_at_four_bytes_a_dimension() {
        let dense = vec![0.0, -0.0, 1.0, -1.5, f32::MIN_POSITIVE, f32::MAX, 0.123_456_79];
        let bytes = encode(&dense);
        assert_eq!(bytes.len(), 4 * dense.len());
        let back = decode(&bytes).unwrap();
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&back), bits(&dense));
    }

    #[test]
    fn the_layout_is_little_endian_f32() {
        assert_eq!(encode(&[1.0]), [0x00, 0x00, 0x80, 0x3f]);
        assert_eq!(decode(&[0x00, 0x00, 0x80, 0x3f]), Some(vec![1.0]));
    }

    #[test]
    fn bytes_that_are_not_whole_floats_do_not_decode() {
        assert_eq!(decode(&[0, 0, 128]), None);
        assert_eq!(decode(&[]), Some(Vec::new()));
    }
}
