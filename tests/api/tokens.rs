//! API tokens with scopes and world grants: every operation of the OpenAPI document asks its
//! scope (from the route table), limited tokens see only their worlds, secrets are shown once,
//! rotation keeps the old secret for its grace, revocation and expiry refuse at once here and
//! within the cache's life on another replica.

use std::collections::HashMap;
use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::helpers::{TestApp, assert_error, google_world, on_fake_google, spawn_app_on, spawn_app_with};
use quarry::domain::Scope;

/// A token made by the bootstrap token: its secret and id.
async fn token(app: &TestApp, body: Value) -> (String, String) {
    let (status, made) = app.post("/v1/tokens", body).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    (
        made["secret"].as_str().unwrap().to_owned(),
        made["id"].as_str().unwrap().to_owned(),
    )
}

/// `path` with every `{…}` parameter replaced: `{world_id}` by `world`, others by fresh ids.
fn filled(path: &str, world: &str) -> String {
    let mut out = String::new();
    let mut rest = path;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}').unwrap() + open;
        let name = &rest[open + 1..close];
        out.push_str(&if name == "world_id" {
            world.to_owned()
        } else {
            uuid::Uuid::new_v4().to_string()
        });
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    out
}

/// Every `/v1` operation of the served document, with the scope its `security` names, and what
/// its description says of tokens limited to other worlds (`world`, `global` or `listing`).
async fn operations(app: &TestApp) -> (Vec<(Method, String, Scope)>, HashMap<(Method, String), String>) {
    let document: Value = app
        .client
        .get(app.url("/openapi.json"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let mut found = Vec::new();
    let mut reaches = HashMap::new();
    for (path, item) in document["paths"].as_object().unwrap() {
        if !path.starts_with("/v1/") {
            continue;
        }
        for (method, operation) in item.as_object().unwrap() {
            let scope = operation["security"][0]["bearer"][0]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path}: no scope"));
            let description = operation["description"].as_str().unwrap_or("");
            assert!(
                description.contains(&format!("Scope: `{scope}`")),
                "{method} {path}: {description}"
            );
            let method = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let reach = if description.contains("limited to other worlds is answered 404") {
                "world"
            } else if description.contains("limited to some worlds is refused") {
                "global"
            } else {
                "listing"
            };
            reaches.insert((method.clone(), path.clone()), reach.to_owned());
            found.push((method, path.clone(), Scope::parse(scope).unwrap()));
        }
    }
    (found, reaches)
}

async fn every_operation_asks_its_scope(app: TestApp) {
    let world = google_world(&app).await;
    let other = google_world(&app).await;
    let mut tokens = Vec::new();
    for scope in Scope::ALL {
        let (secret, _) = token(&app, json!({"name": scope.as_str(), "scopes": [scope.as_str()]})).await;
        tokens.push((scope, secret));
    }
    // Admin of `other` only.
    let (limited, _) = token(
        &app,
        json!({"name": "other's admin", "scopes": ["admin"], "worlds": [other]}),
    )
    .await;
    let (operations, reaches) = operations(&app).await;
    assert!(operations.len() >= 40, "{}", operations.len());
    for (method, path, needed) in &operations {
        // Scopes are asked of ids that name nothing (so that nothing is changed); the world
        // check, of a world that exists.
        let nowhere = filled(path, &uuid::Uuid::new_v4().to_string());
        let target = filled(path, &world);
        let body = matches!(*method, Method::POST | Method::PUT | Method::PATCH).then(|| json!({}));
        for (held, secret) in &tokens {
            let (status, answer) = app.request_as(secret, method.clone(), &nowhere, body.clone()).await;
            if held.grants(*needed) {
                assert!(
                    status != StatusCode::FORBIDDEN && status != StatusCode::UNAUTHORIZED,
                    "{method} {path} with {held:?}: {status} {answer}"
                );
            } else {
                assert_error(status, &answer, StatusCode::FORBIDDEN, "insufficient_scope");
                assert_eq!(answer["error"]["details"]["scope"], needed.as_str(), "{method} {path}");
            }
        }
        // A token of another world: the path's world is missing to it; a route about every
        // world refuses it (as the document says of each).
        let (status, answer) = app.request_as(&limited, method.clone(), &target, body.clone()).await;
        match reaches.get(&(method.clone(), path.clone())).map(String::as_str) {
            // A job's routes find its world through the job; a route that names the world
            // (a gated re-ingest's promote and discard) finds it missing first.
            Some("world") if path.contains("{job_id}") && !path.contains("{world_id}") => {
                assert_error(status, &answer, StatusCode::NOT_FOUND, "job_not_found");
            }
            Some("world") => {
                assert_error(status, &answer, StatusCode::NOT_FOUND, "world_not_found");
            }
            Some("global") => {
                assert_error(status, &answer, StatusCode::FORBIDDEN, "insufficient_scope");
            }
            _ => assert_ne!(status, StatusCode::FORBIDDEN, "{method} {path}: {answer}"),
        }
    }
    // Nothing was touched: both worlds are there.
    for id in [&world, &other] {
        let (status, _) = app.get(&format!("/v1/worlds/{id}")).await;
        assert_eq!(status, StatusCode::OK);
    }
}

#[tokio::test]
async fn every_operation_of_the_document_asks_its_scope_on_sqlite() {
    let fake = crate::fake_providers::FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |_| {})).await;
    every_operation_asks_its_scope(app).await;
}

