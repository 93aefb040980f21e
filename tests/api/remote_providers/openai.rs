//! The OpenAI adapter against the fake server: request shapes, dimensions, keyless servers,
//! splitting by batch size and token budget, local refusals; and both adapters' constructors
//! refusing bad settings.

use std::time::Duration;

use quarry::config::{EncodingFormat, OpenAiSettings, RemoteProviderSettings};
use quarry::domain::ProviderKind;
use quarry::providers::google::GoogleProvider;
use quarry::providers::http::HttpOptions;
use quarry::providers::openai::{OpenAiOptions, OpenAiProvider, cl100k_tokens};
use quarry::providers::{EmbedMode, EmbedRequest, EmbeddingProvider, ModelRegistry, ProviderError};

use crate::fake_providers::{Failure, FakeOpenAi, api_key, fake_vector, unit};

use super::{OPENAI_KEY, assert_close, http, openai, openai_default, openai_outcome, request, texts};

/// An OpenAI provider on `fake` that sends at most `budget` tokens per request.
fn openai_with_budget(fake: &FakeOpenAi, budget: u64) -> OpenAiProvider {
    openai(
        fake,
        OpenAiOptions {
            max_tokens_per_request: budget,
            ..OpenAiOptions::default()
        },
    )
}

#[tokio::test]
async fn openai_request_shape_bearer_key_and_order_by_index() {
    let fake = FakeOpenAi::start(&[OPENAI_KEY]).await;
    let provider = openai_default(&fake);
    let input = texts(&["red apples", "green pears", "yellow bananas"]);
    let vectors = provider
        .embed(
            Some(&api_key(OPENAI_KEY)),
            request("text-embedding-3-small", 1536, EmbedMode::Query, &input),
        )
        .await
        .unwrap();
    let stats = fake.stats();
    assert_eq!(stats.endpoint("embeddings"), 1);
    let call = &stats.embed_calls[0];
    assert_eq!(call.key.as_deref(), Some(OPENAI_KEY));
    assert_eq!(
        call.body,
        serde_json::json!({"input": ["red apples", "green pears", "yellow bananas"],
            "model": "text-embedding-3-small", "encoding_format": "base64"})
    );
    // The fake lists `data` in reverse: the adapter must place each by `index`.
    for (text, v) in input.iter().zip(&vectors) {
        assert_close(v, &unit(fake_vector(text, 1536)));
    }

    // `encoding_format = "float"` for servers that refuse base64: numbers, read the same.
    let floats = openai(
        &fake,
        OpenAiOptions {
            http: http(Duration::from_secs(10)),
            encoding_format: EncodingFormat::Float,
            ..OpenAiOptions::default()
        },
    );
    let again = floats
        .embed(
            Some(&api_key(OPENAI_KEY)),
            request("text-embedding-3-small", 1536, EmbedMode::Query, &input),
        )
        .await
        .unwrap();
    let call = fake.stats().embed_calls.pop().unwrap();
    assert_eq!(call.body["encoding_format"], "float");
    assert_eq!(again, vectors, "both forms carry the same f32 values");
    for failure in [Failure::WrongLength, Failure::NonFinite] {
        let err = openai_outcome(&fake, &floats, &api_key(OPENAI_KEY), failure.clone()).await;
        assert!(matches!(err, ProviderError::Malformed { .. }), "{failure:?}: {err:?}");
    }
}

