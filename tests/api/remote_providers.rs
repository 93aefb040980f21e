//! The Google and OpenAI adapters against the fake servers: request shapes, batching and
//! splitting, normalisation, local refusals (no embed call made), the token cache, and every
//! failure classification end to end, with the key never showing in an error; then, through
//! the whole app, the adapters' configured limits and timeouts and OpenAI's per-day limits.

use std::time::{Duration, SystemTime};

use chrono::{DateTime, Utc};
use quarry::config::{EncodingFormat, ExtraModel, OpenAiSettings, RemoteProviderSettings, Settings};
use quarry::domain::ProviderKind;
use quarry::providers::google::GoogleProvider;
use quarry::providers::http::HttpOptions;
use quarry::providers::openai::{OpenAiOptions, OpenAiProvider, cl100k_tokens};
use quarry::providers::{
    ApiKey, EmbedMode, EmbedRequest, EmbeddingProvider, ModelRegistry, ProviderError, RateLimitScope,
};

use reqwest::StatusCode;
use secrecy::SecretString;
use serde_json::{Value, json};

use crate::fake_providers::{Failure, FakeGoogle, FakeOpenAi, api_key, fake_vector, unit};
use crate::helpers::{TestApp, assert_error, spawn_app_with};

const GOOGLE_KEY: &str = "AIza-fake-SECRET-google-1";
const OPENAI_KEY: &str = "sk-fake-SECRET-openai-1";
const GEMINI: &str = "gemini-embedding-001";

fn http(request_timeout: Duration) -> HttpOptions {
    HttpOptions {
        connect_timeout: Duration::from_secs(5),
        request_timeout,
    }
}

fn google(fake: &FakeGoogle) -> GoogleProvider {
    google_with(fake, http(Duration::from_secs(10)))
}

fn google_with(fake: &FakeGoogle, options: HttpOptions) -> GoogleProvider {
    let settings = RemoteProviderSettings {
        base_url: fake.base_url(),
        ..RemoteProviderSettings::default()
    };
    GoogleProvider::new(&settings, &ModelRegistry::new(&[]), options).unwrap()
}

fn extra_models() -> Vec<ExtraModel> {
    vec![
        ExtraModel {
            name: "nomic-embed-text".into(),
            dimensions: 768,
            max_input_tokens: 2048,
            dimensions_adjustable: false,
        },
        ExtraModel {
            name: "matryoshka".into(),
            dimensions: 1024,
            max_input_tokens: 512,
            dimensions_adjustable: true,
        },
    ]
}

fn openai(fake: &FakeOpenAi, options: OpenAiOptions) -> OpenAiProvider {
    let settings = OpenAiSettings {
        base_url: fake.base_url(),
        models: extra_models(),
        ..OpenAiSettings::default()
    };
    OpenAiProvider::new(&settings, &ModelRegistry::new(&extra_models()), options).unwrap()
}

fn openai_default(fake: &FakeOpenAi) -> OpenAiProvider {
    openai(
        fake,
        OpenAiOptions {
            http: http(Duration::from_secs(10)),
            ..OpenAiOptions::default()
        },
    )
}

fn texts(items: &[&str]) -> Vec<String> {
    items.iter().map(|t| (*t).to_owned()).collect()
}

fn request<'a>(model: &'a str, dimensions: u32, mode: EmbedMode, texts: &'a [String]) -> EmbedRequest<'a> {
    EmbedRequest {
        model,
        dimensions,
        mode,
        texts,
        token_counts: None,
    }
}

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

fn assert_close(a: &[f32], b: &[f32]) {
    assert_eq!(a.len(), b.len());
    for (x, y) in a.iter().zip(b) {
        assert!((x - y).abs() < 1e-5, "{x} != {y}");
    }
}

/// Neither the message nor the `Debug` output of `err` may contain `secret`.
fn assert_no_secret(err: &ProviderError, secret: &str) {
    let shown = format!("{err} {err:?}");
    assert!(!shown.contains(secret), "key leaked: {shown}");
}

// ---------------------------------------------------------------------------------------------
// Google: request shapes

#[tokio::test]
async fn google_single_text_uses_embed_content_with_header_key_task_type_and_dimensions() {
    let fake = FakeGoogle::start(&[GOOGLE_KEY]).await;
    let provider = google(&fake);
    let key = api_key(GOOGLE_KEY);
    let input = texts(&["the quick brown fox"]);
    let vectors = provider
        .embed(Some(&key), request(GEMINI, 768, EmbedMode::Document, &input))
        .await
        .unwrap();

    let stats = fake.stats();
    assert_eq!(stats.endpoint("embedContent"), 1);
    assert_eq!(stats.endpoint("batchEmbedContents"), 0);
    assert_eq!(
        stats.key(GOOGLE_KEY),
        stats.requests,
        "every request carries the key header"
    );
    let call = &stats.embed_calls[0];
    assert_eq!(call.key.as_deref(), Some(GOOGLE_KEY));
    assert_eq!(call.model, GEMINI);
    assert_eq!(call.task_types, vec![Some("RETRIEVAL_DOCUMENT".to_owned())]);
    assert_eq!(call.dimensions, vec![Some(768)]);
    assert_eq!(call.body["model"], "models/gemini-embedding-001");
    assert_eq!(call.body["content"]["parts"][0]["text"], "the quick brown fox");
    assert_eq!(vectors.len(), 1);
    assert_close(&vectors[0], &unit(fake_vector("the quick brown fox", 768)));
}

