//! Filters (which sources a retrieval searches), the `expand` setting and the quality signal.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{ISLES, id, sentence, setup, texts, warning_codes};
use crate::helpers::assert_error;

const OTHER: &str = "Queen Maren keeps a second tower in the southern desert. \
    Caravans bring salt and amber to its gates.";

fn filenames(answer: &Value) -> Vec<String> {
    let mut names: Vec<String> = answer["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["source_filename"].as_str().unwrap().to_owned())
        .collect();
    names.sort();
    names.dedup();
    names
}

#[tokio::test]
async fn a_filter_limits_the_search_to_the_sources_it_names() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES), ("desert.txt", OTHER)]).await;
    let (_, sources) = s.app.get(&format!("/v1/worlds/{}/sources", s.world_id())).await;
    let desert = sources["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["filename"] == "desert.txt")
        .unwrap()
        .clone();
    let query = "where does queen maren keep a tower";
    let everything = s.ok(json!({"query": query, "top_k": 20})).await;
    assert_eq!(filenames(&everything), ["desert.txt", "isles.txt"], "{everything}");

    for filter in [
        json!({"source_ids": [id(&desert)]}),
        json!({"book_numbers": [desert["book_number"]]}),
        json!({"filenames": ["desert.txt"]}),
        json!({"filenames": ["desert.txt", "nothing.txt"], "book_numbers": [2]}),
    ] {
        let answer = s.ok(json!({"query": query, "top_k": 20, "filter": filter})).await;
        assert_eq!(filenames(&answer), ["desert.txt"], "{filter}: {answer}");
        assert_eq!(answer["results"].as_array().unwrap().len(), 2, "{filter}: {answer}");
    }
    // Lists must all match: a source named by one and not the other is out.
    let answer = s
        .ok(json!({"query": query, "filter": {"filenames": ["desert.txt"], "book_numbers": [1]}}))
        .await;
    assert_eq!(answer["results"], json!([]), "{answer}");
    assert_eq!(warning_codes(&answer), ["filter_matched_nothing"]);
    assert_eq!(answer["context"]["text"], "");
}

#[tokio::test]
async fn a_filter_that_matches_nothing_costs_no_provider_call() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let before = s.fake.stats().requests;
    let answer = s
        .ok(json!({"query": "who rules", "filter": {"filenames": ["missing.txt"]}}))
        .await;
    assert_eq!(answer["results"], json!([]));
    assert_eq!(warning_codes(&answer), ["filter_matched_nothing"]);
    assert_eq!(s.fake.stats().requests, before, "no query embedding");
}

