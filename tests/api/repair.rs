//! Repair: `POST /v1/worlds/{id}/repair` and the startup reconciliation bring manifests and
//! points back into agreement — missing points re-embedded, stale and orphan points deleted,
//! entries whose point is already right marked embedded without a provider call.

use std::time::{Duration, Instant};

use quarry::domain::{RunId, SourceId, WorldId, point_id};
use quarry::vector::{Point, PointPayload};
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::assert_error;
use crate::retrieval::{ISLES, Setup, id, sentence, setup, texts};

/// Polls a job until `done(job)` holds (10 s at most).
async fn wait_for_job(s: &Setup, job: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (status, body) = s.app.get(&format!("/v1/jobs/{job}")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        if done(&body) {
            return body;
        }
        assert!(Instant::now() < deadline, "job never got there: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn world_id(s: &Setup) -> WorldId {
    WorldId(uuid::Uuid::parse_str(&s.world_id()).unwrap())
}

async fn start_repair(s: &Setup) -> Value {
    let (status, job) = s
        .app
        .post(&format!("/v1/worlds/{}/repair", s.world_id()), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    assert_eq!(job["kind"], "repair");
    job
}

/// The point id of the chunk whose text is `text`, read through retrieval.
async fn point_of(s: &Setup, text: &str) -> uuid::Uuid {
    let answer = s.ok(json!({"query": text, "top_k": 1})).await;
    assert_eq!(texts(&answer), [text]);
    uuid::Uuid::parse_str(answer["results"][0]["point_id"].as_str().unwrap()).unwrap()
}

#[tokio::test]
async fn repair_reembeds_missing_points_and_deletes_stale_and_orphan_ones() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let collection = s.world["collection"].as_str().unwrap().to_owned();
    let vectors = &s.app.deps.vectors;

    // 1. A point lost from the vector store, of a chunk embedded before the store kept vectors
    //    (a point whose vector is kept is written again without the provider: kept_vectors.rs).
    let lost = point_of(&s, &sentence(1)).await;
    vectors.delete_points(&collection, &[lost]).await.unwrap();
    s.sql(
        "DELETE FROM chunk_vectors WHERE chunk_id IN (SELECT id FROM chunks WHERE chunk_text = ?)",
        &[sentence(1).as_str()],
    )
    .await;
    // 2. A chunk whose text changed under its point.
    let changed = "The river cities of the south trade glass and silk.";
    s.rewrite_chunk(&sentence(2), changed).await;
    // 3. A point of this world that no chunk backs (an old run's leftover).
    let (old_run, source) = (RunId::new(), SourceId::new());
    let orphan = point_id(world_id(&s), old_run, source, 0);
    vectors
        .upsert(
            &collection,
            vec![Point {
                id: orphan,
                dense: vec![1.0; 768],
                sparse: None,
                payload: PointPayload {
                    world_id: world_id(&s),
                    run_id: old_run,
                    source_id: source,
                    book_number: 9,
                    chunk_number: 0,
                    text_sha256: "0".repeat(64),
                    token_count: 3,
                },
            }],
        )
        .await
        .unwrap();
    assert_eq!(s.point_count().await, 6);
    s.fake.reset_stats();

    let job = start_repair(&s).await;
    let job = wait_for_job(&s, &id(&job), |j| j["counts"]["total"] == 2).await;
    assert_eq!(job["status"], "running", "two slots wait for the workers: {job}");
    assert_eq!(s.point_count().await, 4, "the stale and the orphan point are gone");
    assert_eq!(s.stats().await["pending"], 2);

    s.app.drain().await;
    let job = wait_for_job(&s, &id(&job), |j| j["status"] == "completed").await;
    assert_eq!(job["counts"]["embedded"], 2);
    let sent = s.fake.stats().sent_texts();
    assert_eq!(sent.len(), 2, "only the two damaged slots were embedded: {sent:?}");
    assert!(sent.contains(&changed.to_owned()) && sent.contains(&sentence(1)));
    assert_eq!(s.point_count().await, 6);
    assert_eq!(s.stats().await["embedded"], 6);
    let answer = s.ok(json!({"query": "glass and silk", "top_k": 1})).await;
    assert_eq!(texts(&answer), [changed]);

    // The job's events tell what was found.
    let (_, events) = s.app.get(&format!("/v1/jobs/{}", id(&job))).await;
    assert_eq!(events["kind"], "repair");
    let again = start_repair(&s).await;
    let again = wait_for_job(&s, &id(&again), |j| j["status"] == "completed").await;
    assert_eq!(again["counts"]["total"], 0, "a healthy world needs nothing: {again}");
}

/// As if the process died after writing every point but before recording any of it: entries
/// pending again (no vector kept either), the ingest job running with nothing counted.
async fn forget_what_was_embedded(s: &Setup) {
    s.sql(
        "UPDATE manifest_entries SET state = 'pending', embedded_text_sha256 = NULL",
        &[],
    )
    .await;
    s.sql("DELETE FROM chunk_vectors", &[]).await;
    s.sql(
        "UPDATE jobs SET status = 'running', embedded = 0, finished_at = NULL",
        &[],
    )
    .await;
}

#[tokio::test]
async fn lost_manifest_state_is_rebuilt_from_the_points_without_provider_calls() {
    let s = setup().await;
    let accepted = s.add("isles.txt", ISLES).await;
    s.app.drain().await;
    s.fake.reset_stats();
    forget_what_was_embedded(&s).await;
    assert_eq!(s.stats().await["embedded"], 0);

    let job = start_repair(&s).await;
    wait_for_job(&s, &id(&job), |j| j["status"] == "completed").await;
    let ingest = wait_for_job(&s, &id(&accepted["job"]), |j| j["status"] == "completed").await;
    assert_eq!(ingest["counts"]["embedded"], 6, "{ingest}");
    assert_eq!(s.stats().await["embedded"], 6);
    assert_eq!(s.fake.stats().requests, 0, "no provider call");
    assert_eq!(s.point_count().await, 6);
    // Each adopted entry keeps its point's vector, so a later loss of the points is restored
    // without a provider call too.
    let world = world_id(&s);
    let run = s.app.deps.store.get_world(world).await.unwrap().unwrap().active_run;
    let entries = s
        .app
        .state
        .store
        .manifest_entries(world, run, chrono::Utc::now())
        .await
        .unwrap();
    let chunks: Vec<_> = entries.iter().map(|e| e.chunk_id).collect();
    let kept = s.app.deps.store.kept_points(world, run, &chunks).await.unwrap();
    assert_eq!(kept.len(), 6, "a kept vector per adopted entry");
    let collection = s.world["collection"].as_str().unwrap().to_owned();
    let points: Vec<uuid::Uuid> = entries.iter().map(|e| e.point_id).collect();
    s.app.deps.vectors.delete_points(&collection, &points).await.unwrap();
    let job = start_repair(&s).await;
    wait_for_job(&s, &id(&job), |j| j["status"] == "completed").await;
    assert_eq!(s.point_count().await, 6);
    assert_eq!(s.fake.stats().requests, 0, "restored from the kept vectors");
}

#[tokio::test]
async fn startup_repair_finishes_what_a_crash_left_behind() {
    let s = setup().await;
    let accepted = s.add("isles.txt", ISLES).await;
    s.app.drain().await;
    forget_what_was_embedded(&s).await;
    s.fake.reset_stats();

    let Setup { fake, app, world } = s;
    let app = app.restart().await;
    let s = Setup { fake, app, world };
    let ingest = wait_for_job(&s, &id(&accepted["job"]), |j| j["status"] == "completed").await;
    assert_eq!(ingest["counts"]["embedded"], 6);
    assert_eq!(s.stats().await["embedded"], 6);
    assert_eq!(s.fake.stats().requests, 0);
}

#[tokio::test]
async fn a_reingest_stopped_before_its_sources_were_chunked_is_finished_at_startup() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    // What a crash right after the 202 leaves: the new run and its queued job, nothing chunked.
    let wid = WorldId(uuid::Uuid::parse_str(&s.world_id()).unwrap());
    let world = s.app.deps.store.get_world(wid).await.unwrap().unwrap();
    let run = quarry::store::NewRun {
        id: RunId::new(),
        world: wid,
        embedding: world.embedding.clone(),
        chunking: quarry::domain::ChunkingProfile {
            max_tokens: 40,
            overlap_tokens: 0,
            parent_max_tokens: 160,
            context_prefix: false,
        },
    };
    let job = s
        .app
        .state
        .store
        .begin_reingest(run, quarry::domain::JobId::new(), None, chrono::Utc::now())
        .await
        .unwrap();
    assert_eq!(job.status, quarry::domain::JobStatus::Queued);

    let Setup { fake, app, world } = s;
    let base = fake.base_url();
    let app = app
        .restart_with(move |s| {
            s.providers.google.base_url = base;
            s.providers.google.keys = vec![secrecy::SecretString::from("key-a")];
        })
        .await;
    let s = Setup { fake, app, world };
    let done = wait_for_job(&s, &job.id.0.to_string(), |j| j["status"] == "completed").await;
    assert!(done["counts"]["total"].as_u64().unwrap() > 0, "{done}");
    let (_, world) = s.app.get(&format!("/v1/worlds/{}", s.world_id())).await;
    assert_eq!(world["chunking"]["max_tokens"], 40, "{world}");
    assert_eq!(world["stats"]["embedded"], world["stats"]["chunks"], "{world}");
}

/// Stops the app, deletes `collection`'s folder from the embedded vector store (as a wiped
/// disk would), and starts a new process on the same files, without background workers and
/// with a startup repair unless `startup_repair` is false.
async fn restart_without_collection(s: Setup, collection: &str, startup_repair: bool) -> Setup {
    let Setup { fake, mut app, world } = s;
    app.stop().await;
    let folder = app.vectors_path().join(collection);
    assert!(folder.is_dir(), "{folder:?}");
    std::fs::remove_dir_all(&folder).unwrap();
    let base = fake.base_url();
    let app = app
        .restart_with(move |s| {
            s.providers.google.base_url = base;
            s.providers.google.keys = vec![secrecy::SecretString::from("key-a")];
            s.embedding.workers = 0;
            s.embedding.repair_on_startup = startup_repair;
        })
        .await;
    Setup { fake, app, world }
}

/// Drains the workers until `job` is completed (20 s at most) and returns it.
async fn drain_until_completed(s: &Setup, job: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        s.app.drain().await;
        let (_, body) = s.app.get(&format!("/v1/jobs/{job}")).await;
        if body["status"] == "completed" {
            return body;
        }
        assert!(Instant::now() < deadline, "the job never completed: {body}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A world embedded before the store kept vectors (kept_vectors.rs has the case with them): its
/// lost vectors can only be embedded again.
#[tokio::test]
async fn a_collection_lost_from_the_vector_store_is_made_again_and_refilled_at_startup() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    s.sql("DELETE FROM chunk_vectors", &[]).await;
    let collection = s.world["collection"].as_str().unwrap().to_owned();
    let s = restart_without_collection(s, &collection, true).await;
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        s.app.drain().await;
        if s.point_count().await == 6 {
            break;
        }
        assert!(Instant::now() < deadline, "the collection was not refilled");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        s.fake.stats().items_embedded >= 6,
        "the lost vectors were embedded again"
    );
    let answer = s.ok(json!({"query": "who rules the northern isles", "top_k": 1})).await;
    assert_eq!(texts(&answer), [sentence(0)]);
    assert_eq!(s.stats().await["embedded"], 6);
}

#[tokio::test]
async fn retrieval_from_a_lost_collection_is_503_until_a_repair_makes_it_again() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let collection = s.world["collection"].as_str().unwrap().to_owned();
    let s = restart_without_collection(s, &collection, false).await;
    // Not an empty answer: the world says six chunks are embedded, and they cannot be searched.
    let (status, body) = s.retrieve(json!({"query": "who rules the northern isles"})).await;
    let error = assert_error(
        status,
        &body,
        StatusCode::SERVICE_UNAVAILABLE,
        "vector_store_unavailable",
    );
    let message = error["message"].as_str().unwrap();
    assert!(message.contains(&collection) && message.contains("repair"), "{message}");

    let job = start_repair(&s).await;
    drain_until_completed(&s, &id(&job)).await;
    let answer = s.ok(json!({"query": "who rules the northern isles", "top_k": 1})).await;
    assert_eq!(texts(&answer), [sentence(0)]);
}