#[tokio::test]
async fn google_query_mode_sends_retrieval_query() {
    let fake = FakeGoogle::start(&[GOOGLE_KEY]).await;
    let provider = google(&fake);
    let input = texts(&["where is the fox", "and the dog"]);
    provider
        .embed(
            Some(&api_key(GOOGLE_KEY)),
            request(GEMINI, 1536, EmbedMode::Query, &input),
        )
        .await
        .unwrap();
    let call = &fake.stats().embed_calls[0];
    assert_eq!(call.endpoint, "batchEmbedContents");
    assert_eq!(call.task_types, vec![Some("RETRIEVAL_QUERY".to_owned()); 2]);
    assert_eq!(call.dimensions, vec![Some(1536); 2]);
    assert_eq!(call.body["requests"][1]["model"], "models/gemini-embedding-001");
}

#[tokio::test]
async fn google_batches_hold_at_most_100_texts_and_keep_order() {
    let fake = FakeGoogle::start(&[GOOGLE_KEY]).await;
    let provider = google(&fake);
    let input: Vec<String> = (0..250).map(|i| format!("text number {i} word{i}")).collect();
    let vectors = provider
        .embed(
            Some(&api_key(GOOGLE_KEY)),
            request(GEMINI, 128, EmbedMode::Document, &input),
        )
        .await
        .unwrap();

    let stats = fake.stats();
    let sizes: Vec<usize> = stats.embed_calls.iter().map(|c| c.texts.len()).collect();
    assert_eq!(sizes, vec![100, 100, 50]);
    let sent: Vec<String> = stats.embed_calls.iter().flat_map(|c| c.texts.clone()).collect();
    assert_eq!(sent, input);
    assert_eq!(vectors.len(), 250);
    for (text, vector) in input.iter().zip(&vectors) {
        assert_close(vector, &unit(fake_vector(text, 128)));
    }
    assert_eq!(stats.items_embedded, 250);
}

#[tokio::test]
async fn google_reduced_vectors_are_normalised_and_full_size_ones_kept() {
    let fake = FakeGoogle::start(&[GOOGLE_KEY]).await;
    let provider = google(&fake);
    let key = api_key(GOOGLE_KEY);
    let input = texts(&["alpha beta gamma", "alpha beta delta"]);

    // The fake answers reduced sizes unnormalised (norm ≥ 3): the adapter must normalise.
    assert!(norm(&fake_vector(&input[0], 256)) >= 3.0);
    let reduced = provider
        .embed(Some(&key), request(GEMINI, 256, EmbedMode::Document, &input))
        .await
        .unwrap();
    for (text, v) in input.iter().zip(&reduced) {
        assert!((norm(v) - 1.0).abs() < 1e-5);
        assert_close(v, &unit(fake_vector(text, 256)));
    }
    let full = provider
        .embed(Some(&key), request(GEMINI, 3072, EmbedMode::Document, &input))
        .await
        .unwrap();
    for (text, v) in input.iter().zip(&full) {
        assert_close(v, &unit(fake_vector(text, 3072)));
    }
    // Texts sharing words are closer than unrelated ones (the fake's vectors mean something).
    let other = texts(&["zebra crossing"]);
    let far = provider
        .embed(Some(&key), request(GEMINI, 256, EmbedMode::Document, &other))
        .await
        .unwrap();
    let dot = |a: &[f32], b: &[f32]| a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>();
    assert!(dot(&reduced[0], &reduced[1]) > dot(&reduced[0], &far[0]));
}

#[tokio::test]
async fn google_limits_come_from_the_registry() {
    let fake = FakeGoogle::start(&[]).await;
    let provider = google(&fake);
    let registry = ModelRegistry::new(&[]);
    let limits = provider.limits(registry.find(ProviderKind::Google, GEMINI).unwrap());
    assert_eq!(
        (
            limits.max_input_tokens,
            limits.max_batch_size,
            limits.max_tokens_per_request
        ),
        (2048, 100, None)
    );
    assert_eq!(provider.kind(), ProviderKind::Google);
}

// ---------------------------------------------------------------------------------------------
// Google: counting and local refusals