#[tokio::test]
async fn bad_filters_and_expand_values_are_400_naming_the_field_before_the_world_is_read() {
    let s = setup().await;
    let missing = format!("/v1/worlds/{}/retrieve", uuid::Uuid::new_v4());
    for (body, field) in [
        (json!({"query": "q", "filter": ["x"]}), "filter"),
        (json!({"query": "q", "filter": {"colour": ["red"]}}), "filter.colour"),
        (json!({"query": "q", "filter": {"metadata": ["x"]}}), "filter.metadata"),
        (
            json!({"query": "q", "filter": {"metadata": "lang=en"}}),
            "filter.metadata",
        ),
        (json!({"query": "q", "filter": {"metadata": {}}}), "filter.metadata"),
        (
            json!({"query": "q", "filter": {"metadata": {"lang": 1}}}),
            "filter.metadata.lang",
        ),
        (
            json!({"query": "q", "filter": {"metadata": {"lang": ["en", "fr"]}}}),
            "filter.metadata.lang",
        ),
        (
            json!({"query": "q", "filter": {"metadata": {"lang": "e".repeat(1025)}}}),
            "filter.metadata.lang",
        ),
        (
            json!({"query": "q", "filter": {"metadata": {"bad key": "x"}}}),
            "filter.metadata",
        ),
        (
            json!({"query": "q", "filter": {"metadata": {"k".repeat(65): "x"}}}),
            "filter.metadata",
        ),
        (
            json!({"query": "q", "filter": {"metadata": (0..65).map(|i| (format!("k{i}"), json!("v"))).collect::<serde_json::Map<_, _>>()}}),
            "filter.metadata",
        ),
        (
            json!({"query": "q", "filter": {"source_ids": ["not-a-uuid"]}}),
            "filter.source_ids",
        ),
        (json!({"query": "q", "filter": {"source_ids": []}}), "filter.source_ids"),
        (
            json!({"query": "q", "filter": {"book_numbers": [0]}}),
            "filter.book_numbers",
        ),
        (
            json!({"query": "q", "filter": {"book_numbers": "1"}}),
            "filter.book_numbers",
        ),
        (json!({"query": "q", "filter": {"filenames": [1]}}), "filter.filenames"),
        (
            json!({"query": "q", "filter": {"filenames": vec!["a"; 1001]}}),
            "filter.filenames",
        ),
        (json!({"query": "q", "expand": "parents"}), "expand"),
        (json!({"query": "q", "expand": 1}), "expand"),
        (json!({"query": "q", "expand": "none", "neighbors": 2}), "expand"),
    ] {
        // A world that does not exist: the settings are judged first.
        let (status, error) = s.app.post(&missing, body.clone()).await;
        let error = assert_error(status, &error, StatusCode::BAD_REQUEST, "invalid_retrieval_settings");
        assert_eq!(error["details"]["field"], field, "{body}");
    }
    assert_eq!(s.fake.stats().requests, 0);
}

#[tokio::test]
async fn expand_neighbors_is_the_neighbors_setting() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let query = "river cities of the south trade amber and wool";
    let expanded = s.ok(json!({"query": query, "top_k": 1, "expand": "neighbors"})).await;
    assert_eq!(texts(&expanded), [sentence(2)]);
    let context: Vec<&str> = expanded["context"]["chunks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(
        context,
        [sentence(1), sentence(2), sentence(3)],
        "one on each side by default"
    );
    let old = s.ok(json!({"query": query, "top_k": 1, "neighbors": 1})).await;
    assert_eq!(old["context"], expanded["context"], "the old field keeps working");
    let two = s
        .ok(json!({"query": query, "top_k": 1, "expand": "neighbors", "neighbors": 2}))
        .await;
    assert_eq!(two["context"]["chunks"].as_array().unwrap().len(), 5);
    let none = s.ok(json!({"query": query, "top_k": 1, "expand": "none"})).await;
    assert_eq!(none["context"]["chunks"], json!([sentence(2)]));
}

#[tokio::test]
async fn the_answer_says_how_far_to_trust_it() {
    let s = setup().await;
    s.ingest(&[("isles.txt", ISLES)]).await;
    let exact = s.ok(json!({"query": sentence(0), "top_k": 3})).await;
    let quality = &exact["quality"];
    assert_eq!(quality["level"], "high", "the exact sentence: {exact}");
    let best = quality["best_score"].as_f64().unwrap();
    let second = exact["results"][1]["score"].as_f64().unwrap();
    assert!((best - exact["results"][0]["score"].as_f64().unwrap()).abs() < 1e-6);
    assert!(
        (quality["score_gap"].as_f64().unwrap() - (best - second)).abs() < 1e-5,
        "{exact}"
    );

    let vague = s.ok(json!({"query": "zebra quantum violin", "top_k": 3})).await;
    assert_eq!(vague["quality"]["level"], "low", "{vague}");

    let nothing = s
        .ok(json!({"query": "zebra quantum violin", "top_k": 3, "min_score": 0.99}))
        .await;
    assert_eq!(nothing["results"], json!([]));
    assert_eq!(nothing["quality"]["level"], "none");
}

