//! Retrieval: `POST /v1/worlds/{id}/retrieve` against the real app, a fake Google server that
//! counts calls and records task types, and the embedded vector store.

use std::time::Duration;

use quarry::domain::WorldId;
use quarry::vector::PointFilter;
use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};
use sha2::Digest as _;

use crate::fake_providers::{Failure, FakeGoogle};
use crate::helpers::{TestApp, assert_error, on_fake_google, spawn_app_with};

/// One sentence per chunk at `max_tokens: 16`.
pub const ISLES: &str = "Queen Maren rules the northern isles from a tower of salt. \
    Her fleet guards the cold straits every winter. \
    The river cities of the south trade amber and wool. \
    Their councils elect a speaker every spring. \
    The dragons of the east sleep under the glacier. \
    Miners dig copper in the western hills.";

pub struct Setup {
    pub fake: FakeGoogle,
    pub app: TestApp,
    pub world: Value,
}

impl Setup {
    pub fn world_id(&self) -> String {
        id(&self.world)
    }

    pub fn path(&self) -> String {
        format!("/v1/worlds/{}/retrieve", self.world_id())
    }

    pub async fn retrieve(&self, body: Value) -> (StatusCode, Value) {
        self.app.post(&self.path(), body).await
    }

    /// Retrieves and expects 200.
    pub async fn ok(&self, body: Value) -> Value {
        let (status, answer) = self.retrieve(body).await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        answer
    }

    pub async fn add(&self, filename: &str, text: &str) -> Value {
        add_to(&self.app, &self.world, filename, text).await
    }

    /// Adds sources, embeds everything and forgets the provider calls made so far.
    pub async fn ingest(&self, sources: &[(&str, &str)]) {
        for (filename, text) in sources {
            self.add(filename, text).await;
        }
        self.app.drain().await;
        self.fake.reset_stats();
    }

    pub async fn stats(&self) -> Value {
        let (_, world) = self.app.get(&format!("/v1/worlds/{}", self.world_id())).await;
        world["stats"].clone()
    }

    pub async fn point_count(&self) -> u64 {
        let wid = WorldId(uuid::Uuid::parse_str(&self.world_id()).unwrap());
        self.app
            .state
            .vectors
            .count(self.world["collection"].as_str().unwrap(), PointFilter::world(wid))
            .await
            .unwrap()
    }

    /// Runs SQL on the app's SQLite file, under the API (to corrupt what the API never would).
    pub async fn sql(&self, statement: &'static str, binds: &[&str]) {
        use sqlx::ConnectOptions as _;
        let options: sqlx::sqlite::SqliteConnectOptions = self.app.store_url().parse().unwrap();
        let mut conn = options.foreign_keys(true).connect().await.unwrap();
        let mut query = sqlx::query(statement);
        for b in binds {
            query = query.bind(*b);
        }
        let done = query.execute(&mut conn).await.unwrap();
        assert!(done.rows_affected() > 0, "`{statement}` changed nothing");
    }
}

pub fn id(v: &Value) -> String {
    v["id"].as_str().unwrap().to_owned()
}

