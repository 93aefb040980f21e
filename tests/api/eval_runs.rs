//! Evaluation runs (`/v1/worlds/{world_id}/evals/{eval_id}/runs`) on both stores: every metric
//! of a small world checked against values worked out by hand, runs watched as events and
//! compared, bounds refused with the field named, and a run taken up again after a restart
//! going on from its last save.
//!
//! The fake Google provider embeds a text as its words hashed into slots (`fake_vector`): the
//! sixteen words used here land in sixteen different slots of 768, so a query's cosine with a
//! chunk is the share of words they have in common (each word weighs the same), and the ranks
//! below follow from counting shared words.

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
                super::$case(app, fake).await;
            }

            #[tokio::test]
            async fn postgres() {
                let Some(db) = crate::helpers::PgDatabase::create(concat!("eval_runs::", stringify!($case))).await
                else {
                    return;
                };
                let fake = FakeGoogle::start(&["key-a"]).await;
                let app = spawn_app_on(db.url.clone(), on_fake_google(fake.base_url(), |_| {})).await;
                super::$case(app, fake).await;
                db.drop_db().await;
            }
        }
    };
}

/// Three one-sentence sources with no word in common: `a.md` (by key), `b.md`, `c.md`.
async fn phonetic_world(app: &TestApp) -> (String, String) {
    let world = id(&app
        .create_google_world("Phonetic", json!({"chunking": crate::helpers::sentence_chunks()}))
        .await);
    let (status, a) = app
        .put(
            &format!("/v1/worlds/{world}/sources/by-key?key=a.md"),
            json!({"filename": "a.md", "text": "Alpha bravo charlie kilo lima."}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{a}");
    app.add_text(&world, "b.md", "Delta echo foxtrot mike november.").await;
    app.add_text(&world, "c.md", "Golf hotel india oscar papa.").await;
    app.drain().await;
    (world, a["source"]["id"].as_str().expect("a source id").to_owned())
}

/// The test set. Hits are judged on items 0–2, answers on items 3–4.
fn items(a: &str) -> Value {
    json!([
        // Shares all three words with a.md only: rank 1.
        {"query": "alpha bravo charlie", "expected": {"sources": [a]}},
        // Two words with b.md, one with a.md: a.md is second.
        {"query": "delta echo alpha", "expected": {"source_keys": ["a.md"]}},
        // Names a source the world does not have: no hit.
        {"query": "golf hotel", "expected": {"sources": [uuid::Uuid::new_v4()]}},
        // c.md comes first; of the answer's two 4-grams, "golf hotel india oscar" is in its
        // text and "hotel india oscar zulu" is not: 1/2.
        {"query": "golf hotel india", "expected": {"answer": "golf hotel india oscar zulu"}},
        // b.md first (three words), a.md second (one): a.md's text, the answer, is in the
        // context only when two results are kept.
        {"query": "delta echo foxtrot alpha", "expected": {"answer": "alpha bravo charlie kilo lima"}},
    ])
}

async fn create_set(app: &TestApp, world: &str, items: Value) -> String {
    let (status, set) = app
        .post(
            &format!("/v1/worlds/{world}/evals"),
            json!({"name": "Phonetic", "items": items}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{set}");
    set["eval_id"].as_str().unwrap().to_owned()
}

async fn start(app: &TestApp, runs: &str, body: Value) -> Value {
    let (status, run) = app.post(runs, body).await;
    assert_eq!(status, StatusCode::ACCEPTED, "{run}");
    assert_eq!(run["status"], "queued");
    run
}

/// Reads the run until it has ended (each read is one step; the runner scores a few items a
/// millisecond apart, so a few hundred steps are far more than it needs).
async fn ended(app: &TestApp, run: &str) -> Value {
    for _ in 0..600 {
        let (status, read) = app.get(run).await;
        assert_eq!(status, StatusCode::OK, "{read}");
        if ["completed", "failed", "cancelled"].contains(&read["status"].as_str().unwrap()) {
            return read;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    panic!("the run did not end");
}

/// Keys the scheduler handed out so far in the query lane and in the ingestion lanes.
async fn lanes(app: &TestApp) -> (f64, f64) {
    let text = (app.client.get(app.url("/metrics")).send().await.unwrap().text().await).unwrap();
    let taken = |lane: &str| {
        let series =
            format!("quarry_scheduler_wait_seconds_count{{provider=\"google\",lane=\"{lane}\",outcome=\"acquired\"}} ");
        (text.lines())
            .find_map(|line| line.strip_prefix(series.as_str()))
            .map_or(0.0, |v| v.trim().parse::<f64>().unwrap())
    };
    (taken("query"), taken("ingest"))
}

fn close(value: &Value, expected: f64) {
    let got = value.as_f64().unwrap_or_else(|| panic!("a number, not {value}"));
    assert!((got - expected).abs() < 1e-9, "{got} != {expected}");
}

on_both_stores!(every_metric_matches_the_values_worked_out_by_hand);
async fn every_metric_matches_the_values_worked_out_by_hand(app: TestApp, _fake: FakeGoogle) {
    let (world, a) = phonetic_world(&app).await;
    let eval = create_set(&app, &world, items(&a)).await;
    let runs = format!("/v1/worlds/{world}/evals/{eval}/runs");
    // Setting 0 keeps two results, setting 1 one; the context holds the results only.
    let two = json!({"top_k": 2, "expand": "none"});
    let one = json!({"top_k": 1, "expand": "none"});
    let lanes_before = lanes(&app).await;
    let started = start(&app, &runs, json!({"settings": [two, one], "budgets": [256, 1024]})).await;
    let run_path = format!("{runs}/{}", started["run_id"].as_str().unwrap());
    let run = ended(&app, &run_path).await;
    // Every retrieval of the run (5 items × 2 settings × 2 budgets) took its key in the world's
    // ingestion lane, none in the callers' query lane.
    let lanes_after = lanes(&app).await;
    assert_eq!(
        (lanes_after.0 - lanes_before.0, lanes_after.1 - lanes_before.1),
        (0.0, 20.0),
        "(query, ingest) keys taken"
    );
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["progress"], json!({"done": 5, "total": 5}));
    assert_eq!(run["attempts"], 1);
    assert_eq!(run["settings"], json!([two, one]), "kept as sent");
    let stored = app
        .deps
        .store
        .get_world(world.parse().map(quarry::domain::WorldId).unwrap())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        run["measured"]["run_id"],
        stored.active_run.0.to_string(),
        "the index measured: {run}"
    );
    assert_eq!(run["measured"]["model"], "gemini-embedding-001");

    let report = &run["report"];
    assert_eq!(report["scored"], 5);
    // Items: the first hits and the answers' shares, per setting and budget.
    let item = |i: usize| &report["items"][i];
    assert_eq!(item(0)["first_hit"], json!([1, 1]));
    assert_eq!(
        item(1)["first_hit"],
        json!([2, null]),
        "a.md is second; one result is b.md alone"
    );
    assert_eq!(item(2)["first_hit"], json!([null, null]));
    assert_eq!(
        (item(3)["hit_judged"].as_bool(), item(3)["answer_judged"].as_bool()),
        (Some(false), Some(true))
    );
    assert_eq!(item(3)["answer_share"], json!([[0.5, 0.5], [0.5, 0.5]]));
    assert_eq!(item(4)["answer_share"], json!([[1.0, 1.0], [0.0, 0.0]]));
    assert_eq!(item(0)["answer_share"], json!([[null, null], [null, null]]));
    // Found by: a hit within 5, or the answer fully (80 %) in the context.
    let found: Vec<&Value> = (0..5).map(|i| &item(i)["found_by"]).collect();
    assert_eq!(
        found,
        [&json!([0, 1]), &json!([0]), &json!([]), &json!([]), &json!([0])]
    );
    assert_eq!(item(1)["query"], "delta echo alpha");
    assert_eq!(item(1)["latency_ms"].as_array().unwrap().len(), 2);

    // Setting 0: ranks 1, 2, none → hit@1 1/3, hit@5 2/3, MRR (1 + 1/2 + 0)/3 = 1/2; shares
    // 0.5 and 1.0 → mean 0.75, fully (≥ 0.8) 1 of 2.
    let s0 = &report["settings"][0];
    assert_eq!(s0["hit_items"], 3);
    close(&s0["hit_at_1"], 1.0 / 3.0);
    close(&s0["hit_at_5"], 2.0 / 3.0);
    close(&s0["mrr_at_10"], 0.5);
    for (b, budget) in [256, 1024].into_iter().enumerate() {
        assert_eq!(s0["budgets"][b]["budget"], budget);
        assert_eq!(s0["budgets"][b]["answer_items"], 2);
        close(&s0["budgets"][b]["answer_share"], 0.75);
        close(&s0["budgets"][b]["fully"], 0.5);
    }
    assert!(s0["latency_p50_ms"].as_f64().unwrap() > 0.0, "{s0}");
    assert!(s0["latency_p95_ms"].as_f64().unwrap() >= s0["latency_p50_ms"].as_f64().unwrap());
    // Setting 1: ranks 1, none, none → hit@1 = hit@5 = MRR = 1/3; shares 0.5 and 0 → mean
    // 0.25, fully 0.
    let s1 = &report["settings"][1];
    close(&s1["hit_at_1"], 1.0 / 3.0);
    close(&s1["hit_at_5"], 1.0 / 3.0);
    close(&s1["mrr_at_10"], 1.0 / 3.0);
    close(&s1["budgets"][0]["answer_share"], 0.25);
    close(&s1["budgets"][1]["fully"], 0.0);

    // The events: progress up to 5 of 5, then the final status; the stream ends.
    let resp = (app.client.get(app.url(&format!("{run_path}/events"))))
        .bearer_auth(crate::helpers::TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let events = parse_sse(&resp.text().await.unwrap());
    assert_eq!(events.first().map(|e| e.1.as_str()), Some("progress"), "{events:?}");
    assert_eq!(events.first().map(|e| &e.2), Some(&json!({"done": 5, "total": 5})));
    assert_eq!(
        events.last().map(|e| (e.1.as_str(), &e.2)),
        Some(("status", &json!({"status": "completed"})))
    );

    // A second run with setting 1 alone, compared with the first: setting 0 against setting 0.
    let second = start(&app, &runs, json!({"settings": [one], "budgets": [1024, 512]})).await;
    let second_path = format!("{runs}/{}", second["run_id"].as_str().unwrap());
    assert_eq!(ended(&app, &second_path).await["status"], "completed");
    let (a_id, b_id) = (started["run_id"].as_str().unwrap(), second["run_id"].as_str().unwrap());
    let (status, cmp) = app.get(&format!("{runs}/{a_id}/compare/{b_id}")).await;
    assert_eq!(status, StatusCode::OK, "{cmp}");
    assert_eq!(cmp["items_compared"], 5);
    assert_eq!(
        cmp["settings"].as_array().unwrap().len(),
        1,
        "as many as the run with fewer"
    );
    let d = &cmp["settings"][0];
    close(&d["hit_at_1"], 0.0);
    close(&d["hit_at_5"], 1.0 / 3.0 - 2.0 / 3.0);
    close(&d["mrr_at_10"], 1.0 / 3.0 - 0.5);
    // Only the budget both measured (1024).
    assert_eq!(d["budgets"].as_array().unwrap().len(), 1, "{d}");
    assert_eq!(d["budgets"][0]["budget"], 1024);
    close(&d["budgets"][0]["answer_share"], 0.25 - 0.75);
    close(&d["budgets"][0]["fully"], -0.5);
    // Worse: item 1 (rank 2 → none) and item 4 (share 1 → 0); nothing better.
    let worse: Vec<&str> = cmp["worse"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["query"].as_str().unwrap())
        .collect();
    assert_eq!(worse, ["delta echo alpha", "delta echo foxtrot alpha"]);
    assert_eq!(cmp["worse"][0]["before"]["first_hit"], 2);
    assert_eq!(cmp["worse"][0]["after"]["first_hit"], Value::Null);
    assert_eq!(cmp["worse"][1]["before"]["answer_share"], json!([1.0]));
    assert_eq!(cmp["better"], json!([]));
    assert_eq!(cmp["mixed"], 0);

    // Listed oldest first, without reports.
    let (status, listed) = app.get(&runs).await;
    assert_eq!(status, StatusCode::OK, "{listed}");
    let listed = listed["runs"].as_array().unwrap();
    assert_eq!(listed.len(), 2);
    assert_eq!(listed[0]["run_id"], a_id);
    assert_eq!(listed[0]["progress"], json!({"done": 5, "total": 5}));
    assert!(listed[0].get("report").is_none(), "{listed:?}");

    // An ended run is deleted; cancelling it is refused.
    let (status, body) = app.post(&format!("{run_path}/cancel"), json!({})).await;
    assert_error(status, &body, StatusCode::CONFLICT, "eval_run_state");
    let (status, _) = app.delete(&run_path).await;
    assert_eq!(status, StatusCode::NO_CONTENT);
    let (status, body) = app.get(&run_path).await;
    assert_error(status, &body, StatusCode::NOT_FOUND, "eval_run_not_found");
}

on_both_stores!(bounds_are_refused_with_the_field_named_and_nothing_runs);
async fn bounds_are_refused_with_the_field_named_and_nothing_runs(app: TestApp, _fake: FakeGoogle) {
    let (world, a) = phonetic_world(&app).await;
    let eval = create_set(&app, &world, items(&a)).await;
    let runs = format!("/v1/worlds/{world}/evals/{eval}/runs");
    let nine: Vec<Value> = (0..9).map(|_| json!({})).collect();
    for (body, code, field) in [
        (json!({"settings": []}), "invalid_request", "settings"),
        (json!({"settings": nine}), "invalid_request", "settings"),
        (
            json!({"settings": [{}, {"mode": "sideways"}]}),
            "invalid_retrieval_settings",
            "settings[1].mode",
        ),
        (
            json!({"settings": [{"query": "x"}]}),
            "invalid_retrieval_settings",
            "settings[0].query",
        ),
        (
            json!({"settings": [{"max_context_tokens": 100}]}),
            "invalid_retrieval_settings",
            "settings[0].max_context_tokens",
        ),
        (
            json!({"settings": [{"top_k": 5, "shape": 1}]}),
            "invalid_retrieval_settings",
            "settings[0].shape",
        ),
        (
            json!({"settings": [{"expand": "parent", "neighbors": 2}]}),
            "invalid_retrieval_settings",
            "settings[0].expand",
        ),
        (json!({"settings": [7]}), "invalid_retrieval_settings", "settings[0]"),
        // What the configuration decides, judged when the run is asked for, not midway.
        (
            json!({"settings": [{"rerank": {}}]}),
            "invalid_retrieval_settings",
            "settings[0].rerank",
        ),
        (
            json!({"settings": [{}, {"hnsw_ef": 5000}]}),
            "invalid_retrieval_settings",
            "settings[1].hnsw_ef",
        ),
        (json!({"budgets": []}), "invalid_request", "budgets"),
        (json!({"budgets": [0]}), "invalid_request", "budgets"),
        (json!({"budgets": [2_000_000]}), "invalid_request", "budgets"),
        (json!({"budgets": [1, 2, 3, 4, 5]}), "invalid_request", "budgets"),
    ] {
        let (status, err) = app.post(&runs, body.clone()).await;
        let err = assert_error(status, &err, StatusCode::BAD_REQUEST, code);
        assert_eq!(err["details"]["field"], field, "{body}: {err}");
    }
    let (status, err) = app.post(&runs, json!({"sets": 1})).await;
    assert_error(status, &err, StatusCode::BAD_REQUEST, "invalid_request");
    // Nothing was queued.
    let (_, listed) = app.get(&runs).await;
    assert_eq!(listed["runs"], json!([]), "{listed}");

    // Missing things are 404s, each named.
    let missing = uuid::Uuid::new_v4();
    let (status, err) = app
        .post(&format!("/v1/worlds/{world}/evals/{missing}/runs"), json!({}))
        .await;
    assert_error(status, &err, StatusCode::NOT_FOUND, "eval_not_found");
    let (status, err) = app
        .post(&format!("/v1/worlds/{missing}/evals/{eval}/runs"), json!({}))
        .await;
    assert_error(status, &err, StatusCode::NOT_FOUND, "world_not_found");
    let (status, err) = app.get(&format!("{runs}/{missing}")).await;
    assert_error(status, &err, StatusCode::NOT_FOUND, "eval_run_not_found");
    let (status, err) = app.get(&format!("{runs}/{missing}/events")).await;
    assert_error(status, &err, StatusCode::NOT_FOUND, "eval_run_not_found");

    // Two runs of a world under way at most: a third is refused (409). A run in flight is
    // neither compared nor deleted. A set of 1,000 items keeps the first runs busy (the check
    // holds whenever both are still under way, which the listing confirms).
    let many: Vec<Value> = (0..1000)
        .map(|i| json!({"query": format!("alpha bravo {i}"), "expected": {"sources": [a]}}))
        .collect();
    let eval = create_set(&app, &world, json!(many)).await;
    let runs = format!("/v1/worlds/{world}/evals/{eval}/runs");
    let first = start(&app, &runs, json!({})).await;
    let second = start(&app, &runs, json!({})).await;
    let (status, err) = app.post(&runs, json!({})).await;
    let open: Vec<bool> = {
        let (_, listed) = app.get(&runs).await;
        listed["runs"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["status"] == "queued" || r["status"] == "running")
            .collect()
    };
    if open.iter().all(|o| *o) {
        assert_error(status, &err, StatusCode::CONFLICT, "eval_limit_reached");
        let second_path = format!("{runs}/{}", second["run_id"].as_str().unwrap());
        let (status, err) = app.delete(&second_path).await;
        assert_error(status, &err, StatusCode::CONFLICT, "eval_run_state");
        let (status, err) = app
            .get(&format!(
                "{runs}/{}/compare/{}",
                first["run_id"].as_str().unwrap(),
                second["run_id"].as_str().unwrap()
            ))
            .await;
        assert_error(status, &err, StatusCode::CONFLICT, "eval_run_state");
    }
}

on_both_stores!(a_run_taken_up_again_after_a_restart_goes_on_from_its_last_save);
async fn a_run_taken_up_again_after_a_restart_goes_on_from_its_last_save(mut app: TestApp, fake: FakeGoogle) {
    use quarry::domain::{EvalRun, EvalRunId, EvalRunStatus, EvalSetId, ItemRecord, WorldId};
    let (world, a) = phonetic_world(&app).await;
    let eval = create_set(&app, &world, items(&a)).await;
    let (_, set) = app.get(&format!("/v1/worlds/{world}/evals/{eval}")).await;
    // A run that a process was running when it stopped: two items saved (the second with a
    // mark no real retrieval gives: rank 9), three to go; and one taken up too often.
    app.stop().await;
    let store = quarry::store::connect(app.store_url()).await.expect("the store");
    let eval_items: Vec<quarry::domain::EvalItem> = serde_json::from_value(json!(
        set["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| json!({"query": i["query"], "expected": i["expected"]}))
            .collect::<Vec<_>>()
    ))
    .unwrap();
    let saved = ItemRecord {
        hit_judged: true,
        answer_judged: false,
        first_hit: vec![Some(9)],
        answer_share: vec![vec![None]],
        ms: vec![vec![1.0]],
    };
    let interrupted = |attempts: u32| EvalRun {
        id: EvalRunId::new(),
        world_id: WorldId(world.parse().unwrap()),
        eval_id: EvalSetId(eval.parse().unwrap()),
        eval_name: "Phonetic".to_owned(),
        status: EvalRunStatus::Running,
        settings: vec![json!({"top_k": 2, "expand": "none"})],
        budgets: vec![1024],
        items: eval_items.clone(),
        scores: vec![saved.clone(), saved.clone()],
        measured: None,
        target_run: None,
        gate_job: None,
        attempts,
        error: None,
        created_at: quarry::domain::now(),
        started_at: Some(quarry::domain::now()),
        finished_at: None,
    };
    let (resumed, worn) = (interrupted(1), interrupted(5));
    store.insert_eval_run(&resumed).await.unwrap();
    store.insert_eval_run(&worn).await.unwrap();
    drop(store);

    let app = app.restart_with(on_fake_google(fake.base_url(), |_| {})).await;
    let runs = format!("/v1/worlds/{world}/evals/{eval}/runs");
    let run = ended(&app, &format!("{runs}/{}", resumed.id.0)).await;
    assert_eq!(run["status"], "completed", "{run}");
    assert_eq!(run["attempts"], 2, "taken up a second time");
    let firsts: Vec<&Value> = (0..5).map(|i| &run["report"]["items"][i]["first_hit"]).collect();
    // The two saved items kept as saved (not scored again), the rest scored now.
    assert_eq!(
        firsts,
        [&json!([9]), &json!([9]), &json!([null]), &json!([null]), &json!([null])]
    );
    close(&run["report"]["items"][4]["answer_share"][0][0], 1.0);

    let run = ended(&app, &format!("{runs}/{}", worn.id.0)).await;
    assert_eq!(run["status"], "failed", "{run}");
    assert!(run["error"].as_str().unwrap().contains("interrupted 5 times"), "{run}");
    assert_eq!(run["progress"]["done"], 2, "what was saved stays readable");
}

on_both_stores!(a_drafted_test_set_comes_from_question_headings_and_runs);
async fn a_drafted_test_set_comes_from_question_headings_and_runs(app: TestApp, _fake: FakeGoogle) {
    let world = id(&app
        .create_google_world("Shore", json!({"chunking": crate::helpers::sentence_chunks()}))
        .await);
    let faq = "# Shore questions\n\nA few answers.\n\n## When do grey seals pup?\n\nGrey seals pup in autumn on quiet beaches.\n\n\
               ## Where do puffins nest?\n\nPuffins nest in burrows on grassy cliff tops.\n\n## Feeding\n\nFish, mostly.\n";
    let source = app.add_text(&world, "faq.md", faq).await;
    app.drain().await;
    let suggest = format!("/v1/worlds/{world}/evals/suggest");
    let (status, draft) = app.post(&suggest, json!({})).await;
    assert_eq!(status, StatusCode::OK, "{draft}");
    assert_eq!(draft["draft"], true);
    assert_eq!(
        (draft["sources_read"].as_u64(), draft["sections_seen"].as_u64()),
        (Some(1), Some(4))
    );
    let source_id = source["source"]["id"].clone();
    assert_eq!(
        draft["items"],
        json!([
            {"query": "When do grey seals pup?", "expected": {"sources": [source_id], "answer": "Grey seals pup in autumn on quiet beaches."}},
            {"query": "Where do puffins nest?", "expected": {"sources": [source_id], "answer": "Puffins nest in burrows on grassy cliff tops."}},
        ])
    );
    let (_, one) = app.post(&suggest, json!({"limit": 1})).await;
    assert_eq!(one["items"].as_array().unwrap().len(), 1);
    // Nothing is stored until the user creates the set.
    let (_, sets) = app.get(&format!("/v1/worlds/{world}/evals")).await;
    assert_eq!(sets["evals"], json!([]));

    // Created as drafted and run: each question finds its source first, its answer in context.
    let eval = create_set(&app, &world, draft["items"].clone()).await;
    let runs = format!("/v1/worlds/{world}/evals/{eval}/runs");
    let started = start(&app, &runs, json!({})).await;
    let run = ended(&app, &format!("{runs}/{}", started["run_id"].as_str().unwrap())).await;
    assert_eq!(run["status"], "completed", "{run}");
    close(&run["report"]["settings"][0]["hit_at_1"], 1.0);
    close(&run["report"]["settings"][0]["budgets"][0]["answer_share"], 1.0);

    for (body, field) in [(json!({"limit": 0}), "limit"), (json!({"limit": 1001}), "limit")] {
        let (status, err) = app.post(&suggest, body).await;
        let err = assert_error(status, &err, StatusCode::BAD_REQUEST, "invalid_request");
        assert_eq!(err["details"]["field"], field);
    }
    let (status, err) = app.post(&suggest, json!({"count": 3})).await;
    assert_error(status, &err, StatusCode::BAD_REQUEST, "invalid_request");
    let (status, err) = app
        .post(&format!("/v1/worlds/{}/evals/suggest", uuid::Uuid::new_v4()), json!({}))
        .await;
    assert_error(status, &err, StatusCode::NOT_FOUND, "world_not_found");
}