#[tokio::test]
async fn google_input_over_the_limit_is_refused_without_an_embed_call() {
    let fake = FakeGoogle::start(&[GOOGLE_KEY]).await;
    let provider = google(&fake);
    let long = vec!["short one".to_owned(), vec!["word"; 2049].join(" ")];
    let err = provider
        .embed(
            Some(&api_key(GOOGLE_KEY)),
            request(GEMINI, 768, EmbedMode::Document, &long),
        )
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ProviderError::InputTooLarge {
            tokens: 2049,
            limit: 2048
        }
    );
    let stats = fake.stats();
    assert_eq!(stats.embed_requests(), 0);
    assert_eq!(
        stats.endpoint("countTokens"),
        1,
        "only the text long enough to be over the limit is counted"
    );
}

#[tokio::test]
async fn google_failed_token_counts_fail_closed_without_an_embed_call() {
    let fake = FakeGoogle::start(&[GOOGLE_KEY]).await;
    let provider = google(&fake);
    let key = api_key(GOOGLE_KEY);
    // An answer that cannot be a count: the text is uncountable.
    let cases = [
        (Failure::Status(400), "400"),
        (Failure::MalformedBody, "malformed"),
        (Failure::WrongCount, "not a number"),
    ];
    for (i, (failure, label)) in cases.into_iter().enumerate() {
        fake.fail_next_count(failure);
        // Over 2,040 bytes: long enough that it has to be counted.
        let input = vec![format!("uncounted text {i} {}", "filler ".repeat(300))];
        let err = provider
            .embed(Some(&key), request(GEMINI, 768, EmbedMode::Document, &input))
            .await
            .unwrap_err();
        assert!(
            matches!(err, ProviderError::TokenCountFailed { .. }),
            "{label}: {err:?}"
        );
        assert_no_secret(&err, GOOGLE_KEY);
    }
    // A transient fault while counting is retryable, still without sending the text.
    for (i, (failure, label)) in [(Failure::Status(500), "500"), (Failure::Disconnect, "cut")]
        .into_iter()
        .enumerate()
    {
        fake.fail_next_count(failure);
        let input = vec![format!("briefly uncounted text {i} {}", "filler ".repeat(300))];
        let err = provider
            .embed(Some(&key), request(GEMINI, 768, EmbedMode::Document, &input))
            .await
            .unwrap_err();
        assert!(matches!(err, ProviderError::Transient { .. }), "{label}: {err:?}");
        assert_no_secret(&err, GOOGLE_KEY);
    }
    assert_eq!(fake.stats().embed_requests(), 0);
}

#[tokio::test]
async fn google_counting_passes_rate_limits_and_rejected_keys_through() {
    let fake = FakeGoogle::start(&[GOOGLE_KEY]).await;
    let provider = google(&fake);
    let key = api_key(GOOGLE_KEY);
    fake.fail_next_count(Failure::RateLimited(Duration::from_secs(2)));
    let err = provider
        .count_tokens(Some(&key), GEMINI, &texts(&["a b c"]))
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::RateLimited { retry_after: Some(d), .. } if d == Duration::from_secs(2)));
    let stranger = api_key("AIza-not-a-valid-key");
    let err = provider
        .count_tokens(Some(&stranger), GEMINI, &texts(&["a b c"]))
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::KeyRejected { .. }), "{err:?}");
    assert_no_secret(&err, "AIza-not-a-valid-key");
    let err = provider
        .count_tokens(None, GEMINI, &texts(&["a b c"]))
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::TokenCountFailed { .. }));
    assert_eq!(fake.stats().embed_requests(), 0);
}

#[tokio::test]
async fn google_token_counts_are_cached() {
    let fake = FakeGoogle::start(&[GOOGLE_KEY]).await;
    let provider = google(&fake);
    let key = api_key(GOOGLE_KEY);
    let input = texts(&["one two three", "four five", "one two three"]);
    let counts = provider.count_tokens(Some(&key), GEMINI, &input).await.unwrap();
    assert_eq!(counts, vec![3, 2, 3]);
    assert_eq!(
        fake.stats().endpoint("countTokens"),
        2,
        "a repeated text is counted once"
    );

    let again = provider.count_tokens(Some(&key), GEMINI, &input).await.unwrap();
    assert_eq!(again, counts);
    assert_eq!(
        fake.stats().endpoint("countTokens"),
        2,
        "the second count makes no request"
    );

    provider
        .embed(Some(&key), request(GEMINI, 768, EmbedMode::Document, &input))
        .await
        .unwrap();
    let stats = fake.stats();
    assert_eq!(
        stats.endpoint("countTokens"),
        2,
        "embed's pre-dispatch check hits the cache"
    );
    assert_eq!(stats.endpoint("batchEmbedContents"), 1);
    assert_eq!(stats.counted, texts(&["one two three", "four five"]));
}