async fn add_to(app: &TestApp, world: &Value, filename: &str, text: &str) -> Value {
    let (status, accepted) = app
        .post(
            &format!("/v1/worlds/{}/sources", id(world)),
            json!({"filename": filename, "text": text}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    accepted
}

async fn create_world(app: &TestApp, name: &str, hybrid: bool) -> Value {
    let (status, world) = app
        .post(
            "/v1/worlds",
            json!({"name": name, "embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 768},
                   "chunking": {"max_tokens": 16, "overlap_tokens": 0}, "hybrid": hybrid}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{world}");
    world
}

/// A fake Google server with one key, an app on it without background workers (tests drain
/// the queue themselves) and a world with one sentence per chunk.
async fn setup_with(hybrid: bool) -> Setup {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let base = fake.base_url();
    let app = spawn_app_with(move |s| {
        s.providers.google.base_url = base;
        s.providers.google.keys = vec![SecretString::from("key-a")];
        s.providers.google.scheduling.acquire_timeout_s = 1;
        s.providers.google.scheduling.query_wait_s = 1;
        s.embedding.workers = 0;
    })
    .await;
    let world = create_world(&app, "Aerth", hybrid).await;
    Setup { fake, app, world }
}

pub async fn setup() -> Setup {
    setup_with(false).await
}

pub fn texts(answer: &Value) -> Vec<String> {
    answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["chunk_text"].as_str().unwrap().to_owned())
        .collect()
}

fn scores(answer: &Value) -> Vec<f64> {
    answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["score"].as_f64().unwrap())
        .collect()
}

fn context(answer: &Value) -> Vec<String> {
    answer["context"]["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect()
}

fn warning_codes(answer: &Value) -> Vec<String> {
    answer["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["code"].as_str().unwrap().to_owned())
        .collect()
}

pub fn sentence(n: usize) -> String {
    let sentences: Vec<&str> = ISLES.split_inclusive(". ").map(str::trim).collect();
    sentences[n].to_owned()
}

#[tokio::test]
async fn settings_are_refused_before_the_world_is_looked_up() {
    let s = setup().await;
    let unknown = format!("/v1/worlds/{}/retrieve", uuid::Uuid::new_v4());
    let cases = [
        (json!({"query": "q", "top_k": -1}), "top_k"),
        (json!({"query": "q", "top_k": true}), "top_k"),
        (json!({"query": "q", "top_k": "8"}), "top_k"),
        (json!({"query": "q", "top_k": 2.5}), "top_k"),
        (json!({"query": "q", "top_k": 1001}), "top_k"),
        (json!({"query": "q", "min_score": 1.5}), "min_score"),
        (json!({"query": "q", "min_score": -0.1}), "min_score"),
        (json!({"query": "q", "min_score": false}), "min_score"),
        (json!({"query": "q", "min_score": "0.3"}), "min_score"),
        (json!({"query": "q", "mode": "sparse"}), "mode"),
        (json!({"query": "q", "neighbors": 4}), "neighbors"),
        (json!({"query": "q", "neighbors": true}), "neighbors"),
        (json!({"query": "q", "max_context_tokens": 0}), "max_context_tokens"),
        (
            json!({"query": "q", "max_context_tokens": 1_048_577}),
            "max_context_tokens",
        ),
        (json!({"query": "q", "max_context_tokens": "800"}), "max_context_tokens"),
        (json!({"query": "q", "max_context_tokens": 1.5}), "max_context_tokens"),
    ];
    for (body, field) in cases {
        for path in [&unknown, &s.path()] {
            let (status, answer) = s.app.post(path, body.clone()).await;
            let error = assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_retrieval_settings");
            assert_eq!(error["details"]["field"], field, "{body}: {answer}");
        }
    }
    // Structural problems are generic request errors, also before any lookup.
    for (body, field) in [
        (json!({"query": "q", "topk": 3}), "topk"),
        (json!({"top_k": 3}), "query"),
        (json!({"query": 7}), "query"),
    ] {
        let (status, answer) = s.app.post(&unknown, body.clone()).await;
        let error = assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(error["details"]["field"], field, "{body}: {answer}");
    }
    // Only an object: not an array, not even one that lists every field in order.
    for body in [json!(["query"]), json!(["who rules", 8, null, null, null, null])] {
        let (status, answer) = s.app.post(&unknown, body).await;
        assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_request");
    }
    // A repeated field is refused as on every other route, not silently resolved.
    let resp = s
        .app
        .client
        .post(s.app.url(&unknown))
        .bearer_auth(crate::helpers::TOKEN)
        .header("content-type", "application/json")
        .body(r#"{"query": "a", "query": "b"}"#)
        .send()
        .await
        .unwrap();
    let (status, answer) = crate::helpers::read(resp).await;
    let error = assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_request");
    assert!(
        error["message"].as_str().unwrap().contains("duplicate field"),
        "{answer}"
    );
    // Valid settings on an unknown world: 404. An explicit null is "not set" (what generated
    // clients send for an unset optional field), so it passes validation too.
    for body in [
        json!({"query": "q", "top_k": 3}),
        json!({"query": "q", "top_k": null, "min_score": null, "mode": null, "neighbors": null,
               "max_context_tokens": null}),
    ] {
        let (status, answer) = s.app.post(&unknown, body).await;
        assert_error(status, &answer, StatusCode::NOT_FOUND, "world_not_found");
    }
    assert_eq!(s.fake.stats().requests, 0, "nothing reached the provider");
}

#[tokio::test]
async fn null_settings_take_their_defaults() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let (status, answer) = s
        .retrieve(
            json!({"query": "who keeps the lighthouse", "top_k": null, "min_score": null,
                         "mode": null, "neighbors": null, "max_context_tokens": null}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["requested_top_k"], 8, "{answer}");
    assert!(!answer["results"].as_array().unwrap().is_empty(), "{answer}");
}

#[tokio::test]
async fn a_blank_query_is_refused_after_the_world_and_before_any_provider_call() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    for query in ["", "   ", " \n\t "] {
        let (status, answer) = s.retrieve(json!({"query": query})).await;
        let error = assert_error(status, &answer, StatusCode::BAD_REQUEST, "empty_query");
        assert_eq!(error["details"]["field"], "query");
    }
    // An unknown world wins over a blank query: the world is looked up first.
    let (status, answer) = s
        .app
        .post(
            &format!("/v1/worlds/{}/retrieve", uuid::Uuid::new_v4()),
            json!({"query": " "}),
        )
        .await;
    assert_error(status, &answer, StatusCode::NOT_FOUND, "world_not_found");
    assert_eq!(s.fake.stats().requests, 0);
}

#[tokio::test]
async fn top_k_zero_returns_the_empty_shape_without_any_call() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let answer = s
        .ok(json!({"query": "who rules the northern isles?", "top_k": 0}))
        .await;
    assert_eq!(answer["results"], json!([]));
    assert_eq!(answer["context"], json!({"chunks": [], "text": ""}));
    assert_eq!(answer["requested_top_k"], 0);
    assert_eq!(answer["effective_top_k"], 0);
    assert_eq!(answer["warnings"], json!([]));
    assert_eq!(answer["repairs"], json!([]));
    for phase in ["embed_ms", "search_ms", "verify_ms"] {
        assert_eq!(answer["timing"][phase], 0.0, "{answer}");
    }
    assert!(answer["timing"]["total_ms"].is_number());
    assert_eq!(s.fake.stats().requests, 0, "no provider call for top_k = 0");
}

#[tokio::test]
async fn a_world_without_embedded_chunks_warns_and_spends_no_provider_call() {
    let s = setup().await;
    // Empty world, then a world whose only source is still pending.
    for _ in 0..2 {
        let answer = s.ok(json!({"query": "who rules the northern isles?"})).await;
        assert_eq!(answer["results"], json!([]));
        assert_eq!(answer["context"]["chunks"], json!([]));
        assert_eq!(answer["requested_top_k"], 8);
        assert_eq!(answer["effective_top_k"], 0);
        assert_eq!(warning_codes(&answer), ["no_embedded_chunks"]);
        s.add("isles.txt", ISLES).await;
    }
    assert_eq!(s.fake.stats().requests, 0, "no provider call without embedded chunks");
}

#[tokio::test]
async fn the_best_passage_comes_first_with_every_field_from_the_store() {
    let s = setup().await;
    let accepted = s.add("isles.txt", ISLES).await;
    s.app.drain().await;
    s.fake.reset_stats();
    let source = &accepted["source"];
    let chunks = source["chunks"].as_u64().unwrap();
    assert_eq!(chunks, 6, "one sentence per chunk: {source}");

    let answer = s
        .ok(json!({"query": "  Who rules the northern isles?  ", "top_k": 3}))
        .await;
    assert_eq!(answer["requested_top_k"], 3);
    assert_eq!(answer["effective_top_k"], 3);
    let results = answer["results"].as_array().unwrap();
    assert!(!results.is_empty() && results.len() <= 3, "{answer}");
    let best = &results[0];
    assert_eq!(best["chunk_text"], sentence(0));
    assert_eq!(best["source_id"], source["id"]);
    assert_eq!(best["source_filename"], "isles.txt");
    assert_eq!(best["book_number"], 1);
    assert_eq!(best["chunk_number"], 0);
    assert_eq!(best["overlap_text"], "");
    let (start, end) = (
        best["char_start"].as_u64().unwrap() as usize,
        best["char_end"].as_u64().unwrap() as usize,
    );
    let slice: String = ISLES.chars().skip(start).take(end - start).collect();
    assert_eq!(best["chunk_text"], slice);
    for field in ["chunk_id", "point_id"] {
        assert!(uuid::Uuid::parse_str(best[field].as_str().unwrap()).is_ok(), "{field}");
    }
    let scores: Vec<f64> = results.iter().map(|r| r["score"].as_f64().unwrap()).collect();
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "sorted by score: {scores:?}");
    assert!(scores[0] > 0.3 && scores[0] <= 1.0001, "{scores:?}");
    for phase in ["embed_ms", "search_ms", "verify_ms", "total_ms"] {
        assert!(answer["timing"][phase].as_f64().unwrap() >= 0.0);
    }

    // The stripped query went out once, in query mode, at the world's dimensions.
    let stats = s.fake.stats();
    assert_eq!(stats.embed_calls.len(), 1);
    let call = &stats.embed_calls[0];
    assert_eq!(call.texts, ["Who rules the northern isles?"]);
    assert_eq!(call.task_types, [Some("RETRIEVAL_QUERY".to_owned())]);
    assert_eq!(call.dimensions, [Some(768)]);
    assert_eq!(call.key.as_deref(), Some("key-a"));
}

#[tokio::test]
async fn top_k_is_clamped_to_the_embedded_chunks() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let answer = s.ok(json!({"query": "northern isles", "top_k": 50})).await;
    assert_eq!(answer["requested_top_k"], 50);
    assert_eq!(answer["effective_top_k"], 6);
    assert_eq!(answer["results"].as_array().unwrap().len(), 6);

    // Chunks still pending do not count.
    s.add("more.txt", "Glass towers shine in the desert of the far south.")
        .await;
    let answer = s.ok(json!({"query": "northern isles", "top_k": 50})).await;
    assert_eq!(answer["effective_top_k"], 6);
    assert!(
        !texts(&answer).iter().any(|t| t.contains("Glass")),
        "pending chunks are never returned"
    );
}

#[tokio::test]
async fn min_score_is_applied_inside_the_search() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let all = s.ok(json!({"query": "who rules the northern isles", "top_k": 6})).await;
    let scores = scores(&all);
    assert_eq!(scores.len(), 6);
    let threshold = (scores[0] + scores[1]) / 2.0;
    let answer = s
        .ok(json!({"query": "who rules the northern isles", "top_k": 6, "min_score": threshold}))
        .await;
    assert_eq!(texts(&answer), [sentence(0)], "only hits above the threshold come back");
    assert_eq!(
        answer["effective_top_k"], 6,
        "the clamp does not depend on the threshold"
    );
    let answer = s
        .ok(json!({"query": "who rules the northern isles", "min_score": 1.0}))
        .await;
    assert_eq!(answer["results"], json!([]));
    assert_eq!(
        answer["warnings"],
        json!([]),
        "an empty answer above the threshold is not a warning"
    );
}