#[tokio::test]
async fn openai_dimensions_are_sent_only_where_allowed() {
    let fake = FakeOpenAi::start(&[OPENAI_KEY]).await;
    fake.add_model("nomic-embed-text", 768, false);
    fake.add_model("matryoshka", 1024, true);
    let provider = openai_default(&fake);
    let key = api_key(OPENAI_KEY);
    let input = texts(&["hello world"]);
    let cases = [
        ("text-embedding-3-small", 512, Some(512)),
        ("text-embedding-3-small", 1536, None),
        ("text-embedding-3-large", 256, Some(256)),
        ("nomic-embed-text", 768, None),
        ("matryoshka", 64, Some(64)),
    ];
    for (model, dimensions, sent) in cases {
        let vectors = provider
            .embed(Some(&key), request(model, dimensions, EmbedMode::Document, &input))
            .await
            .unwrap();
        assert_eq!(vectors[0].len(), dimensions as usize);
        let call = fake.stats().embed_calls.pop().unwrap();
        assert_eq!(call.dimensions, vec![sent], "{model} at {dimensions}");
        assert_eq!(call.body.get("dimensions").is_some(), sent.is_some());
    }
    let before = fake.stats().requests;
    let err = provider
        .embed(
            Some(&key),
            request("nomic-embed-text", 512, EmbedMode::Document, &input),
        )
        .await;
    assert!(matches!(err, Err(ProviderError::Permanent { .. })), "{err:?}");
    let err = provider
        .embed(Some(&key), request("unknown-model", 512, EmbedMode::Document, &input))
        .await;
    assert!(matches!(err, Err(ProviderError::Permanent { .. })), "{err:?}");
    assert_eq!(fake.stats().requests, before, "refused locally");
}

#[tokio::test]
async fn openai_keyless_servers_get_no_authorization_header() {
    let fake = FakeOpenAi::keyless().await;
    fake.add_model("nomic-embed-text", 768, false);
    let provider = openai_default(&fake);
    let input = texts(&["local model text"]);
    let vectors = provider
        .embed(None, request("nomic-embed-text", 768, EmbedMode::Document, &input))
        .await
        .unwrap();
    assert_eq!(vectors.len(), 1);
    assert_eq!(fake.stats().embed_calls[0].key, None);
    assert_eq!(fake.stats().key(""), 1);
}

#[tokio::test]
async fn openai_splits_requests_by_batch_size_in_order() {
    let fake = FakeOpenAi::start(&[OPENAI_KEY]).await;
    let provider = openai(
        &fake,
        OpenAiOptions {
            max_batch_size: 3,
            ..OpenAiOptions::default()
        },
    );
    let input: Vec<String> = (0..8).map(|i| format!("item {i}")).collect();
    let vectors = provider
        .embed(
            Some(&api_key(OPENAI_KEY)),
            request("text-embedding-3-small", 64, EmbedMode::Document, &input),
        )
        .await
        .unwrap();
    let calls = fake.stats().embed_calls;
    assert_eq!(calls.iter().map(|c| c.texts.len()).collect::<Vec<_>>(), vec![3, 3, 2]);
    assert_eq!(calls.iter().flat_map(|c| c.texts.clone()).collect::<Vec<_>>(), input);
    for (text, v) in input.iter().zip(&vectors) {
        assert_close(v, &unit(fake_vector(text, 64)));
    }
    let registry = ModelRegistry::builtin();
    let limits = provider.limits(registry.find(ProviderKind::OpenAi, "text-embedding-3-small").unwrap());
    assert_eq!(
        (
            limits.max_input_tokens,
            limits.max_batch_size,
            limits.max_tokens_per_request
        ),
        (8192, 3, Some(300_000))
    );
}

#[tokio::test]
async fn openai_splits_requests_by_token_budget_in_order() {
    let fake = FakeOpenAi::start(&[OPENAI_KEY]).await;
    let budget = 40;
    let provider = openai_with_budget(&fake, budget);
    let input: Vec<String> = (0..12)
        .map(|i| format!("sentence {i} has {} words", "several ".repeat(i % 5 + 1).trim_end()))
        .collect();
    let total: u64 = input.iter().map(|t| u64::from(cl100k_tokens(t))).sum();
    assert!(total > 2 * budget, "the input needs at least three requests");
    let vectors = provider
        .embed(
            Some(&api_key(OPENAI_KEY)),
            request("text-embedding-3-small", 32, EmbedMode::Document, &input),
        )
        .await
        .unwrap();
    let calls = fake.stats().embed_calls;
    assert!(calls.len() >= 3);
    for call in &calls {
        let tokens: u64 = call.texts.iter().map(|t| u64::from(cl100k_tokens(t))).sum();
        assert!(tokens <= budget, "{tokens} tokens in one request");
    }
    assert_eq!(calls.iter().flat_map(|c| c.texts.clone()).collect::<Vec<_>>(), input);
    assert_eq!(vectors.len(), input.len());
}

