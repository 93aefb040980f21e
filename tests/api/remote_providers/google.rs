//! The Google adapter against the fake server: request shapes, batching, normalisation, the
//! registry's limits, token counting and its cache, and local refusals (no embed call made).

use std::time::Duration;

use quarry::domain::ProviderKind;
use quarry::providers::{EmbedMode, EmbeddingProvider, ModelRegistry, ProviderError};

use crate::fake_providers::{Failure, FakeGoogle, api_key, fake_vector, unit};

use super::{GEMINI, GOOGLE_KEY, assert_close, assert_no_secret, google, request, texts};

fn norm(v: &[f32]) -> f32 {
    v.iter().map(|x| x * x).sum::<f32>().sqrt()
}

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
    let sent = stats.sent_texts();
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
    let registry = ModelRegistry::builtin();
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