/// A letters-only word that the fake embeds at the same position as `word` with the opposite
/// sign, at a position no word of `elsewhere` touches.
fn opposite_of(word: &str, elsewhere: &str, dimensions: usize) -> String {
    let target = crate::fake_providers::fake_vector(word, dimensions);
    let slot = target.iter().position(|x| *x != 0.0).unwrap();
    assert_eq!(
        crate::fake_providers::fake_vector(elsewhere, dimensions)[slot],
        0.0,
        "`{word}` shares its position with the other chunks; pick another word"
    );
    let letters = b"abcdefghijklmnopqrstuvwxyz";
    for a in letters {
        for b in letters {
            for c in letters {
                let candidate = String::from_utf8(vec![*a, *b, *c]).unwrap();
                let v = crate::fake_providers::fake_vector(&candidate, dimensions);
                if v[slot] * target[slot] < 0.0 {
                    return candidate;
                }
            }
        }
    }
    panic!("no three-letter word lands opposite `{word}`");
}

#[tokio::test]
async fn the_default_min_score_keeps_out_hits_scoring_below_zero() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let rest: String = (1..6).map(sentence).collect::<Vec<_>>().join(" ");
    // The query points away from the first chunk (a negative cosine) and is orthogonal to the
    // other five (a score of exactly 0).
    let query = opposite_of("queen", &rest, 768);
    let answer = s.ok(json!({"query": query, "top_k": 6})).await;
    let scores = scores(&answer);
    assert!(scores.iter().all(|x| *x >= 0.0), "{answer}");
    assert_eq!(
        scores.len(),
        5,
        "the five orthogonal chunks meet min_score 0.0: {answer}"
    );
    assert!(!texts(&answer).contains(&sentence(0)), "{answer}");
    assert_eq!(answer["effective_top_k"], 6);
    let explicit = s.ok(json!({"query": query, "top_k": 6, "min_score": 0.0})).await;
    assert_eq!(
        texts(&explicit),
        texts(&answer),
        "0.0 given or left out is the same threshold"
    );
}

