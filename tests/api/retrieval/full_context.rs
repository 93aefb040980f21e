//! Full-context mode: `mode: full`, and `mode: auto` choosing it for a corpus under
//! `retrieval.full_context_threshold`; no provider call, reading order, corpus stats, filters
//! and the budget.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{ISLES, id, setup, setup_on_fake_google, texts, warning_codes};
use crate::helpers::assert_error;

const DESERT: &str = "Queen Maren keeps a second tower in the southern desert. \
    Caravans bring salt and amber to its gates.";

fn token_total(chunks: &Value) -> u64 {
    chunks["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["token_count"].as_u64().unwrap())
        .sum()
}

#[tokio::test]
async fn auto_hands_a_small_corpus_to_the_model_whole_with_no_provider_call() {
    // The provider is unreachable: only an answer that needs no embedding can succeed.
    let s = setup_on_fake_google("Aerth", |settings| {
        settings.providers.google.base_url = "http://127.0.0.1:9".into();
        settings.providers.google.scheduling.query_wait_s = 1;
    })
    .await;
    let desert = s.add("desert.txt", DESERT).await;
    let isles = s.add("isles.txt", ISLES).await;
    // Nothing is embedded (no workers, no provider): full context needs only the stored text.
    let (status, dense) = s.retrieve(json!({"query": "who rules the isles?"})).await;
    assert_eq!(status, StatusCode::OK, "{dense}");
    assert_eq!(warning_codes(&dense), ["no_embedded_chunks"]);

    let answer = s.ok(json!({"query": "who rules the isles?", "mode": "auto"})).await;
    assert_eq!(answer["mode_used"], "full", "{answer}");
    assert_eq!(answer["results"], json!([]));
    assert_eq!(answer["quality"]["level"], "unrated");
    assert_eq!(answer["warnings"], json!([]));
    // Every chunk, in reading order: book 1 (desert) before book 2 (isles).
    let (_, desert_chunks) = s
        .app
        .get(&format!(
            "/v1/worlds/{}/sources/{}/chunks",
            s.world_id(),
            id(&desert["source"])
        ))
        .await;
    let (_, isles_chunks) = s
        .app
        .get(&format!(
            "/v1/worlds/{}/sources/{}/chunks",
            s.world_id(),
            id(&isles["source"])
        ))
        .await;
    let expected: Vec<Value> = desert_chunks["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .chain(isles_chunks["chunks"].as_array().unwrap())
        .map(|c| c["chunk_text"].clone())
        .collect();
    assert_eq!(answer["context"]["chunks"], json!(expected));
    let text = answer["context"]["text"].as_str().unwrap();
    assert!(text.starts_with("[1] Queen Maren keeps a second tower"), "{text}");
    assert!(text.contains("\n\n[2] Queen Maren rules the northern isles"), "{text}");
    let citations = answer["context"]["citations"].as_array().unwrap();
    assert_eq!(citations.len(), expected.len());
    assert!(citations.iter().all(|c| c["result_index"].is_null()));
    assert_eq!(citations[0]["n"], 1);
    assert_eq!(citations.last().unwrap()["n"], 2);
    assert_eq!(citations.last().unwrap()["source_id"], isles["source"]["id"]);
    let tokens = token_total(&desert_chunks) + token_total(&isles_chunks);
    assert_eq!(
        answer["corpus"],
        json!({"sources": 2, "chunks": expected.len(), "tokens": tokens})
    );
    // Forced, the same; a filter narrows the corpus.
    let full = s.ok(json!({"query": "who rules the isles?", "mode": "full"})).await;
    assert_eq!(full["context"], answer["context"]);
    let filtered = s
        .ok(json!({"query": "x", "mode": "full", "filter": {"filenames": ["isles.txt"]}}))
        .await;
    assert_eq!(filtered["corpus"]["sources"], 1);
    assert_eq!(filtered["corpus"]["tokens"], token_total(&isles_chunks));
    assert!(
        filtered["context"]["text"]
            .as_str()
            .unwrap()
            .starts_with("[1] Queen Maren rules")
    );
    assert!(s.fake.stats().embed_calls.is_empty());
}

#[tokio::test]
async fn auto_searches_a_corpus_over_the_threshold_and_full_cuts_it_to_the_budget() {
    let s = setup_on_fake_google("Aerth", |settings| {
        settings.retrieval.full_context_threshold = 20;
    })
    .await;
    s.ingest(&[("isles.txt", ISLES), ("desert.txt", DESERT)]).await;
    let answer = s
        .ok(json!({"query": "who rules the northern isles?", "mode": "auto", "top_k": 2}))
        .await;
    assert_eq!(answer["mode_used"], "dense", "{answer}");
    assert_eq!(answer["corpus"]["sources"], 2);
    assert!(answer["corpus"]["tokens"].as_u64().unwrap() > 20);
    assert_eq!(texts(&answer).len(), 2);
    assert_eq!(s.fake.stats().embed_calls.len(), 1);

    // The budget caps the threshold too: a budget below the corpus searches.
    let small = s
        .ok(json!({"query": "who rules the northern isles?", "mode": "auto", "max_context_tokens": 5}))
        .await;
    assert_eq!(small["mode_used"], "dense");

    // Forced full context keeps to the budget from the start of the reading order.
    let full = s
        .ok(json!({"query": "who rules the northern isles?", "mode": "full", "max_context_tokens": 25}))
        .await;
    assert_eq!(full["mode_used"], "full");
    assert_eq!(warning_codes(&full), ["context_truncated"]);
    let kept = full["context"]["chunks"].as_array().unwrap();
    assert!(!kept.is_empty() && kept.len() < 8, "{full}");
    assert!(kept[0].as_str().unwrap().starts_with("Queen Maren rules"));
    assert_eq!(s.fake.stats().embed_calls.len(), 2, "full context embeds nothing");
}

#[tokio::test]
async fn full_context_of_an_empty_world_is_the_usual_empty_answer() {
    let s = setup().await;
    for mode in ["full", "auto"] {
        let answer = s.ok(json!({"query": "anything", "mode": mode})).await;
        assert_eq!(answer["results"], json!([]));
        assert_eq!(answer["context"]["text"], "");
        assert_eq!(warning_codes(&answer), ["no_embedded_chunks"]);
        assert_eq!(answer["corpus"], json!({"sources": 0, "chunks": 0, "tokens": 0}));
    }
    assert_eq!(s.fake.stats().embed_calls.len(), 0);
    // A bad mode is refused, as is a fusion with `full`.
    for (body, field) in [
        (json!({"query": "q", "mode": "everything"}), "mode"),
        (
            json!({"query": "q", "mode": "full", "fusion": {"method": "rrf"}}),
            "fusion",
        ),
    ] {
        let (status, error) = s.retrieve(body).await;
        assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_retrieval_settings");
        assert_eq!(error["error"]["details"]["field"], field);
    }
}
