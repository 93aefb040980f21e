//! Ranking: the best passage first with every field, the `top_k` clamp, `min_score`, ties,
//! worlds that never see each other, and hybrid search.

use reqwest::StatusCode;
use serde_json::json;

use super::{ISLES, add_to, create_world, id, scores, sentence, setup, setup_with, texts};

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
async fn equal_scores_are_ordered_by_book_then_chunk_number_and_identical_texts_fold_into_one_hit() {
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
        // A four-way tie of one text: the first by book and chunk number stands for it, and
        // lists the others' chunks in that order.
        assert_eq!(order, [(1, 0)], "{answer}");
        let duplicates = answer["results"][0]["duplicates"].as_array().unwrap();
        let mut distinct: Vec<&str> = duplicates.iter().map(|d| d.as_str().unwrap()).collect();
        distinct.push(answer["results"][0]["chunk_id"].as_str().unwrap());
        distinct.sort_unstable();
        distinct.dedup();
        assert_eq!(distinct.len(), 4, "three other chunks: {answer}");
        assert_eq!(
            answer["context"]["chunks"],
            json!([answer["results"][0]["chunk_text"]]),
            "the context never repeats a text"
        );
    }
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
