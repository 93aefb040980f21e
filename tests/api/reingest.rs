//! Re-ingest: `POST /v1/worlds/{id}/reingest` builds a new run from the stored sources beside
//! the active one, retrieval keeps serving the old run until the new one is complete, then the
//! world switches profile and run at once and the old run's points and rows go.

use quarry::domain::WorldId;
use quarry::vector::PointFilter;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::fake_providers::Failure;
use crate::helpers::assert_error;
use crate::retrieval::{ISLES, Setup, id, setup, texts};

fn wid(s: &Setup) -> WorldId {
    WorldId(uuid::Uuid::parse_str(&s.world_id()).unwrap())
}

async fn points_in(s: &Setup, collection: &str) -> u64 {
    s.app
        .state
        .vectors
        .count(collection, PointFilter::world(wid(s)))
        .await
        .unwrap()
}

async fn reingest(s: &Setup, body: Value) -> (StatusCode, Value) {
    s.app.post(&format!("/v1/worlds/{}/reingest", s.world_id()), body).await
}

async fn world(s: &Setup) -> Value {
    let (status, world) = s.app.get(&format!("/v1/worlds/{}", s.world_id())).await;
    assert_eq!(status, StatusCode::OK);
    world
}

const NEW_PROFILE: &str = r#"{"embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 256},
    "chunking": {"max_tokens": 40, "overlap_tokens": 0}}"#;

#[tokio::test]
async fn the_world_switches_to_the_new_profile_only_when_the_new_run_is_complete() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let old_collection = s.world["collection"].as_str().unwrap().to_owned();
    let (status, job) = reingest(&s, serde_json::from_str(NEW_PROFILE).unwrap()).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    assert_eq!(
        (
            job["kind"].as_str(),
            job["status"].as_str(),
            job["counts"]["total"].as_u64()
        ),
        (Some("reingest"), Some("queued"), Some(0)),
        "the sources are chunked after the answer"
    );
    assert!(job["started_at"].is_null(), "not started while queued: {job}");
    s.app.wait_prepared().await;
    let (_, job) = s.app.get(&format!("/v1/jobs/{}", id(&job))).await;
    assert_eq!(job["status"], "running", "{job}");
    assert!(job["started_at"].as_str() >= job["created_at"].as_str(), "{job}");
    let new_chunks = job["counts"]["total"].as_u64().unwrap();
    assert!((1..6).contains(&new_chunks), "bigger chunks, fewer of them: {job}");
    // Each source's parents went into the new run with its chunks.
    let without = s.app.deps.store.sources_without_parents().await.unwrap();
    assert!(without.is_empty(), "{without:?}");

    // Until the new run is embedded, nothing changes for readers.
    let before = world(&s).await;
    assert_eq!(before["embedding"]["dimensions"], 768);
    assert_eq!(before["collection"], old_collection.as_str());
    assert_eq!(before["stats"]["chunks"], 6);
    let answer = s
        .ok(json!({"query": "who rules the northern isles", "top_k": 10}))
        .await;
    assert_eq!(answer["effective_top_k"], 6);

    s.app.drain().await;
    let (_, job) = s.app.get(&format!("/v1/jobs/{}", id(&job))).await;
    assert_eq!(job["status"], "completed", "{job}");
    let after = world(&s).await;
    assert_eq!(after["embedding"]["dimensions"], 256);
    // A new chunk size brings the default parent size with it: four chunks.
    assert_eq!(
        after["chunking"],
        json!({"max_tokens": 40, "overlap_tokens": 0, "parent_max_tokens": 160, "context_prefix": false})
    );
    let new_collection = after["collection"].as_str().unwrap().to_owned();
    assert_ne!(new_collection, old_collection);
    assert_eq!(after["stats"]["chunks"], new_chunks);
    assert_eq!(after["stats"]["embedded"], new_chunks);
    assert_eq!(points_in(&s, &old_collection).await, 0, "the old run's points are gone");
    assert_eq!(points_in(&s, &new_collection).await, new_chunks);

    // New chunks were embedded in document mode at the new size; retrieval serves them.
    let calls = s.fake.stats().embed_calls;
    let documents: Vec<_> = calls
        .iter()
        .filter(|c| c.task_types.iter().all(|t| t.as_deref() == Some("RETRIEVAL_DOCUMENT")))
        .collect();
    assert!(documents.iter().all(|c| c.dimensions.iter().all(|d| *d == Some(256))));
    let answer = s
        .ok(json!({"query": "who rules the northern isles", "top_k": 10}))
        .await;
    assert_eq!(answer["effective_top_k"], new_chunks);
    assert!(texts(&answer)[0].contains("Queen Maren"), "{answer}");
    // That query had a head start on the old run (768 dimensions), thrown away when the store
    // named the new one; the answer came from a query embedded again at 256.
    let retrieval = s.app.state.retrieval.head_starts();
    assert_eq!((retrieval.used, retrieval.discarded), (0, 1));
    let queries: Vec<_> = s
        .fake
        .stats()
        .embed_calls
        .into_iter()
        .filter(|c| c.task_types.iter().all(|t| t.as_deref() == Some("RETRIEVAL_QUERY")))
        .map(|c| c.dimensions)
        .collect();
    assert_eq!(queries.last(), Some(&vec![Some(256)]), "{queries:?}");
    assert!(texts(&answer)[0].len() > "Queen Maren rules the northern isles from a tower of salt.".len());
}

