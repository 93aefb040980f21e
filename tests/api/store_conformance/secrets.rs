//! Re-sealing under a new master key: every secret and the check value in one transaction, or
//! nothing when a secret changed or was added since it was read.

use std::sync::Arc;

use chrono::Utc;
use quarry::crypto::Sealed;
use quarry::domain::{Webhook, WebhookEvent, WebhookId};
use quarry::store::{SealedRow, Store};

fn sealed(tag: u8) -> Sealed {
    Sealed {
        ciphertext: vec![tag; 24],
        nonce: vec![tag; 12],
    }
}

async fn hook(store: &Arc<dyn Store>, tag: u8) -> WebhookId {
    let id = WebhookId::new();
    let secret = sealed(tag);
    store
        .insert_webhook(&Webhook {
            id,
            world_id: None,
            url: "https://receiver.example/hooks".into(),
            events: vec![WebhookEvent::JobCompleted],
            description: None,
            secret_ciphertext: secret.ciphertext,
            secret_nonce: secret.nonce,
            created_at: Utc::now(),
        })
        .await
        .unwrap();
    id
}

fn resealed(rows: &[SealedRow], tag: u8) -> Vec<SealedRow> {
    rows.iter()
        .map(|r| SealedRow {
            sealed: sealed(tag),
            ..r.clone()
        })
        .collect()
}

conformance!(every_secret_is_resealed_at_once_or_none_is);
async fn every_secret_is_resealed_at_once_or_none_is(store: Arc<dyn Store>) {
    assert_eq!(store.master_key_check().await.unwrap(), None);
    assert!(store.set_master_key_check(&sealed(1)).await.unwrap());
    assert!(
        !store.set_master_key_check(&sealed(2)).await.unwrap(),
        "one check value"
    );
    assert_eq!(store.master_key_check().await.unwrap(), Some(sealed(1)));

    hook(&store, 10).await;
    hook(&store, 11).await;
    let rows = store.sealed_secrets().await.unwrap();
    assert_eq!(rows.len(), 2);

    // A row that is not what was read: nothing changes.
    let mut stale = rows.clone();
    stale[1].sealed = sealed(99);
    assert!(!store.reseal(&stale, &resealed(&rows, 20), &sealed(3)).await.unwrap());
    assert_eq!(store.sealed_secrets().await.unwrap(), rows);
    assert_eq!(store.master_key_check().await.unwrap(), Some(sealed(1)));

    // A secret added since the read: nothing changes either.
    let late = hook(&store, 12).await;
    assert!(!store.reseal(&rows, &resealed(&rows, 20), &sealed(3)).await.unwrap());
    assert_eq!(store.sealed_secrets().await.unwrap().len(), 3);
    assert_eq!(store.master_key_check().await.unwrap(), Some(sealed(1)));
    store.delete_webhook(late).await.unwrap();

    assert!(store.reseal(&rows, &resealed(&rows, 20), &sealed(3)).await.unwrap());
    let after = store.sealed_secrets().await.unwrap();
    assert_eq!(after, resealed(&rows, 20));
    assert_eq!(store.master_key_check().await.unwrap(), Some(sealed(3)));
}
