//! The Google adapter's failures classified end to end (the key never showing in an error):
//! statuses, malformed answers, unknown keys, quota groups, timeouts, refused connections.

use std::time::Duration;

use quarry::providers::google::GoogleProvider;
use quarry::providers::{ApiKey, EmbedMode, EmbeddingProvider, ProviderError, RateLimitScope};

use crate::fake_providers::{Failure, FakeGoogle, api_key};

use super::{GEMINI, GOOGLE_KEY, assert_no_secret, google, google_with, http, request, texts};

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