#[tokio::test]
async fn a_source_added_during_a_reingest_is_part_of_the_new_run() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let (status, job) = reingest(&s, json!({"chunking": {"max_tokens": 40, "overlap_tokens": 0}})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    let late = s
        .add("late.txt", "Glass towers shine in the desert of the far south.")
        .await;
    s.app.drain().await;
    let (_, job) = s.app.get(&format!("/v1/jobs/{}", id(&job))).await;
    assert_eq!(job["status"], "completed", "{job}");
    let (_, late_job) = s.app.get(&format!("/v1/jobs/{}", id(&late["job"]))).await;
    assert_eq!(late_job["status"], "completed", "{late_job}");
    let after = world(&s).await;
    assert_eq!(after["chunking"]["max_tokens"], 40);
    assert_eq!(after["stats"]["sources"], 2);
    assert_eq!(after["stats"]["pending"], 0);
    let answer = s.ok(json!({"query": "glass towers in the desert", "top_k": 1})).await;
    assert_eq!(texts(&answer), ["Glass towers shine in the desert of the far south."]);
    assert_eq!(answer["results"][0]["book_number"], 2);
}

#[tokio::test]
async fn bad_reingest_requests_are_refused_and_write_nothing() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let cases = [
        (
            json!({"embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 7}}),
            "invalid_embedding_profile",
        ),
        (
            json!({"embedding": {"provider": "nope", "model": "x"}}),
            "invalid_embedding_profile",
        ),
        (
            json!({"chunking": {"max_tokens": 40, "overlap_tokens": 39}}),
            "invalid_chunking_profile",
        ),
        (json!({"chunking": {"max_tokens": 5}}), "invalid_chunking_profile"),
        (json!({"hybrid": true}), "invalid_request"),
    ];
    for (body, code) in cases {
        let (status, answer) = reingest(&s, body.clone()).await;
        assert_error(status, &answer, StatusCode::BAD_REQUEST, code);
    }
    let (status, answer) = reingest(
        &s,
        json!({"embedding": {"provider": "openai", "model": "text-embedding-3-small"}}),
    )
    .await;
    assert_error(status, &answer, StatusCode::CONFLICT, "no_eligible_provider_key");
    let (status, answer) = s
        .app
        .post(&format!("/v1/worlds/{}/reingest", uuid::Uuid::new_v4()), json!({}))
        .await;
    assert_error(status, &answer, StatusCode::NOT_FOUND, "world_not_found");
    let (_, jobs) = s.app.get(&format!("/v1/worlds/{}/jobs", s.world_id())).await;
    assert_eq!(jobs["jobs"].as_array().unwrap().len(), 1, "only the ingest job: {jobs}");

    // One re-ingest at a time.
    let (status, _) = reingest(&s, json!({"chunking": {"max_tokens": 40}})).await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let (status, answer) = reingest(&s, json!({"chunking": {"max_tokens": 30}})).await;
    assert_error(status, &answer, StatusCode::CONFLICT, "job_state_conflict");
    let (_, jobs) = s.app.get(&format!("/v1/worlds/{}/jobs", s.world_id())).await;
    let reingests = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["kind"] == "reingest")
        .count();
    assert_eq!(reingests, 1, "the refused one made no job: {jobs}");
    s.app.drain().await;
    assert_eq!(
        world(&s).await["chunking"]["max_tokens"],
        40,
        "the first one's profile, not 30"
    );
}

