//! API tokens: stored by digest only, listed without it, rotated with a grace period, used at
//! most once a minute on the record, revoked for good, and world grants that grow.

use std::sync::Arc;

use chrono::{Duration, DurationRound, Utc};
use quarry::domain::{ApiToken, Scope, TokenId, Window, WorldId};
use quarry::store::Store;

fn token(name: &str, worlds: Option<Vec<WorldId>>) -> ApiToken {
    ApiToken {
        id: TokenId::new(),
        name: name.into(),
        scopes: vec![Scope::Read, Scope::Metrics],
        worlds,
        // Whole seconds: both stores give back what they were given.
        created_at: Utc::now().duration_trunc(Duration::seconds(1)).unwrap(),
        expires_at: None,
        last_used_at: None,
        rate_per_minute: Some(120),
    }
}

conformance!(tokens_are_kept_by_digest_rotated_touched_and_revoked);
async fn tokens_are_kept_by_digest_rotated_touched_and_revoked(store: Arc<dyn Store>) {
    let world = WorldId::new();
    let limited = token("agent", Some(vec![world]));
    let mut everywhere = token("ops", None);
    everywhere.created_at = limited.created_at + Duration::seconds(1);
    store.insert_token(&limited, &[1; 32]).await.unwrap();
    store.insert_token(&everywhere, &[2; 32]).await.unwrap();

    let found = store.token_credentials(limited.id).await.unwrap().unwrap();
    assert_eq!(found.token, limited);
    assert_eq!(found.secret_sha256, [1; 32]);
    assert_eq!(found.previous, None);
    assert_eq!(
        store.list_tokens(Window::ALL).await.unwrap(),
        [limited.clone(), everywhere.clone()]
    );
    assert_eq!(
        store.list_tokens(Window { offset: 1, limit: 5 }).await.unwrap(),
        [everywhere.clone()]
    );

    // A rotation: the new digest, the old one until the grace ends.
    let until = Utc::now().duration_trunc(Duration::seconds(1)).unwrap() + Duration::hours(1);
    assert!(store.rotate_token(limited.id, &[3; 32], until).await.unwrap());
    let rotated = store.token_credentials(limited.id).await.unwrap().unwrap();
    assert_eq!(rotated.secret_sha256, [3; 32]);
    assert_eq!(rotated.previous, Some(([1; 32], until)));
    assert!(!store.rotate_token(TokenId::new(), &[4; 32], until).await.unwrap());

    // Uses: recorded, then not again within the minute.
    let at = Utc::now().duration_trunc(Duration::seconds(1)).unwrap();
    store.touch_token(limited.id, at).await.unwrap();
    store.touch_token(limited.id, at + Duration::seconds(30)).await.unwrap();
    let used = store
        .token_credentials(limited.id)
        .await
        .unwrap()
        .unwrap()
        .token
        .last_used_at;
    assert_eq!(used, Some(at));
    store.touch_token(limited.id, at + Duration::seconds(90)).await.unwrap();
    let used = store
        .token_credentials(limited.id)
        .await
        .unwrap()
        .unwrap()
        .token
        .last_used_at;
    assert_eq!(used, Some(at + Duration::seconds(90)));

    // A world joins a limited token's grant once; a token for every world stays so.
    let other = WorldId::new();
    store.grant_world(limited.id, other).await.unwrap();
    store.grant_world(limited.id, other).await.unwrap();
    store.grant_world(everywhere.id, other).await.unwrap();
    let grant = store.token_credentials(limited.id).await.unwrap().unwrap().token.worlds;
    assert_eq!(grant, Some(vec![world, other]));
    let grant = store
        .token_credentials(everywhere.id)
        .await
        .unwrap()
        .unwrap()
        .token
        .worlds;
    assert_eq!(grant, None);

    // Revoked: gone.
    assert!(store.delete_token(limited.id).await.unwrap());
    assert!(!store.delete_token(limited.id).await.unwrap());
    assert_eq!(store.token_credentials(limited.id).await.unwrap(), None);
    assert_eq!(store.list_tokens(Window::ALL).await.unwrap(), [everywhere]);
}

conformance!(the_audit_log_keeps_entries_in_order_filters_pages_and_forgets_old_ones);
async fn the_audit_log_keeps_entries_in_order_filters_pages_and_forgets_old_ones(store: Arc<dyn Store>) {
    use quarry::domain::{Actor, AuditAction, NewAuditEvent};
    let now = quarry::domain::now();
    let by_token = TokenId::new();
    let entry = |days_ago: i64, action: AuditAction, token: Option<TokenId>| NewAuditEvent {
        at: now - Duration::days(days_ago),
        actor: Actor {
            token_id: token,
            name: if token.is_some() { "ops bot" } else { "bootstrap" }.into(),
        },
        action,
        target: Some(uuid::Uuid::new_v4().to_string()),
        address: token.map(|_| "2001:db8::7".to_owned()),
    };
    let written = [
        entry(10, AuditAction::WorldCreated, None),
        entry(2, AuditAction::TokenCreated, Some(by_token)),
        entry(1, AuditAction::WorldCreated, Some(by_token)),
        entry(0, AuditAction::KeyRemoved, None),
    ];
    for event in &written {
        store.record_audit(event).await.unwrap();
    }
    let all = store.list_audit(None, Window::ALL).await.unwrap();
    let read: Vec<_> = all.iter().map(|e| e.event.clone()).collect();
    let newest_first: Vec<_> = written.iter().rev().cloned().collect();
    assert_eq!(read, newest_first, "read back as written, newest first");
    assert!(all.windows(2).all(|w| w[0].seq > w[1].seq));
    let created = store
        .list_audit(Some(AuditAction::WorldCreated), Window::ALL)
        .await
        .unwrap();
    assert_eq!(
        created.iter().map(|e| e.event.clone()).collect::<Vec<_>>(),
        [written[2].clone(), written[0].clone()]
    );
    let page = store.list_audit(None, Window { offset: 1, limit: 2 }).await.unwrap();
    assert_eq!(
        page.iter().map(|e| e.event.clone()).collect::<Vec<_>>(),
        [written[2].clone(), written[1].clone()]
    );
    assert_eq!(store.forget_audit(now - Duration::days(3)).await.unwrap(), 1);
    assert_eq!(store.list_audit(None, Window::ALL).await.unwrap().len(), 3);
}