#[tokio::test]
async fn every_operation_of_the_document_asks_its_scope_on_postgres() {
    let Some(db) = crate::helpers::PgDatabase::create("tokens::every_operation").await else {
        return;
    };
    let fake = crate::fake_providers::FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_on(db.url.clone(), on_fake_google(fake.base_url(), |_| {})).await;
    every_operation_asks_its_scope(app).await;
    db.drop_db().await;
}

#[tokio::test]
async fn a_limited_token_sees_its_worlds_only_and_reaches_the_worlds_it_creates() {
    let fake = crate::fake_providers::FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |_| {})).await;
    let mine = google_world(&app).await;
    let theirs = google_world(&app).await;
    let job = app.add_text(&theirs, "a.txt", "Queen Maren rules the isles.").await["job"]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (secret, id) = token(&app, json!({"name": "mine", "scopes": ["admin"], "worlds": [mine]})).await;
    let (status, listed) = app.request_as(&secret, Method::GET, "/v1/worlds", None).await;
    assert_eq!(status, StatusCode::OK);
    let ids: Vec<&str> = listed["worlds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [mine.as_str()]);
    let (status, answer) = app
        .request_as(&secret, Method::GET, &format!("/v1/jobs/{job}"), None)
        .await;
    assert_error(status, &answer, StatusCode::NOT_FOUND, "job_not_found");
    let (status, answer) = app
        .request_as(
            &secret,
            Method::POST,
            &format!("/v1/worlds/{theirs}/retrieve"),
            Some(json!({"query": "queen"})),
        )
        .await;
    assert_error(status, &answer, StatusCode::NOT_FOUND, "world_not_found");
    // A world it creates joins its grant; a token it makes reaches no more than it does.
    let (status, made) = app
        .request_as(
            &secret,
            Method::POST,
            "/v1/worlds",
            Some(json!({"name": "New", "embedding": {"provider": "google", "model": "gemini-embedding-001"}})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let created = made["id"].as_str().unwrap();
    let (_, shown) = app.get(&format!("/v1/tokens/{id}")).await;
    assert_eq!(shown["worlds"], json!([mine, created]), "{shown}");
    let (status, _) = app
        .request_as(&secret, Method::GET, &format!("/v1/worlds/{created}"), None)
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, answer) = app
        .request_as(
            &secret,
            Method::POST,
            "/v1/tokens",
            Some(json!({"name": "x", "scopes": ["read"], "worlds": [theirs]})),
        )
        .await;
    assert_error(status, &answer, StatusCode::NOT_FOUND, "world_not_found");
    let (status, made) = app
        .request_as(
            &secret,
            Method::POST,
            "/v1/tokens",
            Some(json!({"name": "x", "scopes": ["read"]})),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    assert_eq!(
        made["worlds"],
        json!([mine, created]),
        "a token it makes inherits its worlds"
    );
}

#[tokio::test]
async fn secrets_are_shown_once_rotated_with_grace_and_revoked_at_once() {
    let fake = crate::fake_providers::FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |_| {})).await;
    let (secret, id) = token(&app, json!({"name": "bot", "scopes": ["read"]})).await;
    assert!(secret.starts_with("qk_") && secret.len() == 79, "{secret}");
    let (status, _) = app.request_as(&secret, Method::GET, "/v1/worlds", None).await;
    assert_eq!(status, StatusCode::OK);
    let (_, listed) = app.get("/v1/tokens").await;
    let text = listed.to_string();
    assert!(!text.contains(&secret[40..]), "no secret in listings: {text}");
    assert_eq!(listed["tokens"][0]["scopes"], json!(["read"]));
    assert!(listed["tokens"][0]["last_used_at"].is_string(), "{listed}");

    // Rotation: both secrets work during the grace; with none, only the new one.
    let (status, rotated) = app
        .post(&format!("/v1/tokens/{id}/rotate?grace_s=600"), json!(null))
        .await;
    assert_eq!(status, StatusCode::OK, "{rotated}");
    let new = rotated["secret"].as_str().unwrap().to_owned();
    assert_ne!(new, secret);
    for s in [&secret, &new] {
        let (status, _) = app.request_as(s, Method::GET, "/v1/worlds", None).await;
        assert_eq!(status, StatusCode::OK);
    }
    let (_, rotated) = app
        .post(&format!("/v1/tokens/{id}/rotate?grace_s=0"), json!(null))
        .await;
    let newest = rotated["secret"].as_str().unwrap().to_owned();
    let (status, _) = app.request_as(&new, Method::GET, "/v1/worlds", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, answer) = app
        .post(&format!("/v1/tokens/{id}/rotate?grace_s=9999999"), json!(null))
        .await;
    assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_request");

    // Revoked: refused at once on this replica.
    let (status, _) = app.request(Method::DELETE, &format!("/v1/tokens/{id}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, answer) = app.request_as(&newest, Method::GET, "/v1/worlds", None).await;
    assert_error(status, &answer, StatusCode::UNAUTHORIZED, "unauthorized");
    let (status, answer) = app.request(Method::DELETE, &format!("/v1/tokens/{id}"), None).await;
    assert_error(status, &answer, StatusCode::NOT_FOUND, "token_not_found");

    // Bad requests change nothing.
    for (body, field) in [
        (json!({"name": "", "scopes": ["read"]}), "name"),
        (json!({"name": "x", "scopes": []}), "scopes"),
        (json!({"name": "x", "scopes": ["root"]}), "scopes"),
    ] {
        let (status, answer) = app.post("/v1/tokens", body).await;
        assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(answer["error"]["details"]["field"], field, "{answer}");
    }
    let (status, answer) = app
        .post(
            "/v1/tokens",
            json!({"name": "x", "scopes": ["read"], "expires_at": "2001-01-01T00:00:00Z"}),
        )
        .await;
    assert_error(status, &answer, StatusCode::UNPROCESSABLE_ENTITY, "expiry_in_past");
    assert_eq!(answer["error"]["details"]["field"], "expires_at", "{answer}");
    let (_, listed) = app.get("/v1/tokens").await;
    assert_eq!(listed["tokens"], json!([]));
}

#[tokio::test]
async fn a_token_tells_who_it_is() {
    let fake = crate::fake_providers::FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |_| {})).await;
    // A bootstrap token of `auth.tokens`: no id, every scope, every world, no expiry.
    let (status, me) = app.get("/v1/token").await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!(
        me,
        json!({"id": null, "name": "bootstrap", "scopes": ["read", "ingest", "admin", "metrics"],
            "worlds": null, "expires_at": null})
    );
    // A managed token limited in scope and world, with an expiry.
    let world = google_world(&app).await;
    let expires = (chrono::Utc::now() + chrono::Duration::hours(1)).to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
    let (secret, id) = token(
        &app,
        json!({"name": "reader", "scopes": ["read"], "worlds": [world], "expires_at": expires}),
    )
    .await;
    let (status, me) = app.request_as(&secret, Method::GET, "/v1/token", None).await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!(me["id"], id);
    assert_eq!(me["name"], "reader");
    assert_eq!(me["scopes"], json!(["read"]));
    assert_eq!(me["worlds"], json!([world]));
    let shown = chrono::DateTime::parse_from_rfc3339(me["expires_at"].as_str().unwrap()).unwrap();
    assert_eq!(shown, chrono::DateTime::parse_from_rfc3339(&expires).unwrap());
    // No token: 401.
    let resp = app.client.get(app.url("/v1/token")).send().await.unwrap();
    let (status, answer) = crate::helpers::read(resp).await;
    assert_error(status, &answer, StatusCode::UNAUTHORIZED, "unauthorized");
}

