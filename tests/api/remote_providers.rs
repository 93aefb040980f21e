//! The Google and OpenAI adapters against the fake servers: request shapes, batching and
//! splitting, normalisation, local refusals (no embed call made), the token cache, and every
//! failure classification end to end, with the key never showing in an error; then, through
//! the whole app, the adapters' configured limits and timeouts and OpenAI's per-day limits.
//!
//! The tests are in the submodules, by adapter and topic; this file holds their shared setup.

mod google;
mod google_failures;
mod openai;
mod openai_failures;
mod through_the_app;

use std::time::Duration;

use quarry::config::{ExtraModel, OpenAiSettings, RemoteProviderSettings};
use quarry::providers::google::GoogleProvider;
use quarry::providers::http::HttpOptions;
use quarry::providers::openai::{OpenAiOptions, OpenAiProvider};
use quarry::providers::{ApiKey, EmbedMode, EmbedRequest, EmbeddingProvider, ModelRegistry, ModelSpec, ProviderError};

use crate::fake_providers::{Failure, FakeGoogle, FakeOpenAi};

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
    GoogleProvider::new(&settings, &ModelRegistry::builtin(), options).unwrap()
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
    OpenAiProvider::new(
        &settings,
        &ModelRegistry::new(
            extra_models().iter().map(|m| {
                ModelSpec::openai_compatible(&m.name, m.dimensions, m.max_input_tokens, m.dimensions_adjustable)
            }),
        ),
        options,
    )
    .unwrap()
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
