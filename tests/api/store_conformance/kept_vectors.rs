//! Kept vectors: each entry marked embedded keeps the vector it was marked with, exactly, and
//! repair reads back only what still describes the chunk (embedded, the same text).

use std::sync::Arc;

use chrono::{SubsecRound, Utc};
use quarry::domain::{ChunkId, EmbeddedVector, RunId, WorldId};
use quarry::store::Store;

use super::{add_source, claim, complete, new_world, vectors_of};

conformance!(vectors_are_kept_with_the_embedded_mark_and_read_back_exactly);
async fn vectors_are_kept_with_the_embedded_mark_and_read_back_exactly(store: Arc<dyn Store>) {
    let world = store.create_world(new_world("w")).await.unwrap();
    let run = world.active_run;
    let (source, job) = add_source(&store, world.id, 4).await;
    let items = claim(&store, "a", 10).await;
    assert_eq!(items.len(), 4);
    let chunks: Vec<ChunkId> = items.iter().map(|i| i.chunk_id).collect();
    assert!(
        store.kept_points(world.id, run, &chunks).await.unwrap().is_empty(),
        "nothing is kept before the mark"
    );

    // A refused completion (another owner's) keeps nothing.
    let done = vectors_of(&items[..2]);
    assert_eq!(
        store
            .complete_work("b", job.id, run, &done, 0, Utc::now())
            .await
            .unwrap(),
        0
    );
    assert!(store.kept_points(world.id, run, &chunks).await.unwrap().is_empty());

    // Marked: the vectors come back bit for bit, with what their points carry.
    assert_eq!(complete(&store, "a", &items[..3]).await, 3);
    let mut kept = store.kept_points(world.id, run, &chunks).await.unwrap();
    kept.sort_by_key(|k| k.chunk_number);
    assert_eq!(kept.len(), 3, "the entry still pending has no kept vector");
    let sent = vectors_of(&items[..3]);
    for ((k, item), e) in kept.iter().zip(&items).zip(&sent) {
        assert_eq!(k.chunk_id, item.chunk_id);
        assert_eq!(k.point_id, item.point_id);
        assert_eq!(k.source_id, source.id);
        assert_eq!((k.book_number, k.chunk_number), (item.book_number, item.chunk_number));
        assert_eq!(k.token_count, item.token_count);
        assert_eq!(k.text_sha256, item.text_sha256);
        assert_eq!(k.chunk_text, item.chunk_text);
        assert_eq!(k.dense.len(), 384);
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert_eq!(bits(&k.dense), bits(&e.dense));
    }

    // Only the given chunks, of that world and run.
    let one = store.kept_points(world.id, run, &chunks[1..2]).await.unwrap();
    assert_eq!(one.len(), 1);
    assert_eq!(one[0].chunk_id, chunks[1]);
    assert!(
        store
            .kept_points(WorldId::new(), run, &chunks)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        store
            .kept_points(world.id, RunId::new(), &chunks)
            .await
            .unwrap()
            .is_empty()
    );
    assert!(store.kept_points(world.id, run, &[]).await.unwrap().is_empty());

    // Requeued: not embedded any more, so nothing to restore from; embedded again, the new
    // vector replaces the old one.
    let now = Utc::now().trunc_subsecs(6);
    store
        .requeue_entries(world.id, run, &chunks[..1], "point_missing", None, now)
        .await
        .unwrap()
        .expect("requeued");
    let kept = store.kept_points(world.id, run, &chunks).await.unwrap();
    assert_eq!(kept.len(), 2);
    assert!(kept.iter().all(|k| k.chunk_id != chunks[0]));
    let again = claim(&store, "c", 10).await;
    let first: Vec<_> = again.iter().filter(|i| i.chunk_id == chunks[0]).cloned().collect();
    assert_eq!(first.len(), 1, "{again:?}");
    let fresh = vec![EmbeddedVector {
        chunk_id: chunks[0],
        text_sha256: first[0].text_sha256.clone(),
        dense: vec![-0.25; 384],
    }];
    assert_eq!(
        store
            .complete_work("c", first[0].job_id, run, &fresh, 0, Utc::now())
            .await
            .unwrap(),
        1
    );
    let kept = store.kept_points(world.id, run, &chunks[..1]).await.unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].dense, vec![-0.25; 384]);

    // Many chunks at once (several statements of a hundred) come back whole.
    let (_, _) = add_source(&store, world.id, 250).await;
    let many = claim(&store, "d", 1000).await;
    assert_eq!(many.len(), 250);
    assert_eq!(complete(&store, "d", &many).await, 250);
    let all: Vec<ChunkId> = many.iter().map(|i| i.chunk_id).chain(chunks.iter().copied()).collect();
    assert_eq!(
        store.kept_points(world.id, run, &all).await.unwrap().len(),
        253,
        "all but the first source's last chunk, still leased to `a`"
    );

    // Deleting the source takes its kept vectors with its chunks.
    store
        .delete_source(world.id, source.id, None, now)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(store.kept_points(world.id, run, &all).await.unwrap().len(), 250);
}

conformance!(a_vector_made_from_other_text_is_not_read_back);
async fn a_vector_made_from_other_text_is_not_read_back(store: Arc<dyn Store>) {
    let world = store.create_world(new_world("w")).await.unwrap();
    let run = world.active_run;
    let (_, job) = add_source(&store, world.id, 2).await;
    let items = claim(&store, "a", 10).await;
    // The worker embedded a text other than the chunk's (the chunk changed meanwhile): its
    // entry is marked with that text's hash, and its vector is not the chunk's.
    let mut done = vectors_of(&items);
    done[1].text_sha256 = "f".repeat(64);
    assert_eq!(
        store
            .complete_work("a", job.id, run, &done, 0, Utc::now())
            .await
            .unwrap(),
        2
    );
    let chunks: Vec<ChunkId> = items.iter().map(|i| i.chunk_id).collect();
    let kept = store.kept_points(world.id, run, &chunks).await.unwrap();
    assert_eq!(kept.len(), 1);
    assert_eq!(kept[0].chunk_id, items[0].chunk_id);
}
