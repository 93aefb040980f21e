//! Gated re-ingests on both stores: a re-ingest to a deliberately worse chunking is held while
//! the world keeps serving its run, then promoted (or discarded); one that scores as well
//! switches by itself; and bad gates are refused with the field named, writing nothing.
//!
//! The fake Google provider embeds a text as its words hashed into slots, so a query's cosine
//! with a chunk follows from counting shared words (see `eval_runs.rs`). `far.md` opens with the
//! query's three words and goes on about other things; `near.md` shares two of them. Cut into
//! sentences, `far.md`'s first chunk is the query's best match (3 of 5 words); cut into one
//! chunk of all its sentences, its share of the query's words is diluted below `near.md`'s, so
//! hit@1 on "which source is about alpha bravo charlie" falls from 1 to 0.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fake_providers::FakeGoogle;
use crate::helpers::{TestApp, assert_error, id, on_fake_google, parse_sse, spawn_app_on, spawn_app_with};

macro_rules! on_both_stores {
    ($case:ident) => {
        mod $case {
            use super::*;

            #[tokio::test]
            async fn sqlite() {
                let fake = FakeGoogle::start(&["key-a"]).await;
                let app = spawn_app_with(on_fake_google(fake.base_url(), |_| {})).await;
                super::$case(app).await;
            }

            #[tokio::test]
            async fn postgres() {
                let Some(db) = crate::helpers::PgDatabase::create(concat!("reingest_gate::", stringify!($case))).await
                else {
                    return;
                };
                let fake = FakeGoogle::start(&["key-a"]).await;
                let app = spawn_app_on(db.url.clone(), on_fake_google(fake.base_url(), |_| {})).await;
                super::$case(app).await;
                db.drop_db().await;
            }
        }
    };
}

const FAR: &str = "Alpha bravo charlie delta echo. Golf hotel india juliet kilo. Lima mike november oscar papa. \
                   Quebec romeo sierra tango uniform. Victor whiskey xray yankee zulu.";
const NEAR: &str = "Alpha bravo amber basil cedar.";