#[tokio::test]
async fn an_expired_token_is_refused() {
    let fake = crate::fake_providers::FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |_| {})).await;
    let expires = (chrono::Utc::now() + chrono::Duration::seconds(2)).to_rfc3339();
    let (secret, _) = token(
        &app,
        json!({"name": "brief", "scopes": ["read"], "expires_at": expires}),
    )
    .await;
    let (status, _) = app.request_as(&secret, Method::GET, "/v1/worlds", None).await;
    assert_eq!(status, StatusCode::OK);
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let (status, _) = app.request_as(&secret, Method::GET, "/v1/worlds", None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn a_revocation_reaches_another_replica_within_the_cache_life() {
    let Some(db) = crate::helpers::PgDatabase::create("tokens::revocation").await else {
        return;
    };
    let apps = crate::helpers::spawn_replicas(&db.url, 2, |_| {}).await;
    let (secret, id) = token(&apps[0], json!({"name": "bot", "scopes": ["read"]})).await;
    let (status, _) = apps[1].request_as(&secret, Method::GET, "/v1/worlds", None).await;
    assert_eq!(status, StatusCode::OK, "the other replica knows it");
    let (status, _) = apps[0].request(Method::DELETE, &format!("/v1/tokens/{id}"), None).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    // Refused within the cache's life (5 s), asked every 100 ms.
    let mut polls = 0;
    loop {
        let (status, _) = apps[1].request_as(&secret, Method::GET, "/v1/worlds", None).await;
        if status == StatusCode::UNAUTHORIZED {
            break;
        }
        polls += 1;
        assert!(polls <= 60, "still accepted after {polls} polls");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    db.drop_db().await;
}

#[tokio::test]
async fn a_metrics_token_reads_metrics_and_nothing_else() {
    let fake = crate::fake_providers::FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |s| {
        s.auth.metrics_token = Some(secrecy::SecretString::from("scrape-me"));
    }))
    .await;
    let (secret, _) = token(&app, json!({"name": "prometheus", "scopes": ["metrics"]})).await;
    let (reader, _) = token(&app, json!({"name": "reader", "scopes": ["read"]})).await;
    let scrape = |t: String| {
        let req = app.client.get(app.url("/metrics")).bearer_auth(t);
        async move { req.send().await.unwrap().status() }
    };
    assert_eq!(scrape(secret.clone()).await, StatusCode::OK);
    assert_eq!(scrape("scrape-me".into()).await, StatusCode::OK);
    assert_eq!(scrape(reader).await, StatusCode::FORBIDDEN);
    assert_eq!(scrape("qk_nothing".into()).await, StatusCode::UNAUTHORIZED);
    let (status, answer) = app.request_as(&secret, Method::GET, "/v1/worlds", None).await;
    assert_error(status, &answer, StatusCode::FORBIDDEN, "insufficient_scope");
}

