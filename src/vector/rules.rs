//! Rules both vector backends follow, written once: whether an existing collection can hold a
//! profile's points, and answers that follow the order of the ids asked for.

use std::collections::HashMap;

use uuid::Uuid;

use super::{CollectionSpec, DENSE, PointRecord, SPARSE};

/// A collection's vectors as a backend reports them.
#[derive(Clone, Debug, PartialEq)]
pub struct Shape {
    /// The named dense vector `dense`, if there is one.
    pub dense: Option<DenseShape>,
    /// The named sparse vector `sparse`, if there is one: whether it has the IDF modifier.
    pub sparse_idf: Option<bool>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct DenseShape {
    pub size: u64,
    /// The distance's name as the backend spells it (`Cosine`, `Dot`, …).
    pub distance: String,
}

impl DenseShape {
    fn is_cosine(&self) -> bool {
        self.distance.eq_ignore_ascii_case("cosine")
    }
}

/// Why a collection of `shape` cannot hold the points of `spec`, if it cannot: the dense vector
/// must have the profile's dimensions and cosine distance, and the sparse vector (with IDF)
/// must be there exactly when the profile is hybrid.
pub fn incompatibility(shape: &Shape, spec: &CollectionSpec) -> Option<String> {
    match &shape.dense {
        None => return Some(format!("it has no named dense vector `{DENSE}`")),
        Some(dense) if dense.size != u64::from(spec.dimensions) => {
            return Some(format!(
                "dense vector `{DENSE}` has {} dimensions, wanted {}",
                dense.size, spec.dimensions
            ));
        }
        Some(dense) if !dense.is_cosine() => {
            return Some(format!(
                "dense vector `{DENSE}` uses {} distance, wanted Cosine",
                dense.distance
            ));
        }
        Some(_) => {}
    }
    match (shape.sparse_idf, spec.sparse) {
        (None, true) => Some(format!("it has no sparse vector `{SPARSE}`")),
        (Some(_), false) => Some(format!("it has a sparse vector `{SPARSE}`, wanted dense only")),
        (Some(false), true) => Some(format!("sparse vector `{SPARSE}` lacks the IDF modifier")),
        (Some(true), true) | (None, false) => None,
    }
}

/// `records` in the order of `ids`, each once (an id asked for twice is listed once; one the
/// backend did not find is left out). Neither backend promises the request's order.
pub fn in_request_order(ids: &[Uuid], records: impl IntoIterator<Item = PointRecord>) -> Vec<PointRecord> {
    let mut by_id: HashMap<Uuid, PointRecord> = records.into_iter().map(|r| (r.id, r)).collect();
    ids.iter().filter_map(|id| by_id.remove(id)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(sparse: bool) -> CollectionSpec {
        CollectionSpec {
            name: "c".into(),
            dimensions: 384,
            sparse,
        }
    }

    fn shape(size: u64, distance: &str, sparse_idf: Option<bool>) -> Shape {
        Shape {
            dense: Some(DenseShape {
                size,
                distance: distance.into(),
            }),
            sparse_idf,
        }
    }

    #[test]
    fn a_collection_must_match_the_profile() {
        assert_eq!(incompatibility(&shape(384, "Cosine", None), &spec(false)), None);
        assert_eq!(incompatibility(&shape(384, "Cosine", Some(true)), &spec(true)), None);
        let reason = |s: &Shape, sparse| incompatibility(s, &spec(sparse)).unwrap();
        assert!(reason(&shape(768, "Cosine", None), false).contains("768 dimensions, wanted 384"));
        assert!(reason(&shape(384, "Dot", None), false).contains("uses Dot distance"));
        assert!(reason(&shape(384, "Cosine", None), true).contains("no sparse vector"));
        assert!(reason(&shape(384, "Cosine", Some(true)), false).contains("wanted dense only"));
        assert!(reason(&shape(384, "Cosine", Some(false)), true).contains("IDF"));
        let none = Shape {
            dense: None,
            sparse_idf: None,
        };
        assert!(reason(&none, false).contains("no named dense vector"));
    }
}