#[tokio::test]
async fn a_cancelled_reingest_leaves_the_world_as_it_was() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let before = world(&s).await;
    let (_, job) = reingest(&s, serde_json::from_str(NEW_PROFILE).unwrap()).await;
    s.app.wait_prepared().await;
    let new_collection = "chunks_google_gemini-embedding-001_256";
    // Cancel while the provider is still answering: the late answer must leave nothing behind.
    s.fake.set_latency(std::time::Duration::from_millis(400));
    let in_flight = s.app.spawn_work_step("w");
    tokio::time::sleep(std::time::Duration::from_millis(150)).await;
    let (status, cancelled) = s.app.post(&format!("/v1/jobs/{}/cancel", id(&job)), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    assert_eq!(cancelled["status"], "cancelled");
    let step = in_flight.await.unwrap();
    assert!(step.claimed > 0, "the worker was mid-flight");
    assert_eq!(step.embedded, 0, "a late answer after cancel advances nothing");
    let mut after = world(&s).await;
    after["updated_at"] = before["updated_at"].clone();
    assert_eq!(after, before);
    assert_eq!(
        points_in(&s, new_collection).await,
        0,
        "the abandoned run's points are gone"
    );
    let answer = s
        .ok(json!({"query": "who rules the northern isles", "top_k": 10}))
        .await;
    assert_eq!(answer["effective_top_k"], 6);
}