#[tokio::test]
async fn equal_scores_are_ordered_by_book_then_chunk_number() {
    let s = setup().await;
    let twice = "Queen Maren rules the northern isles from a tower of salt. \
                 Queen Maren rules the northern isles from a tower of salt.";
    s.ingest(&[("one.txt", twice), ("two.txt", twice), ("other.txt", ISLES)])
        .await;
    for _ in 0..3 {
        let answer = s.ok(json!({"query": "who rules the northern isles", "top_k": 4})).await;
        let order: Vec<(u64, u64)> = answer["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| (r["book_number"].as_u64().unwrap(), r["chunk_number"].as_u64().unwrap()))
            .collect();
        let scores = scores(&answer);
        assert!(
            scores.iter().all(|x| (x - scores[0]).abs() < 1e-6),
            "a four-way tie: {scores:?}"
        );
        assert_eq!(order, [(1, 0), (1, 1), (2, 0), (2, 1)]);
    }
}

#[tokio::test]
async fn context_holds_chunk_text_only() {
    let s = setup().await;
    let (status, world) = s
        .app
        .post(
            "/v1/worlds",
            json!({"name": "Overlapping", "embedding": {"provider": "google", "model": "gemini-embedding-001", "dimensions": 768},
                   "chunking": {"max_tokens": 16, "overlap_tokens": 6}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{world}");
    add_to(&s.app, &world, "isles-secret-name.txt", ISLES).await;
    s.app.drain().await;
    let (status, answer) = s
        .app
        .post(
            &format!("/v1/worlds/{}/retrieve", id(&world)),
            json!({"query": "the river cities trade amber and wool", "top_k": 2}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    let results = answer["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    assert!(
        results.iter().any(|r| !r["overlap_text"].as_str().unwrap().is_empty()),
        "overlap exists in results: {answer}"
    );
    assert_eq!(
        context(&answer),
        texts(&answer),
        "context = the selected chunk texts, in rank order"
    );
    let text = answer["context"]["text"].as_str().unwrap();
    assert_eq!(text, texts(&answer).join("\n\n"));
    assert!(!text.contains("isles-secret-name"), "no filenames in the context");
    assert!(!text.contains("score"), "no scores in the context");
    let overlap = results[0]["overlap_text"].as_str().unwrap();
    if !overlap.is_empty() {
        assert!(!text.starts_with(overlap), "no overlap text carried into the context");
    }
}

#[tokio::test]
async fn neighbors_stitch_chunks_of_the_same_source_in_reading_order() {
    let s = setup().await;
    s.ingest(&[
        ("isles.txt", ISLES),
        ("other.txt", "Glass towers shine in the far south desert."),
    ])
    .await;
    let query = "river cities of the south trade amber and wool";
    let answer = s.ok(json!({"query": query, "top_k": 1, "neighbors": 1})).await;
    assert_eq!(texts(&answer), [sentence(2)]);
    assert_eq!(context(&answer), [sentence(1), sentence(2), sentence(3)]);

    // At the start of a source there is nothing before.
    let answer = s
        .ok(json!({"query": "Queen Maren rules the northern isles", "top_k": 1, "neighbors": 2}))
        .await;
    assert_eq!(context(&answer), [sentence(0), sentence(1), sentence(2)]);

    // Two adjacent hits share one passage, in reading order, with no chunk twice.
    let answer = s
        .ok(json!({"query": "councils elect a speaker every spring; river cities trade amber", "top_k": 2, "neighbors": 1}))
        .await;
    let hits: Vec<u64> = answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["chunk_number"].as_u64().unwrap())
        .collect();
    let mut sorted = hits.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, [2, 3], "{answer}");
    assert_eq!(context(&answer), [sentence(1), sentence(2), sentence(3), sentence(4)]);
    assert_eq!(
        answer["context"]["text"],
        [sentence(1), sentence(2), sentence(3), sentence(4)].join("\n\n")
    );
}

#[tokio::test]
async fn the_context_keeps_within_its_token_budget_and_the_results_stay_whole() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let (_, sources) = s.app.get(&format!("/v1/worlds/{}/sources", s.world_id())).await;
    let source = sources["sources"][0]["id"].as_str().unwrap().to_owned();
    let (_, chunks) = s
        .app
        .get(&format!("/v1/worlds/{}/sources/{source}/chunks", s.world_id()))
        .await;
    let tokens: Vec<u64> = chunks["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["token_count"].as_u64().unwrap())
        .collect();
    let query = "river cities of the south trade amber and wool";
    let ask = |budget: u64| json!({"query": query, "top_k": 1, "neighbors": 1, "max_context_tokens": budget});

    // Room for the whole passage: no warning.
    let answer = s.ok(ask(tokens[1] + tokens[2] + tokens[3])).await;
    assert_eq!(context(&answer), [sentence(1), sentence(2), sentence(3)]);
    assert!(warning_codes(&answer).is_empty(), "{answer}");

    // Room for the hit and one neighbour: the nearer ones tie, the earlier one comes first.
    let answer = s.ok(ask(tokens[2] + tokens[1])).await;
    assert_eq!(context(&answer), [sentence(1), sentence(2)]);
    assert_eq!(warning_codes(&answer), ["context_truncated"], "{answer}");
    assert!(
        answer["warnings"][0]["message"].as_str().unwrap().contains("1 chunk"),
        "{answer}"
    );

    // Room for the hit only, then for nothing at all: the results never change.
    let answer = s.ok(ask(tokens[2])).await;
    assert_eq!(context(&answer), [sentence(2)]);
    let answer = s.ok(ask(tokens[2] - 1)).await;
    assert_eq!(context(&answer), Vec::<String>::new());
    assert_eq!(answer["context"]["text"], "");
    assert_eq!(texts(&answer), [sentence(2)], "results are not cut: {answer}");
    assert_eq!(warning_codes(&answer), ["context_truncated"]);
}

#[tokio::test]
async fn the_configured_context_budget_applies_when_the_request_names_none() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let app = spawn_app_with(on_fake_google(fake.base_url(), |s| s.retrieval.max_context_tokens = 1)).await;
    let world = create_world(&app, "Tight", false).await;
    let s = Setup { fake, app, world };
    s.ingest(&[("isles.txt", ISLES)]).await;
    let answer = s.ok(json!({"query": "who rules the northern isles", "top_k": 3})).await;
    assert_eq!(texts(&answer).len(), 3);
    assert_eq!(context(&answer), Vec::<String>::new());
    assert_eq!(warning_codes(&answer), ["context_truncated"]);
    let answer = s
        .ok(json!({"query": "who rules the northern isles", "top_k": 3, "max_context_tokens": 1000}))
        .await;
    assert_eq!(context(&answer).len(), 3, "the request's budget wins");
}

#[tokio::test]
async fn two_worlds_with_similar_text_never_see_each_other() {
    let s = setup().await;
    let other = create_world(&s.app, "Other", false).await;
    assert_eq!(other["collection"], s.world["collection"], "one shared collection");
    add_to(&s.app, &other, "isles.txt", ISLES).await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let (_, mine) = s.app.get(&format!("/v1/worlds/{}/sources", s.world_id())).await;
    let mine = mine["sources"][0]["id"].clone();
    let answer = s
        .ok(json!({"query": "who rules the northern isles", "top_k": 50}))
        .await;
    assert_eq!(answer["effective_top_k"], 6);
    let results = answer["results"].as_array().unwrap();
    assert_eq!(results.len(), 6);
    assert!(results.iter().all(|r| r["source_id"] == mine), "{answer}");
    let (status, theirs) = s
        .app
        .post(
            &format!("/v1/worlds/{}/retrieve", id(&other)),
            json!({"query": "who rules the northern isles", "top_k": 50}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        theirs["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["source_id"] != mine)
    );
}

/// `/metrics`' `quarry_retrieval_head_starts_total`: (used, discarded).
async fn head_starts(app: &TestApp) -> (u64, u64) {
    let response = app.client.get(app.url("/metrics")).send().await.unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let text = response.text().await.unwrap();
    let value = |outcome: &str| -> u64 {
        let prefix = format!("quarry_retrieval_head_starts_total{{outcome=\"{outcome}\"}} ");
        text.lines()
            .find_map(|line| line.strip_prefix(prefix.as_str()))
            .unwrap_or_else(|| panic!("no `{outcome}` head starts in {text}"))
            .parse()
            .unwrap()
    };
    (value("used"), value("discarded"))
}

#[tokio::test]
async fn a_known_world_is_searched_while_the_store_is_read_and_answers_the_same() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let query = json!({"query": "who rules the northern isles?", "top_k": 3});
    let first = s.ok(query.clone()).await;
    assert_eq!(
        head_starts(&s.app).await,
        (0, 0),
        "nothing is known before a first answer"
    );
    let second = s.ok(query.clone()).await;
    assert_eq!(head_starts(&s.app).await, (1, 0));
    for field in [
        "results",
        "context",
        "requested_top_k",
        "effective_top_k",
        "warnings",
        "repairs",
    ] {
        assert_eq!(second[field], first[field], "{field}");
    }
    assert!(second["timing"]["embed_ms"].as_f64().unwrap() > 0.0, "{second}");
    assert!(second["timing"]["search_ms"].as_f64().unwrap() > 0.0, "{second}");
    assert_eq!(s.fake.stats().embed_calls.len(), 2, "one provider call per query");

    // Requests the checks refuse or answer without a search get no head start and no call.
    let (status, body) = s.retrieve(json!({"query": "   "})).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "empty_query");
    let (status, body) = s.retrieve(json!({"query": "isles", "mode": "hybrid"})).await;
    assert_error(status, &body, StatusCode::BAD_REQUEST, "invalid_retrieval_settings");
    let zero = s.ok(json!({"query": "isles", "top_k": 0})).await;
    assert_eq!(zero["results"], json!([]));
    assert_eq!(s.fake.stats().embed_calls.len(), 2);
    assert_eq!(head_starts(&s.app).await, (1, 0));

    // The head start's clamp comes from the fresh count: a larger top_k than the previous
    // answer's still finds every embedded chunk.
    let all = s
        .ok(json!({"query": "who rules the northern isles?", "top_k": 50}))
        .await;
    assert_eq!(all["effective_top_k"], 6);
    assert_eq!(all["results"].as_array().unwrap().len(), 6);
    assert_eq!(head_starts(&s.app).await, (2, 0));
}

#[tokio::test]
async fn a_head_start_on_a_world_that_changed_is_thrown_away() {
    let s = setup().await;
    let accepted = s.add("isles.txt", ISLES).await;
    s.app.drain().await;
    let query = json!({"query": "who rules the northern isles?"});
    s.ok(query.clone()).await;

    // The world's only source goes: the next answer is the empty one, from the fresh count.
    let source = format!("/v1/worlds/{}/sources/{}", s.world_id(), id(&accepted["source"]));
    let (status, _) = s.app.delete(&source).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let answer = s.ok(query.clone()).await;
    assert_eq!(warning_codes(&answer), ["no_embedded_chunks"]);
    assert_eq!(answer["results"], json!([]));
    assert_eq!(answer["effective_top_k"], 0);
    assert_eq!(head_starts(&s.app).await, (0, 1));
    // Known to be empty now: no head start, no provider call.
    s.fake.reset_stats();
    let answer = s.ok(query.clone()).await;
    assert_eq!(warning_codes(&answer), ["no_embedded_chunks"]);
    assert_eq!(s.fake.stats().requests, 0);
    assert_eq!(head_starts(&s.app).await, (0, 1));

    // Filled again and asked once (no head start: it was known empty), then deleted.
    s.ingest(&[("isles.txt", ISLES)]).await;
    let answer = s.ok(query.clone()).await;
    assert_eq!(texts(&answer)[0], sentence(0));
    assert_eq!(head_starts(&s.app).await, (0, 1));
    let (status, _) = s.app.delete(&format!("/v1/worlds/{}", s.world_id())).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = s.retrieve(query.clone()).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "world_not_found");
    assert_eq!(head_starts(&s.app).await, (0, 2));
    // Forgotten: the next 404 makes no call at all.
    s.fake.reset_stats();
    let (status, body) = s.retrieve(query).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "world_not_found");
    assert_eq!(s.fake.stats().requests, 0);
    assert_eq!(head_starts(&s.app).await, (0, 2));
}

#[tokio::test]
async fn a_point_whose_chunk_is_gone_is_skipped_and_deleted() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    assert_eq!(s.point_count().await, 6);
    s.sql("DELETE FROM chunks WHERE chunk_text = ?", &[&sentence(0)]).await;

    let answer = s.ok(json!({"query": "who rules the northern isles", "top_k": 6})).await;
    assert!(!texts(&answer).contains(&sentence(0)), "{answer}");
    assert_eq!(warning_codes(&answer), ["chunk_missing"]);
    let repairs = answer["repairs"].as_array().unwrap();
    assert_eq!(repairs.len(), 1, "{answer}");
    assert_eq!(repairs[0]["kind"], "orphan_point_deleted");
    assert_eq!(s.point_count().await, 5, "the orphan point is gone");
    // Five chunks are embedded, so five hits were asked for; one was skipped.
    assert_eq!(answer["effective_top_k"], 5);
    assert_eq!(answer["results"].as_array().unwrap().len(), 4);

    let again = s.ok(json!({"query": "who rules the northern isles", "top_k": 6})).await;
    assert_eq!(again["results"].as_array().unwrap().len(), 5);
    assert_eq!(again["warnings"], json!([]));
    assert_eq!(again["repairs"], json!([]));
}

