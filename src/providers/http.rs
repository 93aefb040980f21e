//! The HTTP plumbing shared by the remote adapters: the process-wide TLS crypto provider, one
//! `reqwest::Client` per provider with connect and request timeouts, and one function that sends
//! a request and hands back either the body of a 2xx answer or a classified [`ProviderError`].
//!
//! Decisions: TLS is rustls with the `ring` backend (already in the tree through tonic; the
//! default aws-lc backend needs cmake), installed once as the process default. Redirects are
//! never followed, because reqwest only strips `Authorization` on cross-host redirects and the
//! Google key travels in `x-goog-api-key`; a 3xx is classified like any other unexpected status.

use std::time::Duration;

use bytes::Bytes;
use reqwest::header::HeaderValue;

use super::ProviderError;
use super::classify;
use crate::config::{OpenAiSettings, RemoteProviderSettings};
use crate::domain::ProviderKind;

/// Timeouts for one provider's client.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HttpOptions {
    /// Time allowed to open a TCP (and TLS) connection.
    pub connect_timeout: Duration,
    /// Time allowed for a whole request, from sending to the end of the body.
    pub request_timeout: Duration,
}

impl HttpOptions {
    /// Timeouts given in whole seconds, as configuration holds them.
    pub fn from_secs(connect_timeout_s: u64, request_timeout_s: u64) -> Self {
        Self {
            connect_timeout: Duration::from_secs(connect_timeout_s),
            request_timeout: Duration::from_secs(request_timeout_s),
        }
    }
}

/// The configured defaults (`providers.*.connect_timeout_s` and `request_timeout_s`).
impl Default for HttpOptions {
    fn default() -> Self {
        Self::from(&RemoteProviderSettings::default())
    }
}

/// `providers.google.{connect,request}_timeout_s`.
impl From<&RemoteProviderSettings> for HttpOptions {
    fn from(settings: &RemoteProviderSettings) -> Self {
        Self::from_secs(settings.connect_timeout_s, settings.request_timeout_s)
    }
}

/// `providers.openai.{connect,request}_timeout_s`.
impl From<&OpenAiSettings> for HttpOptions {
    fn from(settings: &OpenAiSettings) -> Self {
        Self::from_secs(settings.connect_timeout_s, settings.request_timeout_s)
    }
}

/// Why a provider could not be constructed. Startup stops on it.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The base URL does not parse as an absolute http(s) URL. The URL itself is not repeated
    /// because it may carry credentials.
    #[error("{provider}: the base URL is not an absolute http(s) URL ({reason})")]
    BaseUrl { provider: ProviderKind, reason: String },
    /// A numeric setting that must be positive is zero.
    #[error("{provider}: {setting} must be greater than zero")]
    Zero {
        provider: ProviderKind,
        setting: &'static str,
    },
    /// reqwest refused the client configuration (e.g. TLS could not be set up).
    #[error("{provider}: cannot build the HTTP client")]
    Client {
        provider: ProviderKind,
        #[source]
        source: reqwest::Error,
    },
}

/// Builds the one client of a provider.
pub(crate) fn build_client(provider: ProviderKind, options: HttpOptions) -> Result<reqwest::Client, BuildError> {
    crate::outbound::install_tls_provider();
    if options.connect_timeout.is_zero() {
        return Err(BuildError::Zero {
            provider,
            setting: "connect_timeout",
        });
    }
    if options.request_timeout.is_zero() {
        return Err(BuildError::Zero {
            provider,
            setting: "request_timeout",
        });
    }
    reqwest::Client::builder()
        .connect_timeout(options.connect_timeout)
        .timeout(options.request_timeout)
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("quarry/", env!("CARGO_PKG_VERSION")))
        .build()
        .map_err(|source| BuildError::Client { provider, source })
}

/// Checks that `base_url` is an absolute http(s) URL and returns it without a trailing slash,
/// ready for `format!("{base}/path")`.
pub(crate) fn parse_base_url(provider: ProviderKind, base_url: &str) -> Result<String, BuildError> {
    let url = reqwest::Url::parse(base_url.trim()).map_err(|err| BuildError::BaseUrl {
        provider,
        reason: err.to_string(),
    })?;
    if !matches!(url.scheme(), "http" | "https") || url.cannot_be_a_base() || url.host().is_none() {
        return Err(BuildError::BaseUrl {
            provider,
            reason: "scheme must be http or https".into(),
        });
    }
    if url.query().is_some() || url.fragment().is_some() {
        return Err(BuildError::BaseUrl {
            provider,
            reason: "no query or fragment allowed".into(),
        });
    }
    Ok(url.as_str().trim_end_matches('/').to_owned())
}

/// A header value carrying a secret, marked sensitive so it never shows in `Debug` output.
/// A secret that cannot be a header value can never authenticate: the key is rejected.
pub(crate) fn secret_header(value: &str) -> Result<HeaderValue, ProviderError> {
    let mut header = HeaderValue::from_str(value).map_err(|_| ProviderError::KeyRejected {
        message: "the key contains characters that are not allowed in an HTTP header".into(),
    })?;
    header.set_sensitive(true);
    Ok(header)
}

