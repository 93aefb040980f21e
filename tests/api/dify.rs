//! `POST /dify/retrieval`: Dify's External Knowledge API over a world, with the requests,
//! answers and errors of Dify's documentation (transcribed below), its metadata conditions, and
//! the same bearer tokens and scopes as `/v1`.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::helpers::{TOKEN, TestApp, spawn_app_with};

async fn dify(app: &TestApp, authorization: Option<&str>, body: Value) -> (StatusCode, Value) {
    let mut request = app.client.post(app.url("/dify/retrieval")).json(&body);
    if let Some(value) = authorization {
        request = request.header("authorization", value);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.json().await.unwrap_or(Value::Null))
}

/// A world on the local model with three sources, their metadata as a Dify user would tag
/// them: the app's id and the world.
async fn knowledge(test: &str) -> Option<(TestApp, String)> {
    if !crate::local_model::model_present(test) {
        return None;
    }
    let dir = crate::local_model::model_dir();
    let app = spawn_app_with(move |s| {
        s.providers.local.model_dir = dir;
        s.embedding.workers = 0;
    })
    .await;
    let world = app.create_local_world("Dify knowledge").await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for (filename, text, metadata) in [
        (
            "dify.md",
            "Dify is an open-source platform for building applications on large language models.",
            json!({"category": "AI platform", "tag": "llm", "year": "2023", "published": "2023-05-09"}),
        ),
        (
            "bread.md",
            "Knead the dough for ten minutes, then let it rise in a warm place for an hour.",
            json!({"category": "Cooking", "tag": "baking", "year": "2019", "published": "2019-11-20"}),
        ),
        (
            "tides.md",
            "Spring tides come twice a month, when the sun and the moon pull in line.",
            json!({"category": "Science", "year": "2021"}),
        ),
    ] {
        let (status, body) = app
            .post(
                &format!("/v1/worlds/{world}/sources"),
                json!({"filename": filename, "text": text, "title": filename.trim_end_matches(".md"), "metadata": metadata}),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
    }
    app.drain().await;
    Some((app, world))
}

fn contents(answer: &Value) -> Vec<String> {
    answer["records"]
        .as_array()
        .unwrap_or_else(|| panic!("no records: {answer}"))
        .iter()
        .map(|r| r["content"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn dify_s_example_request_is_answered_with_records_of_the_world() {
    let Some((app, world)) = knowledge("dify::example").await else {
        return;
    };
    let bearer = format!("Bearer {TOKEN}");
    // Dify's request example, with the world as the knowledge id (by id, then by name).
    for knowledge_id in [world.as_str(), "Dify knowledge"] {
        let (status, answer) = dify(
            &app,
            Some(&bearer),
            json!({"knowledge_id": knowledge_id, "query": "What is Dify?",
                   "retrieval_setting": {"top_k": 2, "score_threshold": 0.0}}),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{answer}");
        let records = answer["records"].as_array().unwrap();
        assert_eq!(records.len(), 2, "{answer}");
        let first = &records[0];
        assert!(
            first["content"]
                .as_str()
                .unwrap()
                .starts_with("Dify is an open-source platform"),
            "{answer}"
        );
        let score = first["score"].as_f64().unwrap();
        assert!((0.0..=1.0).contains(&score), "{answer}");
        assert!(records[1]["score"].as_f64().unwrap() <= score);
        assert_eq!(first["title"], "dify");
        // Metadata is always an object: the source's metadata and where the text is.
        let metadata = &first["metadata"];
        assert_eq!(metadata["category"], "AI platform");
        assert_eq!(metadata["filename"], "dify.md");
        assert_eq!(metadata["char_start"], 0);
        assert!(metadata["source_id"].is_string(), "{metadata}");
    }
    // The threshold applies to the cosine similarity: a high one keeps the matching passage
    // at most; none at all is an empty list.
    let (status, answer) = dify(
        &app,
        Some(&bearer),
        json!({"knowledge_id": world, "query": "What is Dify?", "retrieval_setting": {"top_k": 3, "score_threshold": 0.3}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let kept = contents(&answer);
    assert!(!kept.is_empty() && kept.len() < 3, "{answer}");
    let (_, answer) = dify(
        &app,
        Some(&bearer),
        json!({"knowledge_id": world, "query": "What is Dify?", "retrieval_setting": {"top_k": 3, "score_threshold": 1.0}}),
    )
    .await;
    assert_eq!(answer, json!({"records": []}));
}

#[tokio::test]
async fn metadata_conditions_keep_the_sources_they_describe() {
    let Some((app, world)) = knowledge("dify::conditions").await else {
        return;
    };
    let bearer = format!("Bearer {TOKEN}");
    let ask = |condition: Value| {
        let (app, bearer, world) = (&app, bearer.clone(), world.clone());
        async move {
            dify(
                app,
                Some(&bearer),
                // Near every source (an unrelated one, its cosine below 0, is no hit).
                json!({"knowledge_id": world, "query": "the Dify platform, kneading bread dough and the spring tides of the moon",
                       "retrieval_setting": {"top_k": 5, "score_threshold": 0.0},
                       "metadata_condition": condition}),
            )
            .await
        }
    };
    let first_words = |answer: &Value| -> Vec<String> {
        let mut words: Vec<String> = contents(answer)
            .iter()
            .map(|c| c.split_whitespace().next().unwrap().to_owned())
            .collect();
        words.sort();
        words
    };
    for (condition, expected) in [
        // Dify's example: the names as a list, `contains`.
        (
            json!({"logical_operator": "and", "conditions": [{"name": ["category", "tag"], "comparison_operator": "contains", "value": "AI"}]}),
            vec!["Dify"],
        ),
        (
            json!({"conditions": [{"name": "category", "comparison_operator": "is", "value": "Cooking"}]}),
            vec!["Knead"],
        ),
        (
            json!({"conditions": [{"name": "category", "comparison_operator": "is not", "value": "Cooking"}]}),
            vec!["Dify", "Spring"],
        ),
        (
            json!({"conditions": [{"name": "category", "comparison_operator": "in", "value": ["Cooking", "Science"]}]}),
            vec!["Knead", "Spring"],
        ),
        (
            json!({"conditions": [{"name": "category", "comparison_operator": "not in", "value": ["Cooking", "Science"]}]}),
            vec!["Dify"],
        ),
        (
            json!({"conditions": [{"name": "tag", "comparison_operator": "empty"}]}),
            vec!["Spring"],
        ),
        (
            json!({"conditions": [{"name": "tag", "comparison_operator": "not empty"}]}),
            vec!["Dify", "Knead"],
        ),
        (
            json!({"conditions": [{"name": "year", "comparison_operator": "≥", "value": 2021}]}),
            vec!["Dify", "Spring"],
        ),
        (
            json!({"conditions": [{"name": "published", "comparison_operator": "before", "value": "2020-01-01"}]}),
            vec!["Knead"],
        ),
        (
            json!({"logical_operator": "or", "conditions": [
                {"name": "tag", "comparison_operator": "is", "value": "baking"},
                {"name": "category", "comparison_operator": "start with", "value": "Sci"}]}),
            vec!["Knead", "Spring"],
        ),
        (
            json!({"conditions": [{"name": "category", "comparison_operator": "is", "value": "Poetry"}]}),
            vec![],
        ),
    ] {
        let (status, answer) = ask(condition.clone()).await;
        assert_eq!(status, StatusCode::OK, "{condition}: {answer}");
        assert_eq!(first_words(&answer), expected, "{condition}");
    }
    // What it cannot honour is refused, naming why.
    for condition in [
        json!({"conditions": [{"name": "category", "comparison_operator": "sounds like", "value": "x"}]}),
        json!({"conditions": [{"name": "year", "comparison_operator": ">", "value": "recent"}]}),
        json!({"logical_operator": "xor", "conditions": []}),
        json!({"conditions": [{"name": 7, "comparison_operator": "is", "value": "x"}]}),
    ] {
        let (status, answer) = ask(condition.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{condition}: {answer}");
        assert_eq!(answer["error_code"], 400, "{answer}");
        assert_eq!(answer["code"], "invalid_request", "{answer}");
        assert!(!answer["error_msg"].as_str().unwrap().is_empty());
    }
}

#[tokio::test]
async fn dify_s_errors_are_answered_with_its_codes() {
    let Some((app, world)) = knowledge("dify::errors").await else {
        return;
    };
    let body = json!({"knowledge_id": world, "query": "What is Dify?", "retrieval_setting": {"top_k": 2, "score_threshold": 0.5}});
    let (_, made) = app
        .post("/v1/tokens", json!({"name": "metrics", "scopes": ["metrics"]}))
        .await;
    let metrics_only = format!("Bearer {}", made["secret"].as_str().unwrap());
    let (_, made) = app
        .post(
            "/v1/tokens",
            json!({"name": "elsewhere", "scopes": ["read"], "worlds": []}),
        )
        .await;
    let elsewhere = format!("Bearer {}", made["secret"].as_str().unwrap());
    let (_, made) = app
        .post("/v1/tokens", json!({"name": "dify", "scopes": ["read"]}))
        .await;
    let reader = format!("Bearer {}", made["secret"].as_str().unwrap());
    for (authorization, body, status, code) in [
        (None, body.clone(), StatusCode::UNAUTHORIZED, 1001),
        (Some("Basic Zm9vOmJhcg=="), body.clone(), StatusCode::UNAUTHORIZED, 1001),
        (Some("Bearer "), body.clone(), StatusCode::UNAUTHORIZED, 1001),
        (Some("Bearer not-a-token"), body.clone(), StatusCode::FORBIDDEN, 1002),
        (Some(metrics_only.as_str()), body.clone(), StatusCode::FORBIDDEN, 1002),
        (Some(elsewhere.as_str()), body.clone(), StatusCode::NOT_FOUND, 2001),
        (
            Some(reader.as_str()),
            json!({"knowledge_id": "AAA-BBB-CCC", "query": "What is Dify?", "retrieval_setting": {"top_k": 2, "score_threshold": 0.5}}),
            StatusCode::NOT_FOUND,
            2001,
        ),
        (
            Some(reader.as_str()),
            json!({"knowledge_id": uuid::Uuid::new_v4(), "query": "q", "retrieval_setting": {"top_k": 2, "score_threshold": 0.5}}),
            StatusCode::NOT_FOUND,
            2001,
        ),
        (
            Some(reader.as_str()),
            json!({"knowledge_id": world, "query": "q"}),
            StatusCode::BAD_REQUEST,
            400,
        ),
        (
            Some(reader.as_str()),
            json!({"knowledge_id": world, "query": "q", "retrieval_setting": {"top_k": 0, "score_threshold": 0.5}}),
            StatusCode::BAD_REQUEST,
            400,
        ),
        (
            Some(reader.as_str()),
            json!({"knowledge_id": world, "query": "q", "retrieval_setting": {"top_k": 2, "score_threshold": 1.5}}),
            StatusCode::BAD_REQUEST,
            400,
        ),
    ] {
        let (got, answer) = dify(&app, authorization, body.clone()).await;
        assert_eq!(
            (got, answer["error_code"].as_u64()),
            (status, Some(code)),
            "{authorization:?} {body}: {answer}"
        );
        assert!(answer["error_msg"].is_string(), "{answer}");
    }
    // A `read` token is enough.
    let (status, answer) = dify(&app, Some(&reader), body).await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    // `top_k: 2.0` is the integer 2.
    let (status, answer) = dify(
        &app,
        Some(&reader),
        json!({"knowledge_id": world, "query": "What is Dify?", "retrieval_setting": {"top_k": 2.0, "score_threshold": 0.0}}),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["records"].as_array().unwrap().len(), 2, "{answer}");
}

#[tokio::test]
async fn a_token_past_its_rate_is_told_when_to_come_back_in_dify_s_shape() {
    let app = spawn_app_with(|_| {}).await;
    let (_, made) = app
        .post(
            "/v1/tokens",
            json!({"name": "dify", "scopes": ["read"], "rate_per_minute": 1}),
        )
        .await;
    let bearer = format!("Bearer {}", made["secret"].as_str().unwrap());
    let body =
        json!({"knowledge_id": "nowhere", "query": "q", "retrieval_setting": {"top_k": 1, "score_threshold": 0}});
    let mut limited = None;
    for _ in 0..3 {
        let response = app
            .client
            .post(app.url("/dify/retrieval"))
            .header("authorization", &bearer)
            .json(&body)
            .send()
            .await
            .unwrap();
        if response.status() == StatusCode::TOO_MANY_REQUESTS {
            limited = Some(response);
            break;
        }
    }
    let response = limited.expect("a rate of one a minute is reached within three requests");
    let wait: u64 = response.headers()["retry-after"].to_str().unwrap().parse().unwrap();
    assert!(wait >= 1, "{wait}");
    let answer: Value = response.json().await.unwrap();
    assert_eq!(
        (answer["error_code"].as_u64(), answer["code"].as_str()),
        (Some(429), Some("token_rate_limited"))
    );
}