/// Ingests ISLES, then rewrites its first chunk's text (and hash) under the API, so that the
/// chunk's point was made from old text; returns the new text.
async fn with_first_chunk_rewritten(s: &Setup) -> &'static str {
    s.ingest(&[("isles.txt", ISLES)]).await;
    let new_text = "Queen Maren rules the northern isles from a palace of glass.";
    let hash = hex::encode(sha2::Sha256::digest(new_text.as_bytes()));
    s.sql(
        "UPDATE chunks SET chunk_text = ?, text_sha256 = ? WHERE chunk_text = ?",
        &[new_text, &hash, &sentence(0)],
    )
    .await;
    new_text
}

#[tokio::test]
async fn a_stale_hit_still_gets_its_answer_when_its_slot_cannot_be_requeued() {
    use sqlx::ConnectOptions as _;
    let s = setup().await;
    let new_text = with_first_chunk_rewritten(&s).await;
    // Reads go on (WAL); the requeue, a write, waits out the busy timeout and fails.
    let options: sqlx::sqlite::SqliteConnectOptions = s.app.store_url().parse().unwrap();
    let mut holder = options.connect().await.unwrap();
    sqlx::query("BEGIN IMMEDIATE").execute(&mut holder).await.unwrap();
    let answer = s.ok(json!({"query": "who rules the northern isles", "top_k": 6})).await;
    sqlx::query("ROLLBACK").execute(&mut holder).await.unwrap();
    assert_eq!(warning_codes(&answer), ["stale_point"], "{answer}");
    assert_eq!(answer["results"].as_array().unwrap().len(), 5, "{answer}");
    assert_eq!(answer["repairs"][0]["kind"], "stale_point_deleted");

    // The entry still says embedded without its point: a repair puts it right.
    let (status, job) = s
        .app
        .post(&format!("/v1/worlds/{}/repair", s.world_id()), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{job}");
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        s.app.drain().await;
        let answer = s.ok(json!({"query": "who rules the northern isles", "top_k": 1})).await;
        if texts(&answer) == [new_text] {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never repaired: {answer}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_point_made_from_old_text_is_deleted_and_its_slot_embedded_again() {
    let s = setup().await;
    let new_text = with_first_chunk_rewritten(&s).await;

    let answer = s.ok(json!({"query": "who rules the northern isles", "top_k": 6})).await;
    let returned = texts(&answer);
    assert!(
        !returned.iter().any(|t| t.contains("Queen Maren")),
        "stale hits are skipped: {answer}"
    );
    assert_eq!(warning_codes(&answer), ["stale_point"]);
    let repairs = answer["repairs"].as_array().unwrap();
    assert_eq!(repairs.len(), 1);
    assert_eq!(repairs[0]["kind"], "stale_point_deleted");
    assert_eq!(s.point_count().await, 5, "the stale point is deleted");
    let stats = s.stats().await;
    assert_eq!(
        (stats["embedded"].as_u64(), stats["pending"].as_u64()),
        (Some(5), Some(1))
    );
    let (_, jobs) = s.app.get(&format!("/v1/worlds/{}/jobs", s.world_id())).await;
    let repair = jobs["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["kind"] == "repair")
        .cloned()
        .unwrap_or_else(|| panic!("a repair job holds the slot: {jobs}"));
    assert_eq!(repair["status"], "running");
    assert_eq!(repair["counts"]["total"], 1);

    // The workers embed the current text; the chunk text itself was never touched.
    s.app.drain().await;
    let sent: Vec<String> = s
        .fake
        .stats()
        .embed_calls
        .iter()
        .flat_map(|c| c.texts.clone())
        .collect();
    assert!(sent.contains(&new_text.to_owned()), "{sent:?}");
    let (_, job) = s.app.get(&format!("/v1/jobs/{}", id(&repair))).await;
    assert_eq!(job["status"], "completed", "{job}");
    assert_eq!(s.point_count().await, 6);
    let answer = s.ok(json!({"query": "who rules the northern isles", "top_k": 1})).await;
    assert_eq!(texts(&answer), [new_text]);
    assert_eq!(answer["warnings"], json!([]));
}

#[tokio::test]
async fn hybrid_finds_an_exact_rare_token_that_dense_misses() {
    let s = setup_with(true).await;
    let archive = "The archive keeps the ZX81 beside the lamp.";
    s.ingest(&[
        ("isles.txt", ISLES),
        ("archive.txt", archive),
        ("years.txt", "1066 1492 1789 1914."),
    ])
    .await;
    // The fake dense model has no vocabulary for codes: dense ranks something else first.
    let dense = s.ok(json!({"query": "ZX81", "top_k": 1})).await;
    assert_ne!(texts(&dense), [archive], "{dense}");
    let hybrid = s.ok(json!({"query": "ZX81", "top_k": 1, "mode": "hybrid"})).await;
    assert_eq!(texts(&hybrid), [archive], "{hybrid}");
    // Hybrid scores are fused ranks, still sorted.
    let hybrid = s
        .ok(json!({"query": "ZX81 northern isles", "top_k": 3, "mode": "hybrid"}))
        .await;
    let scores = scores(&hybrid);
    assert!(scores.windows(2).all(|w| w[0] >= w[1]), "{scores:?}");
    assert!(texts(&hybrid).contains(&archive.to_owned()));
}

#[tokio::test]
async fn a_hybrid_query_with_no_bm25_terms_answers_from_the_dense_side() {
    let s = setup_with(true).await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    // Stop words and punctuation only: BM25 has nothing to look up.
    let query = "the and of, to... ?!";
    assert!(quarry::sparse::query(query).indices.is_empty());
    let hybrid = s.ok(json!({"query": query, "top_k": 3, "mode": "hybrid"})).await;
    let dense = s.ok(json!({"query": query, "top_k": 3})).await;
    assert_eq!(texts(&hybrid).len(), 3, "{hybrid}");
    assert_eq!(texts(&hybrid), texts(&dense), "the fusion of one list keeps its order");
    assert_eq!(hybrid["warnings"], json!([]));
}

#[tokio::test]
async fn a_query_the_provider_is_too_slow_to_embed_is_502_before_the_request_times_out() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    // The provider's own timeout (60 s) is far longer than the server's.
    let app = spawn_app_with(on_fake_google(fake.base_url(), |s| s.server.request_timeout_s = 2)).await;
    let world = create_world(&app, "Aerth", false).await;
    let s = Setup { fake, app, world };
    s.ingest(&[("isles.txt", ISLES)]).await;
    s.fake.set_latency(Duration::from_secs(5));
    // Without the budget, the server's timeout answers first: 408 request_timeout.
    let (status, body) = s.retrieve(json!({"query": "who rules the northern isles"})).await;
    let error = assert_error(status, &body, StatusCode::BAD_GATEWAY, "provider_error");
    assert!(
        error["message"].as_str().unwrap().contains("1.5 s"),
        "the budget is the 2 s request timeout less a quarter: {body}"
    );
    // The key was not left in flight: a fast provider answers the next query.
    s.fake.set_latency(Duration::ZERO);
    let answer = s.ok(json!({"query": "who rules the northern isles", "top_k": 1})).await;
    assert_eq!(texts(&answer), [sentence(0)]);
}

#[tokio::test]
async fn hybrid_mode_on_a_dense_world_is_refused() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let (status, answer) = s.retrieve(json!({"query": "isles", "mode": "hybrid"})).await;
    let error = assert_error(status, &answer, StatusCode::BAD_REQUEST, "invalid_retrieval_settings");
    assert_eq!(error["details"]["field"], "mode");
    assert_eq!(s.fake.stats().requests, 0);
}

#[tokio::test]
async fn a_query_over_the_model_limit_is_refused_without_an_embedding_call() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let before = s.stats().await;
    // The fake counts words; gemini-embedding-001 takes 2048 tokens.
    let query = "isles ".repeat(2100);
    let (status, answer) = s.retrieve(json!({"query": query})).await;
    let error = assert_error(status, &answer, StatusCode::UNPROCESSABLE_ENTITY, "input_too_large");
    assert_eq!(error["details"]["field"], "query", "{answer}");
    assert_eq!(s.fake.stats().embed_requests(), 0, "the provider never saw it");
    assert_eq!(s.stats().await, before);
}

#[tokio::test]
async fn a_huge_query_is_refused_before_it_is_counted_or_sent_and_a_huge_body_before_it_is_read() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let query = "isles ".repeat(11_000); // 66,000 bytes: over the 64 KiB a query may have
    let (status, answer) = s.retrieve(json!({"query": query})).await;
    let error = assert_error(status, &answer, StatusCode::UNPROCESSABLE_ENTITY, "input_too_large");
    assert!(error["message"].as_str().unwrap().contains("65536"), "{answer}");
    let stats = s.fake.stats();
    assert_eq!(
        (stats.embed_requests(), stats.counted.len()),
        (0, 0),
        "neither counted by the provider nor sent"
    );
    // A body bigger than any query needs is refused before it is parsed.
    let (status, answer) = s
        .retrieve(json!({"query": "isles", "mode": "x".repeat(300 * 1024)}))
        .await;
    let error = assert_error(status, &answer, StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large");
    assert_eq!(error["details"]["limit_bytes"], 256 * 1024, "{answer}");
    // Just under the query limit is still taken (and counted exactly: it might be too long).
    let answer = s.ok(json!({"query": "isles ".repeat(300), "top_k": 1})).await;
    assert_eq!(answer["results"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_query_that_cannot_be_counted_is_refused() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    // Long enough in bytes (2,400) that it might be over gemini-embedding-001's 2,048 tokens,
    // so it must be counted; the fake counts 480 words.
    let query = "who rules the isles ".repeat(120);
    s.fake.fail_next_count(Failure::MalformedBody);
    let (status, answer) = s.retrieve(json!({"query": query})).await;
    assert_error(status, &answer, StatusCode::UNPROCESSABLE_ENTITY, "token_count_failed");
    assert_eq!(s.fake.stats().embed_requests(), 0);
    // A transient fault while counting is retried at once.
    s.fake.fail_next_count(Failure::Status(503));
    let answer = s.ok(json!({"query": query})).await;
    assert_eq!(texts(&answer)[0], sentence(0));
}

#[tokio::test]
async fn a_query_too_short_to_be_over_the_limit_is_not_counted() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let counted = s.fake.stats().endpoint("countTokens");
    // A failure queued for the next count is never met: no count is made.
    s.fake.fail_next_count(Failure::MalformedBody);
    let answer = s.ok(json!({"query": "who rules the isles"})).await;
    assert_eq!(texts(&answer)[0], sentence(0));
    let near_limit = "isles ".repeat(340); // 2,040 bytes: 2,040 + 8 special tokens ≤ 2,048
    s.ok(json!({"query": near_limit})).await;
    assert_eq!(
        s.fake.stats().endpoint("countTokens"),
        counted,
        "no countTokens round trip"
    );
    // One byte more and the query is counted (and meets the queued failure).
    let (status, answer) = s.retrieve(json!({"query": format!("{near_limit}x")})).await;
    assert_error(status, &answer, StatusCode::UNPROCESSABLE_ENTITY, "token_count_failed");
    assert_eq!(s.fake.stats().endpoint("countTokens"), counted + 1);
}

#[tokio::test]
async fn cooling_keys_answer_429_with_retry_after() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let before = s.stats().await;
    s.fake.fail_next(Failure::RateLimited(Duration::from_secs(60)));
    let (status, answer) = s.retrieve(json!({"query": "who rules the isles"})).await;
    let error = assert_error(status, &answer, StatusCode::TOO_MANY_REQUESTS, "provider_rate_limited");
    let retry = error["details"]["retry_after_s"].as_u64().unwrap();
    assert!((50..=61).contains(&retry), "the provider's hint: {retry}");
    // The key stays cooling: the next query fails fast without reaching the provider.
    let requests = s.fake.stats().requests;
    let (status, answer) = s.retrieve(json!({"query": "who rules the isles"})).await;
    assert_error(status, &answer, StatusCode::TOO_MANY_REQUESTS, "provider_rate_limited");
    assert_eq!(s.fake.stats().requests, requests);
    assert_eq!(s.stats().await, before, "nothing stored changed");
}

#[tokio::test]
async fn a_provider_failure_is_502_and_changes_nothing() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    // A transient fault is retried at once (on the next usable key).
    s.fake.fail_next(Failure::Status(500));
    let answer = s.ok(json!({"query": "who rules the isles"})).await;
    assert_eq!(texts(&answer)[0], sentence(0));
    assert_eq!(s.fake.stats().embed_requests(), 2);
    let before = s.stats().await;
    for failure in [Failure::Status(400), Failure::MalformedBody, Failure::WrongLength] {
        s.fake.fail_next(failure.clone());
        let (status, answer) = s.retrieve(json!({"query": "who rules the isles"})).await;
        assert_error(status, &answer, StatusCode::BAD_GATEWAY, "provider_error");
    }
    assert_eq!(s.stats().await, before);
    assert_eq!(s.point_count().await, 6);
}