#[tokio::test]
async fn google_unknown_models_bad_dimensions_and_missing_keys_are_refused_locally() {
    let fake = FakeGoogle::start(&[GOOGLE_KEY]).await;
    let provider = google(&fake);
    let key = api_key(GOOGLE_KEY);
    let input = texts(&["text"]);
    let err = provider
        .embed(
            Some(&key),
            request("text-embedding-004", 768, EmbedMode::Document, &input),
        )
        .await;
    assert!(matches!(err, Err(ProviderError::Permanent { .. })), "{err:?}");
    let err = provider
        .embed(Some(&key), request(GEMINI, 4096, EmbedMode::Document, &input))
        .await;
    assert!(matches!(err, Err(ProviderError::Permanent { .. })), "{err:?}");
    let err = provider
        .embed(None, request(GEMINI, 768, EmbedMode::Document, &input))
        .await;
    assert!(matches!(err, Err(ProviderError::Unavailable { .. })), "{err:?}");
    assert!(
        provider
            .embed(Some(&key), request(GEMINI, 768, EmbedMode::Document, &[]))
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(fake.stats().requests, 0);
}

// ---------------------------------------------------------------------------------------------
// Google: classification end to end

/// Scripts `failure` for the next embed call and returns what the adapter made of it.
async fn google_outcome(fake: &FakeGoogle, provider: &GoogleProvider, key: &ApiKey, failure: Failure) -> ProviderError {
    fake.fail_next(failure.clone());
    let input = texts(&["some text", "more text"]);
    let err = provider
        .embed(Some(key), request(GEMINI, 768, EmbedMode::Document, &input))
        .await
        .expect_err(&format!("{failure:?} must fail"));
    assert_no_secret(&err, GOOGLE_KEY);
    err
}

#[tokio::test]
async fn google_failures_are_classified_end_to_end() {
    let fake = FakeGoogle::start(&[GOOGLE_KEY]).await;
    let provider = google(&fake);
    let key = api_key(GOOGLE_KEY);

    let err = google_outcome(
        &fake,
        &provider,
        &key,
        Failure::RateLimited(Duration::from_millis(38_123)),
    )
    .await;
    assert!(
        matches!(err, ProviderError::RateLimited { retry_after: Some(d), scope: RateLimitScope::Short, .. } if d == Duration::from_millis(38_123)),
        "{err:?}"
    );
    let err = google_outcome(&fake, &provider, &key, Failure::BareRateLimited).await;
    assert!(
        matches!(
            err,
            ProviderError::RateLimited {
                retry_after: None,
                scope: RateLimitScope::Short,
                ..
            }
        ),
        "{err:?}"
    );
    let err = google_outcome(&fake, &provider, &key, Failure::DailyQuota).await;
    assert!(
        matches!(
            err,
            ProviderError::RateLimited {
                scope: RateLimitScope::Daily,
                ..
            }
        ),
        "{err:?}"
    );

    let err = google_outcome(&fake, &provider, &key, Failure::KeyInvalid).await;
    let ProviderError::KeyRejected { message } = &err else {
        panic!("{err:?}")
    };
    assert!(
        message.contains("[REDACTED]"),
        "the fake echoes the key; it must be redacted: {message}"
    );
    let err = google_outcome(&fake, &provider, &key, Failure::PermissionDenied).await;
    assert!(matches!(err, ProviderError::KeyRejected { .. }), "{err:?}");

    for status in [500, 503] {
        let err = google_outcome(&fake, &provider, &key, Failure::Status(status)).await;
        assert!(matches!(err, ProviderError::Transient { .. }), "{status}: {err:?}");
    }
    let err = google_outcome(&fake, &provider, &key, Failure::Disconnect).await;
    assert!(matches!(err, ProviderError::Transient { .. }), "{err:?}");

    for status in [400, 404] {
        let err = google_outcome(&fake, &provider, &key, Failure::Status(status)).await;
        let ProviderError::Permanent { message } = &err else {
            panic!("{status}: {err:?}")
        };
        assert!(
            message.contains(&format!("scripted {status}")),
            "provider's own message: {message}"
        );
    }

    for failure in [
        Failure::MalformedBody,
        Failure::WrongLength,
        Failure::WrongCount,
        Failure::NonFinite,
    ] {
        let err = google_outcome(&fake, &provider, &key, failure.clone()).await;
        assert!(matches!(err, ProviderError::Malformed { .. }), "{failure:?}: {err:?}");
    }
}

#[tokio::test]
async fn google_single_text_malformed_answers_are_refused() {
    let fake = FakeGoogle::start(&[GOOGLE_KEY]).await;
    let provider = google(&fake);
    let key = api_key(GOOGLE_KEY);
    let input = texts(&["single"]);
    for failure in [
        Failure::WrongLength,
        Failure::WrongCount,
        Failure::NonFinite,
        Failure::MalformedBody,
    ] {
        fake.fail_next(failure.clone());
        let err = provider
            .embed(Some(&key), request(GEMINI, 768, EmbedMode::Query, &input))
            .await
            .unwrap_err();
        assert!(matches!(err, ProviderError::Malformed { .. }), "{failure:?}: {err:?}");
    }
    assert_eq!(fake.stats().endpoint("embedContent"), 4);
}

#[tokio::test]
async fn google_unknown_keys_are_rejected_and_redacted() {
    let fake = FakeGoogle::start(&[GOOGLE_KEY]).await;
    let provider = google(&fake);
    let stranger = "AIza-stranger-SECRET";
    let err = provider
        .embed(
            Some(&api_key(stranger)),
            request(GEMINI, 768, EmbedMode::Document, &texts(&["x"])),
        )
        .await
        .unwrap_err();
    assert!(matches!(err, ProviderError::KeyRejected { .. }), "{err:?}");
    assert_no_secret(&err, stranger);
}

#[tokio::test]
async fn google_quota_groups_are_shared_and_429s_carry_the_window() {
    let fake = FakeGoogle::start(&[]).await;
    fake.add_key("AIza-project-a-1", Some("project-a"));
    fake.add_key("AIza-project-a-2", Some("project-a"));
    fake.add_key("AIza-project-b-1", Some("project-b"));
    fake.set_quota("project-a", 3, Duration::from_secs(60));
    fake.set_quota("project-b", 3, Duration::from_secs(60));
    let provider = google(&fake);
    let two = texts(&["first text", "second text"]);
    let one = texts(&["third text"]);

    provider
        .embed(
            Some(&api_key("AIza-project-a-1")),
            request(GEMINI, 768, EmbedMode::Document, &two),
        )
        .await
        .unwrap();
    provider
        .embed(
            Some(&api_key("AIza-project-a-2")),
            request(GEMINI, 768, EmbedMode::Document, &one),
        )
        .await
        .unwrap();
    let err = provider
        .embed(
            Some(&api_key("AIza-project-a-2")),
            request(GEMINI, 768, EmbedMode::Document, &one),
        )
        .await
        .unwrap_err();
    let ProviderError::RateLimited {
        retry_after: Some(wait),
        scope: RateLimitScope::Short,
        ..
    } = err
    else {
        panic!("{err:?}")
    };
    assert!(
        wait > Duration::from_secs(50) && wait <= Duration::from_secs(60),
        "{wait:?}"
    );
    provider
        .embed(
            Some(&api_key("AIza-project-b-1")),
            request(GEMINI, 768, EmbedMode::Document, &two),
        )
        .await
        .unwrap();
    assert_eq!(fake.stats().quota_rejections, 1);
}

#[tokio::test]
async fn google_timeouts_are_transient() {
    let fake = FakeGoogle::start(&[GOOGLE_KEY]).await;
    let provider = google_with(&fake, http(Duration::from_millis(200)));
    fake.set_latency(Duration::from_secs(2));
    let err = provider
        .count_tokens(Some(&api_key(GOOGLE_KEY)), GEMINI, &texts(&["slow"]))
        .await
        .unwrap_err();
    // A count that times out sends nothing and is retryable.
    assert!(
        matches!(&err, ProviderError::Transient { message } if message.contains("timed out")),
        "{err:?}"
    );

    let fake = FakeGoogle::start(&[GOOGLE_KEY]).await;
    let provider = google_with(&fake, http(Duration::from_millis(300)));
    let key = api_key(GOOGLE_KEY);
    let input = texts(&["slow"]);
    provider.count_tokens(Some(&key), GEMINI, &input).await.unwrap();
    fake.set_latency(Duration::from_secs(2));
    let err = provider
        .embed(Some(&key), request(GEMINI, 768, EmbedMode::Document, &input))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ProviderError::Transient { message } if message.contains("timed out")),
        "{err:?}"
    );
}

