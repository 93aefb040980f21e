//! `Idempotency-Key` reservations: one request holds a key; the same request again finds it in
//! progress and then its answer, another request finds a mismatch; a failed request's key is
//! free again; answers expire, reservations never answered are dropped, each world keeps a
//! bounded number and its own keys.

use std::sync::Arc;

use quarry::store::{Idempotent, Store};

use super::new_world;

const DAY: f64 = 86_400.0;

conformance!(a_key_holds_one_request_and_then_its_answer);
async fn a_key_holds_one_request_and_then_its_answer(store: Arc<dyn Store>) {
    let world = store.create_world(new_world("w")).await.unwrap().id;
    let other = store.create_world(new_world("other")).await.unwrap().id;
    let reserve = |world, key: &'static str, fingerprint: &'static str| {
        let store = store.clone();
        async move {
            store
                .reserve_idempotency(world, key, fingerprint, DAY, 600.0, 100)
                .await
                .unwrap()
        }
    };
    assert_eq!(reserve(world, "k1", "body-a").await, Idempotent::Reserved);
    assert_eq!(reserve(world, "k1", "body-a").await, Idempotent::InProgress);
    assert_eq!(reserve(world, "k1", "body-b").await, Idempotent::Mismatch);
    // Another world has its own keys.
    assert_eq!(reserve(other, "k1", "body-b").await, Idempotent::Reserved);

    store
        .record_idempotency(world, "k1", 202, r#"{"source":{"id":"s"}}"#)
        .await
        .unwrap();
    assert_eq!(
        reserve(world, "k1", "body-a").await,
        Idempotent::Done {
            status: 202,
            response: r#"{"source":{"id":"s"}}"#.into()
        }
    );
    assert_eq!(reserve(world, "k1", "body-b").await, Idempotent::Mismatch);
    // A recorded answer is not released (only a reservation is).
    store.release_idempotency(world, "k1").await.unwrap();
    assert!(matches!(reserve(world, "k1", "body-a").await, Idempotent::Done { .. }));

    // A failed request lets its key go: the retry, even a corrected one, runs.
    assert_eq!(reserve(world, "k2", "bad body").await, Idempotent::Reserved);
    store.release_idempotency(world, "k2").await.unwrap();
    assert_eq!(reserve(world, "k2", "good body").await, Idempotent::Reserved);

    // Deleting the world forgets its keys.
    store.delete_world(other).await.unwrap();
}

conformance!(keys_expire_and_are_bounded_per_world);
async fn keys_expire_and_are_bounded_per_world(store: Arc<dyn Store>) {
    let world = store.create_world(new_world("w")).await.unwrap().id;
    // Kept for no time: the next look finds it expired, and the key is free.
    assert_eq!(
        store
            .reserve_idempotency(world, "short", "a", 0.0, 600.0, 100)
            .await
            .unwrap(),
        Idempotent::Reserved
    );
    store.record_idempotency(world, "short", 202, "{}").await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert_eq!(
        store
            .reserve_idempotency(world, "short", "b", DAY, 600.0, 100)
            .await
            .unwrap(),
        Idempotent::Reserved
    );
    // A reservation never answered (its process died) is dropped once abandoned.
    assert_eq!(
        store
            .reserve_idempotency(world, "stuck", "a", DAY, 600.0, 100)
            .await
            .unwrap(),
        Idempotent::Reserved
    );
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    assert_eq!(
        store
            .reserve_idempotency(world, "stuck", "a", DAY, 0.0, 100)
            .await
            .unwrap(),
        Idempotent::Reserved
    );

    // At most three keys: the oldest are forgotten as new ones come.
    let bounded = store.create_world(new_world("bounded")).await.unwrap().id;
    for key in ["a", "b", "c", "d", "e"] {
        assert_eq!(
            store
                .reserve_idempotency(bounded, key, "x", DAY, 600.0, 3)
                .await
                .unwrap(),
            Idempotent::Reserved
        );
        store.record_idempotency(bounded, key, 202, key).await.unwrap();
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    // (The kept ones are looked at first: a look at a forgotten key reserves it anew.)
    for (key, kept) in [("c", true), ("d", true), ("e", true), ("a", false), ("b", false)] {
        let found = store
            .reserve_idempotency(bounded, key, "x", DAY, 600.0, 3)
            .await
            .unwrap();
        assert_eq!(matches!(found, Idempotent::Done { .. }), kept, "{key}: {found:?}");
        if !kept {
            store.release_idempotency(bounded, key).await.unwrap();
        }
    }
}