/// The largest provider answer read: the biggest legitimate one (2,048 vectors of 3,072
/// floats as JSON text, some 75 MB) is well under it. A longer body is not read to its end.
pub(crate) const MAX_RESPONSE_BYTES: usize = 256 * 1024 * 1024;

/// Sends `request` and returns the body of a 2xx answer. Transport failures and non-2xx
/// answers are classified by [`classify`]; `secret` is redacted from every message. A body
/// longer than [`MAX_RESPONSE_BYTES`] is [`ProviderError::Malformed`].
pub(crate) async fn send(request: reqwest::RequestBuilder, secret: Option<&str>) -> Result<Bytes, ProviderError> {
    send_capped(request, secret, MAX_RESPONSE_BYTES).await
}

pub(crate) async fn send_capped(
    request: reqwest::RequestBuilder,
    secret: Option<&str>,
    max_bytes: usize,
) -> Result<Bytes, ProviderError> {
    let mut response = request.send().await.map_err(|err| classify::transport(&err, secret))?;
    let status = response.status();
    let headers = response.headers().clone();
    let too_large = || ProviderError::Malformed {
        message: format!("the provider's answer is longer than {max_bytes} bytes; it was not read"),
    };
    if response.content_length().is_some_and(|n| n > max_bytes as u64) {
        return Err(too_large());
    }
    let mut body = bytes::BytesMut::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|err| classify::transport(&err, secret))?
    {
        if body.len() + chunk.len() > max_bytes {
            return Err(too_large());
        }
        body.extend_from_slice(&chunk);
    }
    let body = body.freeze();
    if status.is_success() {
        Ok(body)
    } else {
        Err(classify::response(status, &headers, &body, secret))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A provider that streams an endless answer is cut off at the cap, with or without a
    /// `Content-Length`, and an answer under it is read whole.
    #[tokio::test]
    async fn answers_longer_than_the_cap_are_not_read() {
        use axum::body::Body;
        use axum::routing::get;
        let app = axum::Router::new()
            .route("/big", get(|| async { "x".repeat(10_000) }))
            .route(
                "/endless",
                get(|| async {
                    let chunks = futures_util::stream::repeat_with(|| Ok::<_, std::io::Error>(vec![b'y'; 4096]));
                    Body::from_stream(chunks)
                }),
            );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let client = reqwest::Client::new();
        let fetch = |path: &str, cap| send_capped(client.get(format!("http://{addr}{path}")), None, cap);
        assert_eq!(fetch("/big", 20_000).await.unwrap().len(), 10_000);
        assert!(matches!(
            fetch("/big", 5_000).await,
            Err(ProviderError::Malformed { .. })
        ));
        assert!(matches!(
            fetch("/endless", 100_000).await,
            Err(ProviderError::Malformed { .. })
        ));
    }

    #[test]
    fn base_urls_are_checked_and_trimmed() {
        let p = ProviderKind::Google;
        assert_eq!(
            parse_base_url(p, "http://127.0.0.1:8080/v1beta/").unwrap(),
            "http://127.0.0.1:8080/v1beta"
        );
        assert_eq!(
            parse_base_url(p, "https://api.openai.com/v1").unwrap(),
            "https://api.openai.com/v1"
        );
        assert!(parse_base_url(p, "not a url").is_err());
        assert!(parse_base_url(p, "ftp://example.com/v1").is_err());
        assert!(parse_base_url(p, "https://example.com/v1?key=secret").is_err());
    }

    #[test]
    fn options_come_from_the_settings_of_each_provider() {
        let defaults = HttpOptions::default();
        assert_eq!(defaults.connect_timeout, Duration::from_secs(5));
        assert_eq!(defaults.request_timeout, Duration::from_secs(60));
        assert_eq!(HttpOptions::from(&OpenAiSettings::default()), defaults);
        let google = RemoteProviderSettings {
            connect_timeout_s: 2,
            request_timeout_s: 7,
            ..RemoteProviderSettings::default()
        };
        assert_eq!(
            HttpOptions::from(&google),
            HttpOptions {
                connect_timeout: Duration::from_secs(2),
                request_timeout: Duration::from_secs(7),
            }
        );
    }

    #[test]
    fn zero_timeouts_are_refused() {
        let options = HttpOptions {
            request_timeout: Duration::ZERO,
            ..HttpOptions::default()
        };
        let err = build_client(ProviderKind::OpenAi, options).unwrap_err();
        assert!(err.to_string().contains("request_timeout"), "{err}");
        assert!(build_client(ProviderKind::OpenAi, HttpOptions::default()).is_ok());
    }

    #[test]
    fn secret_headers_are_sensitive_and_refuse_control_characters() {
        let header = secret_header("abc").unwrap();
        assert!(header.is_sensitive());
        assert!(!format!("{header:?}").contains("abc"));
        assert!(matches!(secret_header("a\nb"), Err(ProviderError::KeyRejected { .. })));
    }
}