#[tokio::test]
async fn connection_refused_is_transient() {
    let fake = FakeGoogle::start(&[GOOGLE_KEY]).await;
    let provider = google(&fake);
    drop(fake);
    tokio::task::yield_now().await;
    let err = provider
        .embed(
            Some(&api_key(GOOGLE_KEY)),
            request(GEMINI, 768, EmbedMode::Document, &texts(&["x"])),
        )
        .await
        .unwrap_err();
    // The count comes first; nothing is sent, and the failure is retryable.
    assert!(
        matches!(&err, ProviderError::Transient { message } if message.contains("connect")),
        "{err:?}"
    );
}

// ---------------------------------------------------------------------------------------------
// OpenAI: request shapes

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
    let registry = ModelRegistry::new(&[]);
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
    let provider = openai(
        &fake,
        OpenAiOptions {
            max_tokens_per_request: budget,
            ..OpenAiOptions::default()
        },
    );
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
    let provider = openai(
        &fake,
        OpenAiOptions {
            max_tokens_per_request: budget,
            ..OpenAiOptions::default()
        },
    );
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

// ---------------------------------------------------------------------------------------------
// OpenAI: classification end to end

async fn openai_outcome(fake: &FakeOpenAi, provider: &OpenAiProvider, key: &ApiKey, failure: Failure) -> ProviderError {
    fake.fail_next(failure.clone());
    let input = texts(&["some text", "more text"]);
    let err = provider
        .embed(
            Some(key),
            request("text-embedding-3-small", 256, EmbedMode::Document, &input),
        )
        .await
        .expect_err(&format!("{failure:?} must fail"));
    assert_no_secret(&err, OPENAI_KEY);
    err
}