#[tokio::test]
async fn an_ingest_job_taken_over_by_a_reingest_ends_its_event_stream_with_its_status() {
    let s = setup().await;
    let accepted = s.add("isles.txt", ISLES).await;
    let ingest = id(&accepted["job"]);
    let (status, _) = s.app.post(&format!("/v1/jobs/{ingest}/pause"), json!({})).await;
    assert_eq!(status, StatusCode::OK);
    let (status, job) = reingest(&s, json!({"chunking": {"max_tokens": 40, "overlap_tokens": 0}})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    s.app.drain().await;
    let (_, taken_over) = s.app.get(&format!("/v1/jobs/{ingest}")).await;
    assert_eq!(
        taken_over["status"], "completed",
        "the new run holds its source: {taken_over}"
    );

    let statuses = |events: &[(i64, String, Value)]| -> Vec<Value> {
        events
            .iter()
            .filter(|(_, kind, _)| kind == "status")
            .map(|(_, _, data)| data["status"].clone())
            .collect()
    };
    let events = s.app.job_events(&ingest).await;
    assert_eq!(statuses(&events), ["running", "paused", "completed"], "{events:?}");
    assert_eq!(events.last().unwrap().1, "status");
    let events = s.app.job_events(&id(&job)).await;
    assert_eq!(statuses(&events), ["queued", "running", "completed"], "{events:?}");
    assert_eq!(events.last().unwrap().1, "status");
}

/// Several sources, so that a pause can land while they are being chunked.
const BOOKS: [(&str, &str); 4] = [
    ("one.txt", ISLES),
    (
        "two.txt",
        "Glass towers shine in the desert of the far south. Caravans cross it by night.",
    ),
    (
        "three.txt",
        "The western hills are full of copper. Miners sing while they dig.",
    ),
    (
        "four.txt",
        "Storms come from the east every autumn. The harbours close for a month.",
    ),
];

#[tokio::test]
async fn a_reingest_paused_while_its_sources_are_chunked_completes_after_resume() {
    let s = setup().await;
    s.ingest(&BOOKS).await;
    let (status, job) = reingest(&s, json!({"chunking": {"max_tokens": 40, "overlap_tokens": 0}})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    let path = format!("/v1/jobs/{}", id(&job));
    // Wherever the chunking is when the pause lands, it stops there.
    let (status, paused) = s.app.post(&format!("{path}/pause"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{paused}");
    s.app.drain().await;
    let (_, still) = s.app.get(&path).await;
    assert_eq!(still["status"], "paused", "{still}");
    assert_eq!(world(&s).await["chunking"]["max_tokens"], 16, "nothing switched");

    let (status, resumed) = s.app.post(&format!("{path}/resume"), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{resumed}");
    s.app.drain().await;
    let (_, done) = s.app.get(&path).await;
    assert_eq!(done["status"], "completed", "{done}");
    let after = world(&s).await;
    assert_eq!(after["chunking"]["max_tokens"], 40);
    assert_eq!(after["stats"]["sources"], 4);
    assert_eq!(
        after["stats"]["embedded"], after["stats"]["chunks"],
        "every source is in the new run: {after}"
    );
    let answer = s
        .ok(json!({"query": "copper miners in the western hills", "top_k": 1}))
        .await;
    assert!(texts(&answer)[0].contains("copper"), "{answer}");
}

#[tokio::test]
async fn a_reingest_cancelled_before_its_sources_are_chunked_builds_nothing() {
    let s = setup().await;
    s.ingest(&BOOKS).await;
    let before = world(&s).await;
    let (_, job) = reingest(&s, json!({"chunking": {"max_tokens": 40, "overlap_tokens": 0}})).await;
    let (status, cancelled) = s.app.post(&format!("/v1/jobs/{}/cancel", id(&job)), json!({})).await;
    assert_eq!(status, StatusCode::OK, "{cancelled}");
    s.app.drain().await;
    let mut after = world(&s).await;
    after["updated_at"] = before["updated_at"].clone();
    assert_eq!(after, before);
    let wid = wid(&s);
    let runs = s.app.deps.store.world_runs(wid).await.unwrap();
    assert!(
        runs.iter().all(|r| r.status != quarry::domain::RunStatus::Building),
        "{runs:?}"
    );
    let (_, job) = s.app.get(&format!("/v1/jobs/{}", id(&job))).await;
    assert_eq!(job["status"], "cancelled");
    assert_eq!(s.fake.stats().requests, 0, "nothing was embedded for it");
}

#[tokio::test]
async fn of_reingests_requested_at_once_one_starts_and_the_rest_are_refused() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let answers = futures_util::future::join_all(
        (0..6).map(|i| reingest(&s, json!({"chunking": {"max_tokens": 30 + i, "overlap_tokens": 0}}))),
    )
    .await;
    let started: Vec<&Value> = answers
        .iter()
        .filter(|(status, _)| *status == StatusCode::ACCEPTED)
        .map(|(_, job)| job)
        .collect();
    assert_eq!(started.len(), 1, "{answers:?}");
    for (status, answer) in answers.iter().filter(|(status, _)| *status != StatusCode::ACCEPTED) {
        assert_error(*status, answer, StatusCode::CONFLICT, "job_state_conflict");
    }
    let (_, jobs) = s.app.get(&format!("/v1/worlds/{}/jobs", s.world_id())).await;
    let reingests: Vec<&Value> = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|j| j["kind"] == "reingest")
        .collect();
    assert_eq!(reingests.len(), 1, "{jobs}");
    s.app.drain().await;
    let (_, job) = s.app.get(&format!("/v1/jobs/{}", id(started[0]))).await;
    assert_eq!(job["status"], "completed", "{job}");
}

#[tokio::test]
async fn a_reingest_with_failed_chunks_fails_and_keeps_the_old_run() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let before = world(&s).await;
    // One big chunk, refused for good.
    let (_, job) = reingest(&s, json!({"chunking": {"max_tokens": 512, "overlap_tokens": 0}})).await;
    s.app.wait_prepared().await;
    let (_, job) = s.app.get(&format!("/v1/jobs/{}", id(&job))).await;
    assert_eq!(job["counts"]["total"], 1);
    s.fake.fail_next(Failure::Status(400));
    s.app.drain().await;
    let (_, job) = s.app.get(&format!("/v1/jobs/{}", id(&job))).await;
    assert_eq!(job["status"], "failed", "{job}");
    assert_eq!(job["errors"][0]["code"], "provider_error");
    let after = world(&s).await;
    assert_eq!(after["chunking"], before["chunking"]);
    assert_eq!(after["stats"], before["stats"]);
    assert_eq!(after["collection"], before["collection"]);
    let answer = s
        .ok(json!({"query": "who rules the northern isles", "top_k": 10}))
        .await;
    assert_eq!(answer["effective_top_k"], 6);
}

/// SQLite's busy timeout in the app's store (a write that waits longer fails "unavailable").
const BUSY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

#[tokio::test]
async fn a_reingest_whose_chunking_meets_a_locked_database_starts_again_and_completes() {
    use sqlx::{ConnectOptions as _, Connection as _};
    let s = setup().await;
    // One long source, so that its chunking outlasts the few reads before it: the lock below is
    // taken before the preparation's first write.
    let text: String = (0..4000)
        .map(|i| format!("Record {i} says the copper miners of the western hills dug deeper that year. "))
        .collect();
    s.add("long.txt", &text).await;
    let options: sqlx::sqlite::SqliteConnectOptions = s.app.store_url().parse().unwrap();
    let mut holder = options.connect().await.unwrap();

    let (status, job) = reingest(&s, json!({"chunking": {"max_tokens": 512, "overlap_tokens": 0}})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    sqlx::query("BEGIN IMMEDIATE").execute(&mut holder).await.unwrap();
    let path = format!("/v1/jobs/{}", id(&job));
    // Held past the busy timeout: the preparation's write fails as the store being unavailable.
    tokio::time::sleep(BUSY_TIMEOUT + std::time::Duration::from_secs(2)).await;
    let (_, waiting) = s.app.get(&path).await;
    assert_eq!(
        (waiting["status"].as_str(), waiting["counts"]["total"].as_u64()),
        (Some("queued"), Some(0)),
        "nothing could be written while the database was locked: {waiting}"
    );
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    holder.close().await.unwrap();

    s.app.drain().await;
    let (_, done) = s.app.get(&path).await;
    assert_eq!(done["status"], "completed", "{done}");
    let after = world(&s).await;
    assert_eq!(after["chunking"]["max_tokens"], 512);
    assert_eq!(after["stats"]["embedded"], after["stats"]["chunks"], "{after}");
}

#[tokio::test]
async fn deleting_sources_during_a_reingest_leaves_it_to_switch_and_never_stuck() {
    let s = setup().await;
    s.ingest(&BOOKS[..2]).await;
    let (status, job) = reingest(&s, json!({"chunking": {"max_tokens": 40, "overlap_tokens": 0}})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    s.app.wait_prepared().await;
    let path = format!("/v1/jobs/{}", id(&job));
    let (_, sources) = s.app.get(&format!("/v1/worlds/{}/sources", s.world_id())).await;
    let ids: Vec<String> = sources["sources"].as_array().unwrap().iter().map(id).collect();

    // One of two sources goes: the re-ingest carries on with the other.
    let (status, _) = s
        .app
        .delete(&format!("/v1/worlds/{}/sources/{}", s.world_id(), ids[0]))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, running) = s.app.get(&path).await;
    assert_eq!(running["status"], "running", "{running}");
    // The last one goes too: nothing is left to embed, so the re-ingest switches (to a world
    // with no sources) rather than ending without its switch.
    let (status, _) = s
        .app
        .delete(&format!("/v1/worlds/{}/sources/{}", s.world_id(), ids[1]))
        .await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (_, done) = s.app.get(&path).await;
    assert_eq!(done["status"], "completed", "{done}");
    let after = world(&s).await;
    assert_eq!(after["chunking"]["max_tokens"], 40, "{after}");
    assert_eq!(after["stats"]["sources"], 0);
    let runs = s.app.deps.store.world_runs(wid(&s)).await.unwrap();
    assert!(
        runs.iter().all(|r| r.status != quarry::domain::RunStatus::Building),
        "no run is left half-built: {runs:?}"
    );
    // So another re-ingest can start.
    let (status, body) = reingest(&s, json!({"chunking": {"max_tokens": 30, "overlap_tokens": 0}})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{body}");
}

#[tokio::test]
async fn a_source_uploaded_while_a_reingest_switches_is_cut_with_the_new_profile() {
    let s = setup().await;
    // A world of large chunks, so that a big upload is slow to split but quick to store.
    let (status, world) = s
        .app
        .post(
            "/v1/worlds",
            json!({"name": "Big", "embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 768},
                   "chunking": {"max_tokens": 1500, "overlap_tokens": 0}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{world}");
    let path = format!("/v1/worlds/{}", id(&world));
    let (status, _) = s
        .app
        .post(
            &format!("{path}/sources"),
            json!({"filename": "isles.txt", "text": ISLES}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    s.app.drain().await;
    let new = quarry::domain::ChunkingProfile {
        max_tokens: 100,
        overlap_tokens: 0,
        parent_max_tokens: 400,
        context_prefix: false,
    };
    let (status, job) = s
        .app
        .post(
            &format!("{path}/reingest"),
            json!({"chunking": {"max_tokens": 100, "overlap_tokens": 0}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    s.app.wait_prepared().await;
    // The upload is split with the profile the world had when the request read it (1,500
    // tokens), while the re-ingest embeds its run and switches the world to 100-token chunks.
    let text: String = (0..50_000)
        .map(|i| format!("Sentence {i} tells of the keeper and the lamp. "))
        .collect();
    let upload = {
        let (client, text) = (s.app.client.clone(), text.clone());
        let url = s.app.url(&format!("{path}/sources"));
        tokio::spawn(async move {
            let resp = client
                .post(url)
                .bearer_auth(crate::helpers::TOKEN)
                .json(&json!({"filename": "big.txt", "text": text}))
                .send()
                .await
                .unwrap();
            crate::helpers::read(resp).await
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    s.app.drain().await;
    let (status, accepted) = upload.await.unwrap();
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    eprintln!(
        "upload run {} reingest run {}",
        accepted["job"]["run_id"], job["run_id"]
    );
    s.app.drain().await;
    let (_, job) = s.app.get(&format!("/v1/jobs/{}", id(&job))).await;
    assert_eq!(job["status"], "completed", "{job}");
    // Whichever side of the switch the upload landed on, its chunks in the world's run are cut
    // with the new profile (before, chunks cut for the old run could be written into the new).
    let (_, got) = s.app.get(&format!("{path}/sources/{}", id(&accepted["source"]))).await;
    assert_eq!(got["chunks"], quarry::chunking::split(&text, new).len(), "{got}");
    let (_, world) = s.app.get(&path).await;
    assert_eq!(world["chunking"]["max_tokens"], 100);
}

#[tokio::test]
async fn a_query_that_spans_the_switch_is_answered_from_the_new_run_not_empty() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let (status, job) = reingest(&s, json!({"chunking": {"max_tokens": 40, "overlap_tokens": 0}})).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    s.app.wait_prepared().await;
    // The query reads the world (old run) and waits 1.5 s for its embedding; meanwhile the
    // re-ingest embeds its run, switches the world and removes the old run's points and rows.
    s.fake.set_latency(std::time::Duration::from_millis(1500));
    let query = {
        let (client, url) = (
            s.app.client.clone(),
            s.app.url(&format!("/v1/worlds/{}/retrieve", s.world_id())),
        );
        tokio::spawn(async move {
            let resp = client
                .post(url)
                .bearer_auth(crate::helpers::TOKEN)
                .json(&json!({"query": "Who looks after the lighthouse?", "top_k": 3}))
                .send()
                .await
                .unwrap();
            crate::helpers::read(resp).await
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    s.fake.set_latency(std::time::Duration::ZERO);
    s.app.drain().await;
    let (_, job) = s.app.get(&format!("/v1/jobs/{}", id(&job))).await;
    assert_eq!(job["status"], "completed", "{job}");
    let (status, answer) = query.await.unwrap();
    assert_eq!(status, StatusCode::OK, "{answer}");
    // Answered whole from the new run (40-token chunks: fewer of them), with nothing missing.
    let results = answer["results"].as_array().unwrap();
    assert!(!results.is_empty(), "{answer}");
    assert_eq!(json!(results.len()), answer["effective_top_k"], "{answer}");
    assert_eq!(answer["warnings"], json!([]), "{answer}");
    let (_, chunks) = s
        .app
        .get(&format!(
            "/v1/worlds/{}/sources/{}/chunks",
            s.world_id(),
            results[0]["source_id"].as_str().unwrap()
        ))
        .await;
    assert!(
        chunks["chunks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["chunk_text"] == results[0]["chunk_text"]),
        "a chunk of the world's run now: {answer}"
    );
}