#[tokio::test]
async fn a_lost_collection_of_a_reingest_into_another_profile_is_made_again_at_startup() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let (status, job) = s
        .app
        .post(
            &format!("/v1/worlds/{}/reingest", s.world_id()),
            json!({"embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 256}}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    s.app.wait_prepared().await;
    let job = id(&job);
    let runs = s.app.deps.store.world_runs(world_id(&s)).await.unwrap();
    let building = runs
        .iter()
        .find(|r| r.status == quarry::domain::RunStatus::Building)
        .expect("the re-ingest's run")
        .collection
        .clone();
    assert_ne!(building, s.world["collection"].as_str().unwrap());

    // The new profile's collection is lost while the process is down, before anything of the
    // new run was embedded into it.
    let s = restart_without_collection(s, &building, true).await;
    let done = drain_until_completed(&s, &job).await;
    assert_eq!(done["counts"]["failed"], 0, "{done}");
    let (_, after) = s.app.get(&format!("/v1/worlds/{}", s.world_id())).await;
    assert_eq!(after["embedding"]["dimensions"], 256, "{after}");
    assert_eq!(after["collection"], building.as_str());
    assert_eq!(after["stats"]["embedded"], after["stats"]["chunks"], "{after}");
    let answer = s.ok(json!({"query": "who rules the northern isles", "top_k": 1})).await;
    assert_eq!(texts(&answer), [sentence(0)]);
}

#[tokio::test]
async fn repair_requests_made_while_one_is_under_way_get_its_job() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let path = format!("/v1/worlds/{}/repair", s.world_id());
    let requests = (0..8).map(|_| s.app.post(&path, json!({})));
    let answers = futures_util::future::join_all(requests).await;
    let mut jobs: Vec<String> = answers
        .iter()
        .map(|(status, job)| {
            assert_eq!(*status, StatusCode::ACCEPTED, "{job}");
            id(job)
        })
        .collect();
    jobs.sort();
    jobs.dedup();
    assert!(jobs.len() < 8, "passes were shared, not one per request: {jobs:?}");
    for job in &jobs {
        drain_until_completed(&s, job).await;
    }
    // Once it is over, a new request starts a new pass.
    let again = start_repair(&s).await;
    assert!(!jobs.contains(&id(&again)));
}

#[tokio::test]
async fn repairing_an_unknown_world_is_404() {
    let s = setup().await;
    let (status, body) = s
        .app
        .post(&format!("/v1/worlds/{}/repair", uuid::Uuid::new_v4()), json!({}))
        .await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "world_not_found");
}
