//! Evaluation test sets (`/v1/worlds/{world_id}/evals`): kept per world on both stores,
//! listed without their items, replaced whole, deleted (and with their world); bounds refused
//! with the field named, changing nothing.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fake_providers::FakeGoogle;
use crate::helpers::{TestApp, assert_error, google_world, on_fake_google, spawn_app_on, spawn_app_with};

macro_rules! on_both_stores {
    ($case:ident) => {
        mod $case {
            use super::*;

            #[tokio::test]
            async fn sqlite() {
                let fake = FakeGoogle::start(&["key-a"]).await;
                let app = spawn_app_with(on_fake_google(fake.base_url(), |s| s.embedding.workers = 0)).await;
                super::$case(app).await;
            }

            #[tokio::test]
            async fn postgres() {
                let Some(db) = crate::helpers::PgDatabase::create(concat!("evals::", stringify!($case))).await else {
                    return;
                };
                let fake = FakeGoogle::start(&["key-a"]).await;
                let app = spawn_app_on(
                    db.url.clone(),
                    on_fake_google(fake.base_url(), |s| s.embedding.workers = 0),
                )
                .await;
                super::$case(app).await;
                db.drop_db().await;
            }
        }
    };
}

fn set(name: &str, items: Value) -> Value {
    json!({"name": name, "items": items})
}

fn items() -> Value {
    let source = uuid::Uuid::new_v4();
    json!([
        {"query": "  Who keeps the tower?  ", "expected": {"answer": "The keeper climbs the tower every evening."}},
        {"query": "When do seals have young?", "expected": {"sources": [source], "source_keys": ["guides/seals.md"]}},
        {"query": "Where is the harbour?", "expected": {"chunks": [uuid::Uuid::new_v4()], "answer": "north"}},
    ])
}

async fn create(app: &TestApp, world: &str, body: Value) -> Value {
    let (status, created) = app.post(&format!("/v1/worlds/{world}/evals"), body).await;
    assert_eq!(status, StatusCode::CREATED, "{created}");
    created
}

on_both_stores!(a_test_set_is_kept_listed_replaced_and_deleted);
async fn a_test_set_is_kept_listed_replaced_and_deleted(app: TestApp) {
    let world = google_world(&app).await;
    let sent = items();
    let created = create(&app, &world, set(" FAQ ", sent.clone())).await;
    let id = created["eval_id"].as_str().unwrap().to_owned();
    assert_eq!(created["name"], "FAQ");
    assert_eq!(created["world_id"], world.as_str());
    assert_eq!(created["item_count"], 3);
    // Kept as sent, the query trimmed; lists left out are not shown.
    assert_eq!(created["items"][0]["query"], "Who keeps the tower?");
    assert_eq!(created["items"][0]["expected"], sent[0]["expected"]);
    assert_eq!(created["items"][1]["expected"], sent[1]["expected"]);
    assert_eq!(created["items"][2]["expected"], sent[2]["expected"]);

    let (status, read) = app.get(&format!("/v1/worlds/{world}/evals/{id}")).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(read, created);

    let second = create(&app, &world, set("Manual", json!([sent[0]]))).await;
    let (status, listed) = app.get(&format!("/v1/worlds/{world}/evals")).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let listed = listed["evals"].as_array().unwrap().clone();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["eval_id"], id.as_str(), "oldest first");
    assert_eq!(listed[1]["eval_id"], second["eval_id"]);
    assert_eq!(listed[0]["item_count"], 3);
    assert!(
        listed[0].get("items").is_none(),
        "a listing leaves the items out: {listed:?}"
    );
    let (_, page) = app.get(&format!("/v1/worlds/{world}/evals?limit=1")).await;
    assert_eq!(page["evals"].as_array().unwrap().len(), 1);
    assert_eq!(page["next_offset"], 1);

    // Replaced whole.
    let (status, replaced) = app
        .put(
            &format!("/v1/worlds/{world}/evals/{id}"),
            set("FAQ v2", json!([sent[1]])),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{replaced}");
    assert_eq!(
        (replaced["name"].as_str(), replaced["item_count"].as_u64()),
        (Some("FAQ v2"), Some(1))
    );
    assert_eq!(replaced["created_at"], created["created_at"]);
    assert_ne!(replaced["updated_at"], created["updated_at"]);
    let (_, read) = app.get(&format!("/v1/worlds/{world}/evals/{id}")).await;
    assert_eq!(read, replaced);

    // Another world does not see it.
    let other = google_world(&app).await;
    let (status, body) = app.get(&format!("/v1/worlds/{other}/evals/{id}")).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "eval_not_found");

    let (status, _) = app.delete(&format!("/v1/worlds/{world}/evals/{id}")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = app.get(&format!("/v1/worlds/{world}/evals/{id}")).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "eval_not_found");
    let (status, body) = app.delete(&format!("/v1/worlds/{world}/evals/{id}")).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "eval_not_found");

    // A world's test sets go with it.
    let world_id = quarry::domain::WorldId(world.parse().unwrap());
    assert_eq!(app.deps.store.count_eval_sets(world_id).await.unwrap(), 1);
    let (status, _) = app.delete(&format!("/v1/worlds/{world}")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    assert_eq!(app.deps.store.count_eval_sets(world_id).await.unwrap(), 0);
    let (status, body) = app.get(&format!("/v1/worlds/{world}/evals")).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "world_not_found");
}