#[tokio::test]
async fn a_world_without_usable_keys_is_409() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let (_, keys) = s.app.get("/v1/providers").await;
    let key_id = keys["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["provider"] == "google")
        .and_then(|p| p["keys"][0]["key_id"].as_str())
        .unwrap()
        .to_owned();
    // A rejected key is retired: nothing is left to embed the query with.
    s.fake.fail_next(Failure::KeyInvalid);
    let (status, answer) = s.retrieve(json!({"query": "who rules the isles"})).await;
    assert!(
        status == StatusCode::CONFLICT || status == StatusCode::BAD_GATEWAY,
        "{status}: {answer}"
    );
    let (status, answer) = s.retrieve(json!({"query": "who rules the isles"})).await;
    assert_error(status, &answer, StatusCode::CONFLICT, "no_eligible_provider_key");
    assert!(!key_id.is_empty());
}

#[tokio::test]
async fn an_unreachable_vector_store_is_503_and_changes_nothing() {
    let fake = FakeGoogle::start(&["key-a"]).await;
    let (app, world, _, _) = crate::helpers::spawn_app_with_unreachable_vectors(fake.base_url()).await;
    let s = Setup {
        fake,
        app,
        world: json!({"id": world.id.0.to_string(), "collection": world.collection}),
    };
    s.sql("UPDATE manifest_entries SET state = 'embedded'", &[]).await;
    let before = s.stats().await;
    let (status, answer) = s.retrieve(json!({"query": "who rules"})).await;
    assert_error(
        status,
        &answer,
        StatusCode::SERVICE_UNAVAILABLE,
        "vector_store_unavailable",
    );
    assert_eq!(s.stats().await, before);

    let (status, ready) = crate::helpers::read(s.app.client.get(s.app.url("/readyz")).send().await.unwrap()).await;
    assert_error(
        status,
        &ready,
        StatusCode::SERVICE_UNAVAILABLE,
        "vector_store_unavailable",
    );
    assert_eq!(
        (&ready["store"]["ok"], &ready["vectors"]["ok"]),
        (&json!(true), &json!(false))
    );
}
