//! Worlds (created, read, listed, renamed, deleted with all they hold) and provider keys
//! (mirrored, counted per provider, cooled down, retired, re-enabled, deleted).

use std::sync::Arc;

use chrono::{SubsecRound, Utc};
use quarry::domain::{ProviderKind, World, WorldId, WorldStats};
use quarry::store::Store;

use super::{add_source, new_world};

conformance!(worlds_round_trip);
async fn worlds_round_trip(store: Arc<dyn Store>) {
    store.ping().await.unwrap();
    let req = new_world("Aerth");
    let created = store.create_world(req.clone()).await.unwrap();
    let expected = World {
        id: req.id,
        name: "Aerth".into(),
        embedding: req.embedding.clone(),
        chunking: req.chunking,
        hybrid: false,
        active_run: req.run,
        collection: "chunks_local_all-minilm-l6-v2_384".into(),
        created_at: req.now,
        updated_at: req.now,
    };
    assert_eq!(created, expected);
    assert_eq!(store.get_world(req.id).await.unwrap(), Some(expected.clone()));
    assert_eq!(store.get_world(WorldId::new()).await.unwrap(), None);
    assert_eq!(store.world_stats(req.id).await.unwrap(), WorldStats::default());
    assert_eq!(
        store.world_collections(req.id).await.unwrap(),
        vec![expected.collection.clone()]
    );

    let second = store.create_world(new_world("Second")).await.unwrap();
    let listed: Vec<WorldId> = store
        .list_worlds(quarry::domain::Window::ALL)
        .await
        .unwrap()
        .into_iter()
        .map(|w| w.id)
        .collect();
    assert_eq!(listed, vec![req.id, second.id], "oldest first");

    let later = (Utc::now() + chrono::Duration::seconds(5)).trunc_subsecs(6);
    let renamed = store.rename_world(req.id, "Aerth II", later).await.unwrap().unwrap();
    assert_eq!(renamed.name, "Aerth II");
    assert_eq!(renamed.updated_at, later);
    assert_eq!(renamed.created_at, req.now);
    assert!(store.rename_world(WorldId::new(), "x", later).await.unwrap().is_none());
}

conformance!(delete_cascades_within_one_world);
async fn delete_cascades_within_one_world(store: Arc<dyn Store>) {
    let doomed = store.create_world(new_world("doomed")).await.unwrap();
    let kept = store.create_world(new_world("kept")).await.unwrap();
    let (doomed_source, doomed_job) = add_source(&store, doomed.id, 4).await;
    let (kept_source, kept_job) = add_source(&store, kept.id, 2).await;

    assert!(store.delete_world(doomed.id).await.unwrap());
    assert!(
        !store.delete_world(doomed.id).await.unwrap(),
        "second delete finds nothing"
    );
    assert_eq!(store.get_world(doomed.id).await.unwrap(), None);
    assert_eq!(store.get_source(doomed.id, doomed_source.id).await.unwrap(), None);
    assert_eq!(store.get_job(doomed_job.id).await.unwrap(), None);
    assert!(
        store
            .list_jobs(doomed.id, &[], quarry::domain::Window::ALL)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.world_stats(doomed.id).await.unwrap(), WorldStats::default());
    assert!(store.world_collections(doomed.id).await.unwrap().is_empty());

    assert_eq!(
        store.get_source(kept.id, kept_source.id).await.unwrap(),
        Some(kept_source)
    );
    assert_eq!(store.get_job(kept_job.id).await.unwrap(), Some(kept_job));
    assert_eq!(store.world_stats(kept.id).await.unwrap().chunks, 2);
}

conformance!(keys_are_counted_per_provider);
async fn keys_are_counted_per_provider(store: Arc<dyn Store>) {
    for provider in ProviderKind::ALL {
        assert_eq!(store.count_eligible_keys(provider).await.unwrap(), 0);
    }
    let now = Utc::now().trunc_subsecs(6);
    let key = |fingerprint: &str| quarry::domain::NewKey {
        id: quarry::domain::KeyId::new(),
        provider: ProviderKind::Google,
        label: "config #1".into(),
        origin: quarry::domain::KeyOrigin::Config,
        quota_group: Some("p1".into()),
        sealed: None,
        fingerprint: fingerprint.into(),
        now,
    };
    let first = store.upsert_config_key(key("…abcd:01234567")).await.unwrap();
    // Mirroring the same configuration key again keeps one row (and its id).
    let again = store.upsert_config_key(key("…abcd:01234567")).await.unwrap();
    assert_eq!(again.id, first.id);
    assert_eq!(store.list_keys(quarry::domain::Window::ALL).await.unwrap().len(), 1);
    assert_eq!(store.count_eligible_keys(ProviderKind::Google).await.unwrap(), 1);
    assert_eq!(store.count_eligible_keys(ProviderKind::OpenAi).await.unwrap(), 0);

    let until = now + chrono::Duration::seconds(90);
    store.set_key_cooldown(first.id, Some(until), 2, now).await.unwrap();
    let stored = store.get_key(first.id).await.unwrap().unwrap();
    assert_eq!((stored.cooldown_until, stored.consecutive_failures), (Some(until), 2));
    store
        .extend_group_cooldown(ProviderKind::Google, "p1", until)
        .await
        .unwrap();
    store
        .extend_group_cooldown(ProviderKind::Google, "p1", now)
        .await
        .unwrap();
    let groups = store.list_group_cooldowns().await.unwrap();
    assert_eq!(groups.len(), 1);
    assert_eq!(groups[0].until, until, "a group cooldown is never shortened");

    store.retire_key(first.id, "API_KEY_INVALID", now).await.unwrap();
    assert_eq!(store.count_eligible_keys(ProviderKind::Google).await.unwrap(), 0);
    // Re-enabling lifts the retirement and the cooldown.
    let enabled = store.set_key_enabled(first.id, true, now).await.unwrap().unwrap();
    assert!(!enabled.retired && enabled.cooldown_until.is_none());
    assert_eq!(store.count_eligible_keys(ProviderKind::Google).await.unwrap(), 1);
    store.set_key_enabled(first.id, false, now).await.unwrap();
    assert_eq!(store.count_eligible_keys(ProviderKind::Google).await.unwrap(), 0);
    assert!(store.delete_key(first.id).await.unwrap());
    assert!(store.get_key(first.id).await.unwrap().is_none());
}