fn raw(status: u16, headers: Vec<(&'static str, String)>, body: &str) -> Failure {
    Failure::Raw {
        status,
        headers,
        body: body.to_owned(),
    }
}

#[tokio::test]
async fn openai_failures_are_classified_end_to_end() {
    let fake = FakeOpenAi::start(&[OPENAI_KEY]).await;
    let provider = openai_default(&fake);
    let key = api_key(OPENAI_KEY);

    let err = openai_outcome(
        &fake,
        &provider,
        &key,
        Failure::RateLimited(Duration::from_millis(1500)),
    )
    .await;
    assert!(
        matches!(err, ProviderError::RateLimited { retry_after: Some(d), .. } if d == Duration::from_millis(1500)),
        "{err:?}"
    );
    let limited =
        r#"{"error":{"message":"Rate limit reached","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#;
    let err = openai_outcome(
        &fake,
        &provider,
        &key,
        raw(429, vec![("retry-after", "3".into())], limited),
    )
    .await;
    assert!(
        matches!(err, ProviderError::RateLimited { retry_after: Some(d), .. } if d == Duration::from_secs(3)),
        "{err:?}"
    );
    let date = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(90));
    let err = openai_outcome(&fake, &provider, &key, raw(429, vec![("retry-after", date)], limited)).await;
    assert!(
        matches!(err, ProviderError::RateLimited { retry_after: Some(d), .. } if d > Duration::from_secs(80) && d <= Duration::from_secs(90)),
        "{err:?}"
    );
    let err = openai_outcome(&fake, &provider, &key, Failure::BareRateLimited).await;
    assert!(
        matches!(err, ProviderError::RateLimited { retry_after: None, .. }),
        "{err:?}"
    );
    let err = openai_outcome(&fake, &provider, &key, Failure::InsufficientQuota).await;
    assert!(matches!(err, ProviderError::QuotaExhausted { .. }), "{err:?}");

    let err = openai_outcome(&fake, &provider, &key, Failure::KeyInvalid).await;
    let ProviderError::KeyRejected { message } = &err else {
        panic!("{err:?}")
    };
    assert!(
        message.contains("[REDACTED]") && message.contains("HTTP 401"),
        "{message}"
    );

    for status in [500, 502, 503, 408] {
        let err = openai_outcome(&fake, &provider, &key, Failure::Status(status)).await;
        assert!(matches!(err, ProviderError::Transient { .. }), "{status}: {err:?}");
    }
    let err = openai_outcome(&fake, &provider, &key, Failure::Disconnect).await;
    assert!(matches!(err, ProviderError::Transient { .. }), "{err:?}");

    let err = openai_outcome(&fake, &provider, &key, Failure::Status(400)).await;
    let ProviderError::Permanent { message } = &err else {
        panic!("{err:?}")
    };
    assert!(message.contains("scripted 400"), "{message}");
    let tei = r#"{"error":"Input validation error: `inputs` must have less than 512 tokens. Given: 700","error_type":"Validation"}"#;
    let err = openai_outcome(&fake, &provider, &key, raw(413, vec![], tei)).await;
    assert!(
        matches!(&err, ProviderError::Permanent { message } if message.contains("less than 512 tokens")),
        "{err:?}"
    );

    for failure in [
        Failure::MalformedBody,
        Failure::WrongLength,
        Failure::WrongCount,
        Failure::NonFinite,
    ] {
        let err = openai_outcome(&fake, &provider, &key, failure.clone()).await;
        assert!(matches!(err, ProviderError::Malformed { .. }), "{failure:?}: {err:?}");
    }
}

#[tokio::test]
async fn openai_unknown_keys_and_quota_buckets_are_classified() {
    let fake = FakeOpenAi::start(&[OPENAI_KEY]).await;
    fake.set_quota(OPENAI_KEY, 1, Duration::from_secs(30));
    let provider = openai_default(&fake);
    let input = texts(&["quota text"]);
    let req = request("text-embedding-3-small", 1536, EmbedMode::Document, &input);

    let stranger = "sk-stranger-SECRET";
    let err = provider.embed(Some(&api_key(stranger)), req).await.unwrap_err();
    assert!(matches!(err, ProviderError::KeyRejected { .. }), "{err:?}");
    assert_no_secret(&err, stranger);

    let key = api_key(OPENAI_KEY);
    provider.embed(Some(&key), req).await.unwrap();
    let err = provider.embed(Some(&key), req).await.unwrap_err();
    let ProviderError::RateLimited {
        retry_after: Some(wait),
        ..
    } = err
    else {
        panic!("{err:?}")
    };
    assert!(
        wait > Duration::from_secs(25) && wait <= Duration::from_secs(30),
        "{wait:?}"
    );
    assert_no_secret(&err, OPENAI_KEY);
}

