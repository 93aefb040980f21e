//! The answer's context: chunk text only, neighbours stitched in reading order, and the token
//! budget.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{ISLES, add_to, id, sentence, setup, setup_on_fake_google, texts, warning_codes};

fn context(answer: &Value) -> Vec<String> {
    answer["context"]["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_owned())
        .collect()
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
            json!({"query": "the river cities trade amber and wool", "top_k": 2, "expand": "none"}),
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
    let marked: Vec<String> = (texts(&answer).iter().enumerate())
        .map(|(i, t)| format!("[{}] {t}", i + 1))
        .collect();
    assert_eq!(text, marked.join("\n\n"), "each hit its own numbered passage");
    // One citation per context chunk, pointing at its hit and its span in the source.
    let citations = answer["context"]["citations"].as_array().unwrap();
    assert_eq!(citations.len(), 2, "{answer}");
    for (i, (citation, result)) in citations.iter().zip(results).enumerate() {
        assert_eq!(citation["n"], i + 1);
        assert_eq!(citation["result_index"], i);
        for field in [
            "chunk_id",
            "source_id",
            "book_number",
            "chunk_number",
            "char_start",
            "char_end",
        ] {
            assert_eq!(citation[field], result[field], "{field}: {answer}");
        }
    }
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
        format!(
            "[1] {}",
            [sentence(1), sentence(2), sentence(3), sentence(4)].join("\n\n")
        ),
        "one passage, one number"
    );
    // Every chunk of the passage cites it; neighbours cite the passage's best hit.
    let citations = answer["context"]["citations"].as_array().unwrap();
    let cited: Vec<(u64, u64, u64)> = citations
        .iter()
        .map(|c| {
            (
                c["n"].as_u64().unwrap(),
                c["chunk_number"].as_u64().unwrap(),
                c["result_index"].as_u64().unwrap(),
            )
        })
        .collect();
    let best = hits[0];
    let rank_of = |n: u64| if n == hits[1] { 1 } else { 0 };
    assert_eq!(
        cited,
        [(1, 1, 0), (1, 2, rank_of(2)), (1, 3, rank_of(3)), (1, 4, 0)],
        "best hit {best}: {answer}"
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

    // Room for the hit and one neighbour: the window reads forward, so the hit's continuation
    // comes first (the isles are plain text without headings: one section).
    let answer = s.ok(ask(tokens[2] + tokens[3])).await;
    assert_eq!(context(&answer), [sentence(2), sentence(3)]);
    assert_eq!(warning_codes(&answer), ["context_truncated"], "{answer}");
    assert!(
        answer["warnings"][0]["message"].as_str().unwrap().contains("1 chunk"),
        "{answer}"
    );

    // Room for the hit only, then for less than the hit: its beginning, cut at a boundary,
    // rather than an empty context; the results never change.
    let answer = s.ok(ask(tokens[2])).await;
    assert_eq!(context(&answer), [sentence(2)]);
    let answer = s.ok(ask(tokens[2] - 1)).await;
    let cut = context(&answer);
    assert_eq!(cut.len(), 1, "{answer}");
    assert!(
        !cut[0].is_empty() && sentence(2).starts_with(&cut[0]) && cut[0] != sentence(2),
        "{answer}"
    );
    assert_eq!(answer["context"]["text"], format!("[1] {}", cut[0]));
    let citation = &answer["context"]["citations"][0];
    assert_eq!(
        citation["char_end"].as_u64().unwrap() - citation["char_start"].as_u64().unwrap(),
        cut[0].chars().count() as u64,
        "the citation spans the cut text: {answer}"
    );
    assert_eq!(texts(&answer), [sentence(2)], "results are not cut: {answer}");
    assert_eq!(warning_codes(&answer), ["context_cut", "context_truncated"]);
}

#[tokio::test]
async fn the_configured_context_budget_applies_when_the_request_names_none() {
    let s = setup_on_fake_google("Tight", |s| s.retrieval.max_context_tokens = 1).await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let answer = s.ok(json!({"query": "who rules the northern isles", "top_k": 3})).await;
    assert_eq!(texts(&answer).len(), 3);
    let cut = context(&answer);
    assert_eq!(cut.len(), 1, "the best hit's first word: {answer}");
    assert!(texts(&answer)[0].starts_with(&cut[0]), "{answer}");
    assert_eq!(warning_codes(&answer), ["context_cut", "context_truncated"]);
    let answer = s
        .ok(json!({"query": "who rules the northern isles", "top_k": 3, "max_context_tokens": 1000}))
        .await;
    assert_eq!(context(&answer).len(), 3, "the request's budget wins");
}