on_both_stores!(bad_test_sets_are_refused_naming_the_field_and_change_nothing);
async fn bad_test_sets_are_refused_naming_the_field_and_change_nothing(app: TestApp) {
    let world = google_world(&app).await;
    let good = json!({"query": "q", "expected": {"answer": "a"}});
    let item = |expected: Value| json!([{"query": "q", "expected": expected}]);
    let many = Value::Array(vec![good.clone(); 1001]);
    let cases = [
        (set(" ", json!([good])), "name"),
        (set("n", json!([])), "items"),
        (set("n", many), "items"),
        (
            set("n", json!([{"query": " \t", "expected": {"answer": "a"}}])),
            "items[0].query",
        ),
        (
            set(
                "n",
                json!([good, {"query": "x".repeat(4001), "expected": {"answer": "a"}}]),
            ),
            "items[1].query",
        ),
        (set("n", item(json!({}))), "items[0].expected"),
        (set("n", item(json!({"answer": null}))), "items[0].expected"),
        (set("n", item(json!({"sources": []}))), "items[0].expected.sources"),
        (
            set("n", item(json!({"chunks": vec![uuid::Uuid::new_v4(); 101]}))),
            "items[0].expected.chunks",
        ),
        (
            set("n", item(json!({"source_keys": ["a\u{7}b"]}))),
            "items[0].expected.source_keys",
        ),
        (set("n", item(json!({"answer": "  "}))), "items[0].expected.answer"),
        (
            set("n", item(json!({"answer": "x".repeat(20_001)}))),
            "items[0].expected.answer",
        ),
    ];
    for (body, field) in cases {
        let (status, answer) = app.post(&format!("/v1/worlds/{world}/evals"), body).await;
        let error = assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(error["details"]["field"], field, "{answer}");
    }
    // Unknown fields and wrong types are refused by the parser.
    for body in [
        json!({"name": "n", "items": [good], "extra": 1}),
        json!({"name": "n", "items": [{"query": "q", "expected": {"answer": "a", "weight": 2}}]}),
        json!({"name": "n", "items": [{"query": 5, "expected": {"answer": "a"}}]}),
        json!({"name": "n", "items": [{"query": "q", "expected": {"sources": ["not-a-uuid"]}}]}),
    ] {
        let (status, answer) = app.post(&format!("/v1/worlds/{world}/evals"), body).await;
        assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_request");
    }
    // Over 4 MiB: refused before it is parsed, the route's own limit named.
    let huge = set(
        "n",
        json!([{"query": "q", "expected": {"answer": "a ".repeat(2_200_000)}}]),
    );
    let (status, answer) = app.post(&format!("/v1/worlds/{world}/evals"), huge).await;
    let error = assert_error(status, &answer, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    assert_eq!(error["details"]["limit_bytes"], 4 * 1024 * 1024);
    // A world that does not exist.
    let missing = uuid::Uuid::new_v4();
    let (status, answer) = app
        .post(&format!("/v1/worlds/{missing}/evals"), set("n", json!([good])))
        .await;
    assert_error(status, &answer, StatusCode::NOT_FOUND, "world_not_found");
    // Nothing was kept.
    let (_, listed) = app.get(&format!("/v1/worlds/{world}/evals")).await;
    assert_eq!(listed["evals"], json!([]), "{listed}");

    // A replace that breaks a rule leaves the set as it was.
    let created = create(&app, &world, set("kept", json!([good]))).await;
    let id = created["eval_id"].as_str().unwrap();
    let (status, answer) = app
        .put(&format!("/v1/worlds/{world}/evals/{id}"), set("kept", json!([])))
        .await;
    assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_request");
    let (_, read) = app.get(&format!("/v1/worlds/{world}/evals/{id}")).await;
    assert_eq!(read, created);
}

#[tokio::test]
async fn a_world_keeps_at_most_a_hundred_test_sets() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |s| s.embedding.workers = 0)).await;
    let world = google_world(&app).await;
    let body = set("n", json!([{"query": "q", "expected": {"answer": "a"}}]));
    for _ in 0..100 {
        create(&app, &world, body.clone()).await;
    }
    let (status, answer) = app.post(&format!("/v1/worlds/{world}/evals"), body.clone()).await;
    assert_error(status, &answer, StatusCode::CONFLICT, "eval_limit_reached");
    // Another world has room of its own.
    let other = google_world(&app).await;
    create(&app, &other, body).await;
}