#[tokio::test]
async fn constructors_refuse_bad_settings() {
    let registry = ModelRegistry::new(&[]);
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

#[tokio::test]
async fn fake_quota_windows_follow_a_paused_clock() {
    tokio::time::pause();
    let fake = FakeOpenAi::start(&[OPENAI_KEY]).await;
    fake.set_quota(OPENAI_KEY, 1, Duration::from_secs(60));
    let provider = openai_default(&fake);
    let key = api_key(OPENAI_KEY);
    let input = texts(&["paused clock"]);
    let req = request("text-embedding-3-small", 1536, EmbedMode::Document, &input);
    provider.embed(Some(&key), req).await.unwrap();
    let err = provider.embed(Some(&key), req).await.unwrap_err();
    let ProviderError::RateLimited {
        retry_after: Some(wait),
        ..
    } = err
    else {
        panic!("{err:?}")
    };
    // Only the virtual clock counts (the runtime may auto-advance it by a few idle timers).
    assert!(
        wait > Duration::from_secs(55) && wait <= Duration::from_secs(60),
        "{wait:?}"
    );
    tokio::time::advance(Duration::from_secs(61)).await;
    provider.embed(Some(&key), req).await.unwrap();
    assert_eq!(fake.stats().quota_rejections, 1);
}

// ---------------------------------------------------------------------------------------------
// Adapter settings and per-day limits, through the whole application

/// An app whose OpenAI provider is `fake` with one configuration key, no background workers
/// and short waits for a key, then `tweak`.
async fn app_with_openai(fake: &FakeOpenAi, tweak: impl FnOnce(&mut Settings)) -> TestApp {
    let base = fake.base_url();
    spawn_app_with(move |s| {
        s.providers.openai.base_url = base;
        s.providers.openai.keys = vec![SecretString::from(OPENAI_KEY)];
        s.providers.openai.scheduling.acquire_timeout_s = 1;
        s.providers.openai.scheduling.query_wait_s = 1;
        s.embedding.workers = 0;
        tweak(s);
    })
    .await
}

/// A world on `provider`/`model` with one-sentence chunks; returns its id.
async fn remote_world(app: &TestApp, provider: &str, model: &str) -> String {
    let (status, world) = app
        .post(
            "/v1/worlds",
            json!({"name": "Settings", "embedding": {"provider": provider, "model": model, "dimensions": 128},
                   "chunking": {"max_tokens": 16, "overlap_tokens": 0}}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{world}");
    world["id"].as_str().unwrap().to_owned()
}

/// Adds a source of `sentences` one-sentence chunks; returns the 202 body.
async fn add_sentences(app: &TestApp, world: &str, sentences: usize) -> Value {
    let text: String = (0..sentences)
        .map(|i| format!("Sentence {i} tells of the harbour wall and the grey gulls above it. "))
        .collect();
    let (status, accepted) = app
        .post(
            &format!("/v1/worlds/{world}/sources"),
            json!({"filename": "harbour.txt", "text": text}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{accepted}");
    accepted
}

/// The provider's one key as `GET /v1/providers` shows it.
async fn only_key(app: &TestApp, provider: &str) -> Value {
    let (status, body) = app.get("/v1/providers").await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let keys = body["providers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["provider"] == provider)
        .unwrap_or_else(|| panic!("no {provider} in {body}"))["keys"]
        .clone();
    assert_eq!(keys.as_array().map(Vec::len), Some(1), "{keys}");
    keys[0].clone()
}

#[tokio::test]
async fn a_configured_max_batch_size_bounds_the_inputs_of_every_embeddings_request() {
    let fake = FakeOpenAi::start(&[OPENAI_KEY]).await;
    let app = app_with_openai(&fake, |s| s.providers.openai.max_batch_size = 3).await;
    let world = remote_world(&app, "openai", "text-embedding-3-small").await;
    let accepted = add_sentences(&app, &world, 10).await;
    let chunks = accepted["source"]["chunks"].as_u64().unwrap();
    assert!(chunks >= 7, "{accepted}");

    assert_eq!(app.drain().await, chunks);
    let calls = fake.stats().embed_calls;
    let sizes: Vec<usize> = calls.iter().map(|c| c.texts.len()).collect();
    assert!(sizes.iter().all(|&n| n <= 3), "inputs per request: {sizes:?}");
    assert!(sizes.contains(&3), "the bound is reached, not undercut: {sizes:?}");
    assert_eq!(sizes.iter().sum::<usize>() as u64, chunks);

    // The same work without the setting goes out in one request.
    let fake = FakeOpenAi::start(&[OPENAI_KEY]).await;
    let app = app_with_openai(&fake, |_| {}).await;
    let world = remote_world(&app, "openai", "text-embedding-3-small").await;
    add_sentences(&app, &world, 10).await;
    assert_eq!(app.drain().await, chunks);
    let sizes: Vec<usize> = fake.stats().embed_calls.iter().map(|c| c.texts.len()).collect();
    assert_eq!(sizes, vec![chunks as usize]);
}

#[tokio::test]
async fn a_configured_request_timeout_turns_a_slow_answer_into_a_quick_transient_failure() {
    let fake = FakeOpenAi::start(&[OPENAI_KEY]).await;
    let app = app_with_openai(&fake, |s| s.providers.openai.request_timeout_s = 1).await;
    let world = remote_world(&app, "openai", "text-embedding-3-small").await;
    let chunks = add_sentences(&app, &world, 2).await["source"]["chunks"]
        .as_u64()
        .unwrap();
    assert_eq!(app.drain().await, chunks);

    // Ten seconds per answer from now on; the query gives up after a second per attempt.
    fake.reset_stats();
    fake.set_latency(Duration::from_secs(10));
    let started = std::time::Instant::now();
    let (status, body) = app
        .post(
            &format!("/v1/worlds/{world}/retrieve"),
            json!({"query": "where do the gulls fly?"}),
        )
        .await;
    let elapsed = started.elapsed();
    let error = assert_error(status, &body, StatusCode::BAD_GATEWAY, "provider_error");
    assert!(error["message"].as_str().unwrap().contains("timed out"), "{body}");
    assert!(elapsed < Duration::from_secs(6), "took {elapsed:?}");
    let attempts = fake.stats().embed_requests();
    assert!(attempts >= 1, "the query reached the provider");
    // Transient: counted as failures, the key neither retired nor cooled down.
    let key = only_key(&app, "openai").await;
    assert_eq!(key["failures"], attempts, "{key}");
    assert_eq!(key["retired"], false, "{key}");
    assert!(key["cooling_down_until"].is_null(), "{key}");
}

#[tokio::test]
async fn a_configured_google_request_timeout_applies_to_its_calls() {
    let fake = FakeGoogle::start(&[GOOGLE_KEY]).await;
    let base = fake.base_url();
    let app = spawn_app_with(move |s| {
        s.providers.google.base_url = base;
        s.providers.google.keys = vec![SecretString::from(GOOGLE_KEY)];
        s.providers.google.request_timeout_s = 1;
        s.embedding.workers = 0;
        s.embedding.max_attempts = 1;
    })
    .await;
    let world = remote_world(&app, "google", GEMINI).await;
    let accepted = add_sentences(&app, &world, 1).await;
    let source = accepted["source"]["id"].as_str().unwrap();

    fake.set_latency(Duration::from_secs(10));
    let started = std::time::Instant::now();
    app.drain().await;
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(6), "took {elapsed:?}");
    let (_, listing) = app.get(&format!("/v1/worlds/{world}/sources/{source}/chunks")).await;
    let chunk = &listing["chunks"][0];
    assert!(
        chunk["last_error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("timed out")),
        "{listing}"
    );
}

/// The next 08:00 UTC strictly after `now` (the daily reset the scheduler waits for).
fn next_daily_reset(now: DateTime<Utc>) -> DateTime<Utc> {
    let today = now.date_naive().and_hms_opt(8, 0, 0).unwrap().and_utc();
    if today > now {
        today
    } else {
        today + chrono::Duration::days(1)
    }
}

#[tokio::test]
async fn an_openai_per_day_limit_cools_the_key_until_the_daily_reset() {
    let fake = FakeOpenAi::start(&[OPENAI_KEY]).await;
    let app = app_with_openai(&fake, |_| {}).await;
    let world = remote_world(&app, "openai", "text-embedding-3-small").await;
    let chunks = add_sentences(&app, &world, 2).await["source"]["chunks"]
        .as_u64()
        .unwrap();
    assert_eq!(app.drain().await, chunks);

    // "Rate limit reached … on requests per day (RPD)", no retry headers.
    fake.reset_stats();
    fake.fail_next(Failure::DailyQuota);
    let before = Utc::now();
    let (status, body) = app
        .post(
            &format!("/v1/worlds/{world}/retrieve"),
            json!({"query": "where do the gulls fly?"}),
        )
        .await;
    let after = Utc::now();
    let error = assert_error(status, &body, StatusCode::TOO_MANY_REQUESTS, "provider_rate_limited");
    assert_eq!(
        fake.stats().embed_requests(),
        1,
        "one call, then no retry on the cooled key"
    );

    let key = only_key(&app, "openai").await;
    assert_eq!(key["rate_limited"], 1, "{key}");
    let until: DateTime<Utc> = key["cooling_down_until"]
        .as_str()
        .unwrap_or_else(|| panic!("not cooling down: {key}"))
        .parse()
        .unwrap();
    // Until the daily reset (hours away unless the test runs just before 08:00 UTC), not for
    // the few seconds of a per-minute backoff.
    let close_to = |reset: DateTime<Utc>| (until - reset).num_seconds().abs() <= 5;
    assert!(
        close_to(next_daily_reset(before)) || close_to(next_daily_reset(after)),
        "cooling down until {until}, expected the next 08:00 UTC after {before}"
    );
    let retry_after = error["details"]["retry_after_s"].as_f64().unwrap();
    let left = (until - after).num_seconds() as f64;
    assert!(
        (retry_after - left).abs() <= 5.0,
        "retry_after_s {retry_after}, cooldown left {left}"
    );
}
