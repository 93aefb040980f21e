//! The OpenAI adapter's failures classified end to end (the key never showing in an error),
//! its quota buckets, and the fake's quota windows on a paused clock.

use std::time::{Duration, SystemTime};

use quarry::providers::{EmbedMode, EmbeddingProvider, ProviderError};

use crate::fake_providers::{Failure, FakeOpenAi, api_key};

use super::{OPENAI_KEY, assert_no_secret, openai_default, openai_outcome, request, texts};

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