#[tokio::test]
async fn a_token_past_its_rate_is_told_when_to_come_back_and_others_are_not_slowed() {
    let fake = crate::fake_providers::FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |_| {})).await;
    // 60 a minute (an integral number, as JSON Schema counts integers): ten seconds' worth
    // (10 requests) at once, then one a second.
    let (secret, id) = token(
        &app,
        json!({"name": "busy", "scopes": ["read"], "rate_per_minute": 60.0}),
    )
    .await;
    let (_, shown) = app.get(&format!("/v1/tokens/{id}")).await;
    assert_eq!(shown["rate_per_minute"], 60);
    let mut admitted = 0;
    let refused = loop {
        let response = app
            .client
            .get(app.url("/v1/models"))
            .bearer_auth(&secret)
            .send()
            .await
            .unwrap();
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            break response;
        }
        assert_eq!(response.status(), StatusCode::OK);
        admitted += 1;
        assert!(admitted <= 11, "never refused");
    };
    assert!((10..=11).contains(&admitted), "{admitted}");
    assert_eq!(refused.headers()["retry-after"], "1");
    let body: Value = refused.json().await.unwrap();
    assert_eq!(body["error"]["code"], "token_rate_limited", "{body}");
    // The bootstrap token, and another token, are not slowed by it.
    let (status, _) = app.get("/v1/models").await;
    assert_eq!(status, StatusCode::OK);
    let (other, _) = token(&app, json!({"name": "calm", "scopes": ["read"]})).await;
    let (status, _) = app.request_as(&other, Method::GET, "/v1/models", None).await;
    assert_eq!(status, StatusCode::OK);
    for bad in [json!(0), json!(1_000_001), json!(2.5), json!(-1)] {
        let (status, answer) = app
            .post(
                "/v1/tokens",
                json!({"name": "x", "scopes": ["read"], "rate_per_minute": bad}),
            )
            .await;
        assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(answer["error"]["details"]["field"], "rate_per_minute");
    }
}