/// A world cut into sentences with `far.md` and `near.md`, and a test set of one question whose
/// answer is `far.md`. Returns the world, the set and `far.md`'s id.
pub(crate) async fn world_and_set(app: &TestApp) -> (String, String, String) {
    let world = id(&app
        .create_google_world("Gated", json!({"chunking": crate::helpers::sentence_chunks()}))
        .await);
    let far = app.add_text(&world, "far.md", FAR).await;
    app.add_text(&world, "near.md", NEAR).await;
    app.drain().await;
    let far = far["source"]["id"].as_str().unwrap().to_owned();
    let (status, set) = app
        .post(
            &format!("/v1/worlds/{world}/evals"),
            json!({"name": "Far", "items": [
                {"query": "alpha bravo charlie", "expected": {"sources": [far]}},
            ]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{set}");
    (world, set["eval_id"].as_str().unwrap().to_owned(), far)
}

/// A re-ingest into one chunk per source (the worse chunking), gated on hit@1.
pub(crate) async fn worse_reingest(app: &TestApp, world: &str, eval: &str) -> Value {
    let (status, job) = app
        .post(
            &format!("/v1/worlds/{world}/reingest"),
            json!({"chunking": {"max_tokens": 200, "overlap_tokens": 0},
                   "gate": {"eval_id": eval, "settings": {"top_k": 1, "expand": "none"},
                            "metric": "hit_at_1", "tolerance": 0.5}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    assert_eq!(job["gate"]["state"], "waiting", "{job}");
    assert_eq!(job["gate"]["metric"], "hit_at_1");
    job
}

/// Embeds what is pending and reads the job until its gate decided (each read one step).
pub(crate) async fn decided(app: &TestApp, job: &str) -> Value {
    for _ in 0..300 {
        app.wait_prepared().await;
        app.drain().await;
        let (status, read) = app.get(&format!("/v1/jobs/{job}")).await;
        assert_eq!(status, StatusCode::OK, "{read}");
        if !["waiting", "evaluating"].contains(&read["gate"]["state"].as_str().unwrap()) {
            return read;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the gate did not decide");
}

/// The source of the best hit for the test set's question.
async fn best(app: &TestApp, world: &str) -> String {
    let (status, answer) = app
        .post(
            &format!("/v1/worlds/{world}/retrieve"),
            json!({"query": "alpha bravo charlie", "top_k": 1, "expand": "none"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    answer["results"][0]["source_id"].as_str().unwrap().to_owned()
}

async fn max_tokens(app: &TestApp, world: &str) -> Value {
    app.get(&format!("/v1/worlds/{world}")).await.1["chunking"]["max_tokens"].clone()
}

on_both_stores!(a_worse_chunking_is_held_and_the_old_run_serves_until_promoted);
async fn a_worse_chunking_is_held_and_the_old_run_serves_until_promoted(app: TestApp) {
    let (world, eval, far) = world_and_set(&app).await;
    assert_eq!(best(&app, &world).await, far);
    let job = worse_reingest(&app, &world, &eval).await;
    let job_id = id(&job);
    let held = decided(&app, &job_id).await;

    // Held: hit@1 fell from 1 to 0, past the tolerance of 0.5. The job says so.
    assert_eq!(held["status"], "held", "{held}");
    let gate = &held["gate"];
    assert_eq!(gate["state"], "held");
    assert_eq!(
        (gate["before"].as_f64(), gate["after"].as_f64()),
        (Some(1.0), Some(0.0)),
        "{gate}"
    );
    assert!(
        gate["reason"]
            .as_str()
            .unwrap()
            .contains("hit_at_1 dropped from 1.0000 to 0.0000"),
        "{gate}"
    );
    assert_eq!(held["counts"]["pending"], 0, "{held}");
    // The world still serves its sentence chunks.
    assert_eq!(max_tokens(&app, &world).await, 16);
    assert_eq!(best(&app, &world).await, far);
    // The listing shows it held, and a filter on `held` finds it.
    let (_, listed) = app.get(&format!("/v1/worlds/{world}/jobs?status=held")).await;
    assert_eq!(listed["jobs"].as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed["jobs"][0]["id"], job_id.as_str());
    let (_, running) = app.get(&format!("/v1/worlds/{world}/jobs?status=running")).await;
    assert_eq!(running["jobs"], json!([]), "{running}");

    // The gate's two runs are ordinary runs of the set, each naming the re-ingest; their
    // comparison lists the item that got worse.
    let (before, after) = (
        gate["before_run_id"].as_str().unwrap(),
        gate["after_run_id"].as_str().unwrap(),
    );
    let runs = format!("/v1/worlds/{world}/evals/{eval}/runs");
    let (_, read) = app.get(&format!("{runs}/{after}")).await;
    assert_eq!(read["status"], "completed", "{read}");
    assert_eq!(read["reingest_job_id"], job_id.as_str());
    assert_eq!(
        read["measured"]["max_tokens"], 200,
        "the run measured the new index: {read}"
    );
    let (_, read) = app.get(&format!("{runs}/{before}")).await;
    assert_eq!(read["measured"]["max_tokens"], 16, "{read}");
    let (status, compared) = app.get(&format!("{runs}/{before}/compare/{after}")).await;
    assert_eq!(status, StatusCode::OK, "{compared}");
    assert_eq!(compared["worse"].as_array().map(Vec::len), Some(1), "{compared}");

    // A held gate is decided by a person: discard and promote are offered, a second promote
    // is not.
    let promote = format!("/v1/worlds/{world}/reingest/{job_id}/promote");
    let (status, promoted) = app.post(&promote, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{promoted}");
    assert_eq!(promoted["status"], "completed", "{promoted}");
    assert_eq!(promoted["gate"]["state"], "promoted");
    assert_eq!(max_tokens(&app, &world).await, 200);
    assert_ne!(best(&app, &world).await, far, "the new run serves now");
    let (status, body) = app.post(&promote, json!({})).await;
    assert_error(status, &body, StatusCode::CONFLICT, "job_state_conflict");
    let (status, body) = app
        .post(&format!("/v1/worlds/{world}/reingest/{job_id}/discard"), json!({}))
        .await;
    assert_error(status, &body, StatusCode::CONFLICT, "job_state_conflict");

    // The job's events told of the hold, with the figures.
    let resp = (app.client.get(app.url(&format!("/v1/jobs/{job_id}/events"))))
        .bearer_auth(crate::helpers::TOKEN)
        .send()
        .await
        .unwrap();
    let events = parse_sse(&resp.text().await.unwrap());
    let warning = events
        .iter()
        .find(|e| e.1 == "warning" && e.2["code"] == "reingest_held")
        .unwrap_or_else(|| panic!("no held warning: {events:?}"));
    assert_eq!(
        (
            warning.2["metric"].as_str(),
            warning.2["before"].as_f64(),
            warning.2["after"].as_f64()
        ),
        (Some("hit_at_1"), Some(1.0), Some(0.0))
    );
    // Both decisions are in the audit log.
    let (_, audit) = app.get("/v1/audit?action=world.reingest_promoted").await;
    assert_eq!(audit["events"].as_array().map(Vec::len), Some(1), "{audit}");
}

on_both_stores!(a_discarded_reingest_leaves_the_world_as_it_was);
async fn a_discarded_reingest_leaves_the_world_as_it_was(app: TestApp) {
    let (world, eval, far) = world_and_set(&app).await;
    let stats = app.get(&format!("/v1/worlds/{world}")).await.1["stats"].clone();
    let job = worse_reingest(&app, &world, &eval).await;
    let job_id = id(&job);
    assert_eq!(decided(&app, &job_id).await["status"], "held");
    let (status, discarded) = app
        .post(&format!("/v1/worlds/{world}/reingest/{job_id}/discard"), json!({}))
        .await;
    assert_eq!(status, StatusCode::OK, "{discarded}");
    assert_eq!(discarded["status"], "cancelled", "{discarded}");
    assert_eq!(discarded["gate"]["state"], "discarded");
    assert_eq!(max_tokens(&app, &world).await, 16);
    assert_eq!(best(&app, &world).await, far);
    // The new run is gone: a fresh re-ingest may start, and the world's counts are its own.
    let (_, read) = app.get(&format!("/v1/worlds/{world}")).await;
    assert_eq!(read["stats"], stats, "{read}");
    let (status, again) = app
        .post(
            &format!("/v1/worlds/{world}/reingest"),
            json!({"chunking": {"overlap_tokens": 0}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{again}");
    assert_eq!(again["gate"], Value::Null);
    // Promote and discard are for gated re-ingests only.
    let again = id(&again);
    for verb in ["promote", "discard"] {
        let (status, body) = app
            .post(&format!("/v1/worlds/{world}/reingest/{again}/{verb}"), json!({}))
            .await;
        assert_error(status, &body, StatusCode::CONFLICT, "job_state_conflict");
        assert!(body["error"]["message"].as_str().unwrap().contains("no gate"), "{body}");
    }
}

on_both_stores!(a_reingest_that_scores_as_well_switches_by_itself);
async fn a_reingest_that_scores_as_well_switches_by_itself(app: TestApp) {
    let (world, eval, far) = world_and_set(&app).await;
    // Sentences still: the same chunks under a new run, hit@1 stays 1.
    let (status, job) = app
        .post(
            &format!("/v1/worlds/{world}/reingest"),
            json!({"chunking": {"max_tokens": 17, "overlap_tokens": 0},
                   "gate": {"eval_id": eval, "settings": {"top_k": 1}, "metric": "hit_at_1"}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    let done = decided(&app, &id(&job)).await;
    assert_eq!(done["gate"]["state"], "passed", "{done}");
    assert_eq!(
        (done["gate"]["before"].as_f64(), done["gate"]["after"].as_f64()),
        (Some(1.0), Some(1.0))
    );
    assert_eq!(done["status"], "completed", "{done}");
    assert_eq!(max_tokens(&app, &world).await, 17);
    assert_eq!(best(&app, &world).await, far);
}

on_both_stores!(bad_gates_are_refused_with_the_field_named_and_write_nothing);
async fn bad_gates_are_refused_with_the_field_named_and_write_nothing(app: TestApp) {
    let (world, eval, _) = world_and_set(&app).await;
    let missing = uuid::Uuid::new_v4();
    let gate = |extra: Value| {
        let mut gate = json!({"eval_id": eval, "metric": "hit_at_1"});
        gate.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
        json!({"chunking": {"max_tokens": 200}, "gate": gate})
    };
    let cases = [
        (
            gate(json!({"tolerance": 1.5})),
            StatusCode::BAD_REQUEST,
            "invalid_request",
            Some("gate.tolerance"),
        ),
        (
            gate(json!({"tolerance": -0.1})),
            StatusCode::BAD_REQUEST,
            "invalid_request",
            Some("gate.tolerance"),
        ),
        (
            gate(json!({"budget": 0})),
            StatusCode::BAD_REQUEST,
            "invalid_request",
            Some("gate.budget"),
        ),
        (
            gate(json!({"settings": {"top_k": 5000}})),
            StatusCode::BAD_REQUEST,
            "invalid_retrieval_settings",
            Some("gate.settings.top_k"),
        ),
        (
            gate(json!({"settings": {"hnsw_ef": 1}})),
            StatusCode::BAD_REQUEST,
            "invalid_retrieval_settings",
            Some("gate.settings.hnsw_ef"),
        ),
        // The set names sources only: an answer metric has nothing to judge.
        (
            gate(json!({"metric": "answer_share"})),
            StatusCode::BAD_REQUEST,
            "invalid_request",
            Some("gate.metric"),
        ),
        (
            gate(json!({"metric": "recall"})),
            StatusCode::BAD_REQUEST,
            "invalid_request",
            None,
        ),
        (
            gate(json!({"colour": "red"})),
            StatusCode::BAD_REQUEST,
            "invalid_request",
            None,
        ),
        (
            json!({"gate": [eval, "hit_at_1"]}),
            StatusCode::BAD_REQUEST,
            "invalid_request",
            None,
        ),
        (
            gate(json!({"eval_id": missing})),
            StatusCode::NOT_FOUND,
            "eval_not_found",
            None,
        ),
    ];
    for (body, status, code, field) in cases {
        let (got, answer) = app.post(&format!("/v1/worlds/{world}/reingest"), body.clone()).await;
        assert_error(got, &answer, status, code);
        if let Some(field) = field {
            assert_eq!(answer["error"]["details"]["field"], field, "{body}: {answer}");
        }
    }
    // Nothing was written: no job, no run of the set, and the world as it was.
    let (_, jobs) = app.get(&format!("/v1/worlds/{world}/jobs?status=queued,running")).await;
    assert_eq!(jobs["jobs"], json!([]), "{jobs}");
    let (_, runs) = app.get(&format!("/v1/worlds/{world}/evals/{eval}/runs")).await;
    assert_eq!(runs["runs"], json!([]), "{runs}");
    assert_eq!(max_tokens(&app, &world).await, 16);
    // Another world's re-ingest is not found through this one.
    let other = id(&app.create_google_world("Other", json!({})).await);
    let job = worse_reingest(&app, &world, &eval).await;
    let (status, body) = app
        .post(&format!("/v1/worlds/{other}/reingest/{}/promote", id(&job)), json!({}))
        .await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "job_not_found");
}

on_both_stores!(a_gate_without_its_set_holds_and_a_cancelled_reingest_closes_its_gate);
async fn a_gate_without_its_set_holds_and_a_cancelled_reingest_closes_its_gate(app: TestApp) {
    let (world, eval, far) = world_and_set(&app).await;
    let job = worse_reingest(&app, &world, &eval).await;
    let job_id = id(&job);
    // The set goes (and its runs with it) before the new run is embedded: nothing can be
    // measured, so the gate holds, saying why, and the world keeps its run.
    let (status, _) = app.delete(&format!("/v1/worlds/{world}/evals/{eval}")).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let held = decided(&app, &job_id).await;
    assert_eq!(held["status"], "held", "{held}");
    assert_eq!(
        (&held["gate"]["before"], &held["gate"]["after"]),
        (&Value::Null, &Value::Null)
    );
    assert!(held["gate"]["reason"].as_str().unwrap().contains("deleted"), "{held}");
    assert_eq!(best(&app, &world).await, far);
    // Cancelling the job the usual way is a discard: the runner closes the gate.
    let (status, cancelled) = app.post(&format!("/v1/jobs/{job_id}/cancel"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    assert_eq!(cancelled["status"], "cancelled");
    for _ in 0..200 {
        let (_, read) = app.get(&format!("/v1/jobs/{job_id}")).await;
        if read["gate"]["state"] == "discarded" {
            assert!(read["gate"]["reason"].as_str().unwrap().contains("ended"), "{read}");
            assert_eq!(max_tokens(&app, &world).await, 16);
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the cancelled re-ingest's gate stayed open");
}