#[tokio::test]
async fn openai_plans_with_the_token_counts_the_caller_already_made() {
    let fake = FakeOpenAi::start(&[OPENAI_KEY]).await;
    let budget = 40;
    let provider = openai_with_budget(&fake, budget);
    let input = texts(&["one", "two", "three", "four"]);
    // Counted as 20 tokens each (the words are 1 each): two texts per request.
    let counts = [20, 20, 20, 20];
    let vectors = provider
        .embed(
            Some(&api_key(OPENAI_KEY)),
            EmbedRequest {
                token_counts: Some(&counts),
                ..request("text-embedding-3-small", 32, EmbedMode::Document, &input)
            },
        )
        .await
        .unwrap();
    assert_eq!(vectors.len(), 4);
    let calls: Vec<Vec<String>> = fake.stats().embed_calls.into_iter().map(|c| c.texts).collect();
    assert_eq!(calls, [texts(&["one", "two"]), texts(&["three", "four"])]);

    // Over the model's limit by the given count: refused without a request.
    let counts = [1, 9000, 1, 1];
    let err = provider
        .embed(
            Some(&api_key(OPENAI_KEY)),
            EmbedRequest {
                token_counts: Some(&counts),
                ..request("text-embedding-3-small", 32, EmbedMode::Document, &input)
            },
        )
        .await;
    assert_eq!(
        err,
        Err(ProviderError::InputTooLarge {
            tokens: 9000,
            limit: 40
        })
    );
    assert_eq!(fake.stats().embed_calls.len(), 2, "nothing more was sent");
}

#[tokio::test]
async fn openai_empty_and_oversized_inputs_are_refused_locally() {
    let fake = FakeOpenAi::start(&[OPENAI_KEY]).await;
    let provider = openai_default(&fake);
    let key = api_key(OPENAI_KEY);
    let empty = texts(&["fine", ""]);
    let err = provider
        .embed(
            Some(&key),
            request("text-embedding-3-small", 1536, EmbedMode::Document, &empty),
        )
        .await;
    assert!(matches!(err, Err(ProviderError::Permanent { .. })), "{err:?}");

    let long = vec![" hello".repeat(8193)];
    let tokens = cl100k_tokens(&long[0]);
    assert!(tokens > 8192);
    let err = provider
        .embed(
            Some(&key),
            request("text-embedding-3-small", 1536, EmbedMode::Document, &long),
        )
        .await;
    assert_eq!(err, Err(ProviderError::InputTooLarge { tokens, limit: 8192 }));

    let counts = provider
        .count_tokens(None, "text-embedding-3-small", &texts(&["hello world", ""]))
        .await
        .unwrap();
    assert_eq!(counts, vec![2, 0]);
    assert_eq!(fake.stats().requests, 0, "counting is local and refusals send nothing");
}

#[tokio::test]
async fn constructors_refuse_bad_settings() {
    let registry = ModelRegistry::builtin();
    let bad = RemoteProviderSettings {
        base_url: "not a url".into(),
        ..RemoteProviderSettings::default()
    };
    assert!(GoogleProvider::new(&bad, &registry, HttpOptions::default()).is_err());
    let settings = OpenAiSettings::default();
    let zero = OpenAiOptions {
        max_batch_size: 0,
        ..OpenAiOptions::default()
    };
    let err = OpenAiProvider::new(&settings, &registry, zero).unwrap_err();
    assert!(err.to_string().contains("max_batch_size"), "{err}");
    let provider = OpenAiProvider::new(&settings, &registry, OpenAiOptions::default()).unwrap();
    assert!(!format!("{provider:?}").contains("sk-"));
}