/// `GET /v1/audit` as the bootstrap token: `(action, actor name, target)` newest first.
async fn audit_entries(app: &TestApp, query: &str) -> Vec<(String, String, String)> {
    let (status, log) = app.get(&format!("/v1/audit{query}")).await;
    assert_eq!(status, StatusCode::OK, "{log}");
    log["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["action"].as_str().unwrap().to_owned(),
                e["actor"]["name"].as_str().unwrap().to_owned(),
                e["target"].as_str().unwrap_or("-").to_owned(),
            )
        })
        .collect()
}

async fn administrative_actions_are_audited(app: TestApp) {
    let (secret, token_id) = token(&app, json!({"name": "ops bot", "scopes": ["admin"]})).await;
    let as_bot = |method: Method, path: String, body: Option<Value>| {
        let (app, secret) = (&app, secret.clone());
        async move { app.request_as(&secret, method, &path, body).await }
    };
    let (status, world) = as_bot(
        Method::POST,
        "/v1/worlds".into(),
        Some(json!({"name": "Audited", "embedding": {"provider": "google", "model": "gemini-embedding-001"}})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{world}");
    let world = world["id"].as_str().unwrap().to_owned();
    let (status, key) = as_bot(
        Method::POST,
        "/v1/provider-keys".into(),
        Some(json!({"provider": "google", "secret": "AIzaSy-audited-secret-1", "label": "audited"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{key}");
    let key = key["key_id"].as_str().unwrap().to_owned();
    let (status, hook) = as_bot(
        Method::POST,
        "/v1/webhooks".into(),
        Some(json!({"url": "https://hooks.example.com/quarry"})),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{hook}");
    let hook = hook["webhook_id"].as_str().unwrap().to_owned();
    // Reads, and actions that fail, are not administrative actions that happened.
    let (status, _) = as_bot(Method::GET, format!("/v1/worlds/{world}"), None).await;
    assert_eq!(status, StatusCode::OK);
    let missing = uuid::Uuid::new_v4();
    let (status, _) = as_bot(Method::DELETE, format!("/v1/worlds/{missing}"), None).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = as_bot(
        Method::POST,
        "/v1/tokens".into(),
        Some(json!({"name": "x", "scopes": ["nothing"]})),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    for (method, path) in [
        (Method::DELETE, format!("/v1/webhooks/{hook}")),
        (Method::DELETE, format!("/v1/provider-keys/{key}")),
        (Method::DELETE, format!("/v1/worlds/{world}")),
    ] {
        let (status, body) = as_bot(method, path, None).await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
    }
    let (status, _) = app
        .post(&format!("/v1/tokens/{token_id}/rotate?grace_s=0"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = app.delete(&format!("/v1/tokens/{token_id}")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);

    let bot = "ops bot".to_owned();
    let entry = |action: &str, actor: &String, target: &String| (action.to_owned(), actor.clone(), target.clone());
    let bootstrap = "bootstrap".to_owned();
    assert_eq!(
        audit_entries(&app, "").await,
        [
            entry("token.revoked", &bootstrap, &token_id),
            entry("token.rotated", &bootstrap, &token_id),
            entry("world.deleted", &bot, &world),
            entry("provider_key.removed", &bot, &key),
            entry("webhook.deleted", &bot, &hook),
            entry("webhook.created", &bot, &hook),
            entry("provider_key.added", &bot, &key),
            entry("world.created", &bot, &world),
            entry("token.created", &bootstrap, &token_id),
        ]
    );
    // Who, from where and when; one action at a time; pages.
    let (_, log) = app.get("/v1/audit?action=world.created").await;
    let created = &log["events"][0];
    assert_eq!(log["events"].as_array().unwrap().len(), 1, "{log}");
    assert_eq!(created["actor"]["token_id"], token_id.as_str(), "{created}");
    assert_eq!(created["address"], "127.0.0.1", "{created}");
    let at: chrono::DateTime<chrono::Utc> = created["at"].as_str().unwrap().parse().unwrap();
    assert!((chrono::Utc::now() - at).num_seconds().abs() < 600, "{created}");
    let (_, first) = app.get("/v1/audit?limit=4").await;
    assert_eq!(first["next_offset"], 4);
    assert_eq!(audit_entries(&app, "?limit=4&offset=8").await.len(), 1);
    // Bad parameters are named.
    let (status, answer) = app.get("/v1/audit?action=world.renamed").await;
    assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(answer["error"]["details"]["field"], "action");
    let (status, answer) = app.get("/v1/audit?since=yesterday").await;
    assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_request");
    assert_eq!(answer["error"]["details"]["field"], "since");
}

#[tokio::test]
async fn administrative_actions_are_audited_with_who_what_and_where_on_sqlite() {
    let fake = crate::fake_providers::FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |s| {
        s.security.master_key = Some(crate::keys::MASTER_KEY.to_owned().into());
    }))
    .await;
    administrative_actions_are_audited(app).await;
}

#[tokio::test]
async fn administrative_actions_are_audited_with_who_what_and_where_on_postgres() {
    let Some(db) = crate::helpers::PgDatabase::create("tokens::audited").await else {
        return;
    };
    let fake = crate::fake_providers::FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_on(
        db.url.clone(),
        on_fake_google(fake.base_url(), |s| {
            s.security.master_key = Some(crate::keys::MASTER_KEY.to_owned().into());
        }),
    )
    .await;
    administrative_actions_are_audited(app).await;
    db.drop_db().await;
}

#[tokio::test]
async fn audit_entries_older_than_keep_days_are_forgotten() {
    let app = spawn_app_with(|s| s.audit.keep_days = 3).await;
    let (_, id) = token(&app, json!({"name": "recent", "scopes": ["read"]})).await;
    let target = uuid::Uuid::new_v4().to_string();
    for days in [4, 2] {
        let event = quarry::domain::NewAuditEvent {
            at: quarry::domain::now() - chrono::Duration::days(days),
            actor: quarry::domain::Actor {
                token_id: None,
                name: "bootstrap".into(),
            },
            action: quarry::domain::AuditAction::WorldDeleted,
            target: Some(target.clone()),
            address: Some("10.0.0.7".into()),
        };
        app.deps.store.record_audit(&event).await.unwrap();
    }
    // Each replica also forgets at start (racing this test's writes): either pass removes the
    // entry four days old, never the one two days old.
    app.state.audit.forget_old().await.unwrap();
    assert_eq!(
        audit_entries(&app, "").await,
        [
            ("world.deleted".to_owned(), "bootstrap".to_owned(), target),
            ("token.created".to_owned(), "bootstrap".to_owned(), id),
        ]
    );
}