/// Four one-chunk sources, every one with "tower" in it, three with metadata (the first also
/// with a title and URL) and one without.
async fn described_sources(s: &super::Setup) {
    let sources = [
        (
            "north.txt",
            "The northern tower stands on the salt cliffs.",
            json!({"title": "The North", "url": "https://example.com/north", "metadata": {"lang": "en", "region": "north"}}),
        ),
        (
            "south.txt",
            "The southern tower guards the desert road.",
            json!({"metadata": {"lang": "en", "region": "south"}}),
        ),
        (
            "nord.txt",
            "The tower of the northern isles speaks French.",
            json!({"metadata": {"lang": "fr", "region": "north"}}),
        ),
        ("plain.txt", "The plain tower has no description.", json!({})),
    ];
    for (filename, text, extra) in sources {
        let mut body = extra;
        body["filename"] = json!(filename);
        body["text"] = json!(text);
        let (status, accepted) = s.app.post(&format!("/v1/worlds/{}/sources", s.world_id()), body).await;
        assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    }
    s.app.drain().await;
    s.fake.reset_stats();
}

#[tokio::test]
async fn hits_carry_their_sources_title_url_and_metadata() {
    let s = setup().await;
    described_sources(&s).await;
    let answer = s.ok(json!({"query": "which tower", "top_k": 10})).await;
    let results = answer["results"].as_array().unwrap();
    assert_eq!(results.len(), 4, "{answer}");
    for hit in results {
        let expected = match hit["source_filename"].as_str().unwrap() {
            "north.txt" => json!(["The North", "https://example.com/north", {"lang": "en", "region": "north"}]),
            "south.txt" => json!([null, null, {"lang": "en", "region": "south"}]),
            "nord.txt" => json!([null, null, {"lang": "fr", "region": "north"}]),
            _ => json!([null, null, {}]),
        };
        assert_eq!(json!([hit["title"], hit["url"], hit["metadata"]]), expected, "{hit}");
    }
}

#[tokio::test]
async fn a_metadata_filter_keeps_the_sources_that_have_every_given_value() {
    let s = setup().await;
    described_sources(&s).await;
    for (filter, expected) in [
        (json!({"metadata": {"lang": "en"}}), vec!["north.txt", "south.txt"]),
        (json!({"metadata": {"region": "north"}}), vec!["nord.txt", "north.txt"]),
        (
            json!({"metadata": {"lang": "en", "region": "north"}}),
            vec!["north.txt"],
        ),
        (json!({"metadata": {"lang": "fr", "region": "north"}}), vec!["nord.txt"]),
        (
            json!({"metadata": {"lang": "en"}, "filenames": ["south.txt", "plain.txt"]}),
            vec!["south.txt"],
        ),
        (
            json!({"metadata": {"lang": "en"}, "book_numbers": [1, 3]}),
            vec!["north.txt"],
        ),
        (json!({"metadata": null, "filenames": ["plain.txt"]}), vec!["plain.txt"]),
    ] {
        let answer = s
            .ok(json!({"query": "which tower", "top_k": 10, "filter": filter}))
            .await;
        assert_eq!(filenames(&answer), expected, "{filter}: {answer}");
        assert_eq!(warning_codes(&answer), Vec::<String>::new(), "{filter}: {answer}");
    }
    let searched = s.fake.stats().requests;
    // Values match exactly, every key must be there, and all of them must match.
    for filter in [
        json!({"metadata": {"lang": "EN"}}),
        json!({"metadata": {"lang": "en", "region": "east"}}),
        json!({"metadata": {"lang": "fr", "region": "south"}}),
        json!({"metadata": {"colour": ""}}),
        json!({"metadata": {"region": "north"}, "filenames": ["south.txt"]}),
    ] {
        let answer = s.ok(json!({"query": "which tower", "filter": filter})).await;
        assert_eq!(answer["results"], json!([]), "{filter}: {answer}");
        assert_eq!(warning_codes(&answer), ["filter_matched_nothing"], "{filter}");
        assert_eq!(answer["mode_used"], Value::Null);
    }
    assert_eq!(
        s.fake.stats().requests,
        searched,
        "no query embedding for an empty match"
    );
}
