//! Typed identifiers. Every id is a UUID on the wire and in the stores; the newtypes keep a
//! world id from being passed where a source id is expected.

use std::fmt;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident) => {
        $(#[$meta])*
        #[derive(
            Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, sqlx::Type,
        )]
        #[serde(transparent)]
        #[sqlx(transparent)]
        pub struct $name(pub Uuid);

        impl $name {
            /// A fresh random (v4) id.
            pub fn new() -> Self {
                Self(Uuid::new_v4())
            }
        }

        impl Default for $name {
            fn default() -> Self {
                Self::new()
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl From<Uuid> for $name {
            fn from(id: Uuid) -> Self {
                Self(id)
            }
        }
    };
}

id_type!(
    /// A world: one isolated corpus with one locked embedding profile.
    WorldId
);
id_type!(
    /// A source document ("book") inside a world.
    SourceId
);
id_type!(
    /// One generation of a world's chunks and vectors (see `docs/DESIGN.md`, "Data model").
    RunId
);
id_type!(
    /// A chunk row: one slot of one source in one run.
    ChunkId
);
id_type!(
    /// A background job (ingest, reingest, repair).
    JobId
);
id_type!(
    /// A provider API key registered through the API or configuration.
    KeyId
);
id_type!(
    /// A webhook subscription.
    WebhookId
);
id_type!(
    /// An evaluation test set of a world.
    EvalSetId
);
id_type!(
    /// One evaluation run: a test set scored against a world under some retrieval settings.
    EvalRunId
);
id_type!(
    /// An API token managed through the API.
    TokenId
);

/// Namespace for point ids: UUIDv5 over the chunk slot.
const POINT_NAMESPACE: Uuid = Uuid::from_u128(0x6a0f_3c1e_9b5d_4f7a_8e21_5c4b_7d90_a1e3);

/// The `run_id` a staged version's points carry in their payload until the switch: derived
/// from the run, never a run of its own, so that every search (filtered by the active run)
/// passes over them with the run index it already has.
pub fn staged_run(run: RunId) -> RunId {
    let mut name = Vec::with_capacity(16 + 6);
    name.extend_from_slice(run.0.as_bytes());
    name.extend_from_slice(b"staged");
    RunId(Uuid::new_v5(&POINT_NAMESPACE, &name))
}

/// The Qdrant point id of a chunk slot: UUIDv5 of `(world, run, source, chunk_number)`.
///
/// Stable across text versions and retries within a run, distinct between runs, so a
/// re-ingest never overwrites the points that retrieval is still serving.
pub fn point_id(world: WorldId, run: RunId, source: SourceId, chunk_number: u32) -> Uuid {
    let mut name = Vec::with_capacity(16 * 3 + 4);
    name.extend_from_slice(world.0.as_bytes());
    name.extend_from_slice(run.0.as_bytes());
    name.extend_from_slice(source.0.as_bytes());
    name.extend_from_slice(&chunk_number.to_be_bytes());
    Uuid::new_v5(&POINT_NAMESPACE, &name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn point_ids_are_stable_per_slot_and_distinct_between_runs() {
        let (w, s) = (WorldId::new(), SourceId::new());
        let (r1, r2) = (RunId::new(), RunId::new());
        assert_eq!(point_id(w, r1, s, 3), point_id(w, r1, s, 3));
        assert_ne!(point_id(w, r1, s, 3), point_id(w, r2, s, 3));
        assert_ne!(point_id(w, r1, s, 3), point_id(w, r1, s, 4));
    }
}
