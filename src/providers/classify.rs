//! Failure classification: the one place where a provider's HTTP answer or a transport error
//! becomes a [`ProviderError`], so the key scheduler can tell "cool this key down" from "retire
//! this key", "retry later" and "give up on this item".
//!
//! | answer                                                        | variant                       |
//! |---------------------------------------------------------------|-------------------------------|
//! | 429 `insufficient_quota` (OpenAI `code` or `type`)            | `QuotaExhausted`              |
//! | any other 429 (Google RESOURCE_EXHAUSTED, OpenAI, TEI, bare)   | `RateLimited`                 |
//! | 401, 403 (Google PERMISSION_DENIED: leaked / blocked / no key) | `KeyRejected`                 |
//! | 400 with Google `ErrorInfo.reason` `API_KEY_*` (e.g. INVALID)  | `KeyRejected`                 |
//! | 408, 5xx; timeouts, refused / reset connections, cut bodies    | `Transient`                   |
//! | any other status (other 4xx incl. TEI 413, stray 1xx/3xx)      | `Permanent`                   |
//!
//! Rate-limit hints, first found wins: Google `google.rpc.RetryInfo.retryDelay` ("38.123s"),
//! then `retry-after-ms`, then `retry-after` (seconds or an HTTP date).
//!
//! Per-day limits make the scope [`RateLimitScope::Daily`] (cool down until the daily reset,
//! not for the hint): a Google `google.rpc.QuotaFailure` whose `quotaId` contains `PerDay`, or
//! an OpenAI-shaped error (one with a string `code` or a `type`) whose message names a per-day
//! limit — "requests per day (RPD)" or "tokens per day (TPD)". OpenAI sends no header that tells
//! per-day from per-minute limits, so its message is the only witness.
//!
//! Messages carry the provider's own words, with every occurrence of the key replaced by
//! `[REDACTED]` (some servers echo the key) and cut to a bounded length.

use std::time::{Duration, SystemTime};

use reqwest::StatusCode;
use reqwest::header::HeaderMap;
use serde::Deserialize;
use serde_json::Value;

use super::{ProviderError, RateLimitScope};

/// Longest message kept from a provider, in bytes.
const MAX_MESSAGE_BYTES: usize = 1000;

/// Lower-case phrases by which an OpenAI-shaped 429 names a per-day limit.
const PER_DAY_PHRASES: [&str; 4] = ["requests per day", "tokens per day", "(rpd)", "(tpd)"];

/// Classifies a non-2xx answer. `secret` is the key the request was sent with, if any.
pub fn response(status: StatusCode, headers: &HeaderMap, body: &[u8], secret: Option<&str>) -> ProviderError {
    let error = ErrorBody::parse(body);
    let message = error.describe(status, secret);
    match status.as_u16() {
        429 if error.is_insufficient_quota() => ProviderError::QuotaExhausted { message },
        429 => ProviderError::RateLimited {
            retry_after: error
                .retry_delay()
                .or_else(|| header_retry_after(headers, SystemTime::now())),
            scope: if error.is_per_day() {
                RateLimitScope::Daily
            } else {
                RateLimitScope::Short
            },
            message,
        },
        401 | 403 => ProviderError::KeyRejected { message },
        400 if error.is_api_key_reason() => ProviderError::KeyRejected { message },
        408 | 500..=599 => ProviderError::Transient { message },
        _ => ProviderError::Permanent { message },
    }
}

/// What went wrong below HTTP, as far as reqwest tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportFailure {
    /// The connect or request timeout elapsed.
    Timeout,
    /// The connection could not be opened (refused, DNS, TLS handshake).
    Connect,
    /// The connection broke while the request was sent or the answer read (reset, cut body).
    Interrupted,
    /// The request could not even be built (bad URL or header): retrying cannot help.
    Builder,
    /// A redirect, which quarry never follows (the key would travel with it).
    Redirect,
}

/// Classifies a reqwest error.
pub fn transport(err: &reqwest::Error, secret: Option<&str>) -> ProviderError {
    let failure = if err.is_timeout() {
        TransportFailure::Timeout
    } else if err.is_connect() {
        TransportFailure::Connect
    } else if err.is_builder() {
        TransportFailure::Builder
    } else if err.is_redirect() {
        TransportFailure::Redirect
    } else {
        // `is_request`, `is_body`, `is_decode` and anything reqwest adds later: the exchange
        // broke half-way, which a retry may well fix.
        TransportFailure::Interrupted
    };
    // reqwest's own message is often just "error sending request": the chain says why.
    classify_transport(failure, &crate::telemetry::error_chain(err), secret)
}

/// The pure half of [`transport`].
pub fn classify_transport(failure: TransportFailure, detail: &str, secret: Option<&str>) -> ProviderError {
    let message = clean(&format!("{}: {detail}", transport_label(failure)), secret);
    match failure {
        TransportFailure::Timeout | TransportFailure::Connect | TransportFailure::Interrupted => {
            ProviderError::Transient { message }
        }
        TransportFailure::Builder | TransportFailure::Redirect => ProviderError::Permanent { message },
    }
}

/// A 2xx answer that is not what was asked for (unparsable, wrong count or length, not finite).
pub fn malformed(message: &str, secret: Option<&str>) -> ProviderError {
    ProviderError::Malformed {
        message: clean(message, secret),
    }
}

/// Checks a decoded answer: `expected` vectors, each `dimensions` long, every value finite
/// (JSON cannot carry NaN, but a number beyond `f32::MAX` decodes to infinity).
pub fn check_vectors(vectors: &[Vec<f32>], expected: usize, dimensions: u32) -> Result<(), ProviderError> {
    if vectors.len() != expected {
        return Err(malformed(
            &format!("expected {expected} vectors, got {}", vectors.len()),
            None,
        ));
    }
    for (i, vector) in vectors.iter().enumerate() {
        if vector.len() != dimensions as usize {
            let message = format!("vector {i} has {} values, expected {dimensions}", vector.len());
            return Err(malformed(&message, None));
        }
        if vector.iter().any(|x| !x.is_finite()) {
            return Err(malformed(&format!("vector {i} has a non-finite value"), None));
        }
    }
    Ok(())
}

/// Replaces every occurrence of `secret` in `text` — in any letter case, and base64-encoded
/// (standard or URL-safe, at any alignment, as in an echoed `Authorization: Basic` header) —
/// and bounds the length. Redaction happens before truncation so a cut can never leave a prefix
/// of the key behind.
pub fn clean(text: &str, secret: Option<&str>) -> String {
    let mut text = match secret {
        Some(secret) if !secret.is_empty() => redact(text, secret),
        _ => text.to_owned(),
    };
    // Messages are stored (a chunk's last error, job events); PostgreSQL text holds no U+0000.
    if text.contains('\0') {
        text = text.replace('\0', "\u{FFFD}");
    }
    if text.len() > MAX_MESSAGE_BYTES {
        let mut end = MAX_MESSAGE_BYTES;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push('…');
    }
    text
}

/// Shortest base64 run of a secret worth redacting (shorter ones would match by chance).
const MIN_ENCODED_RUN: usize = 12;

/// `text` with `secret` replaced wherever it shows, in any ASCII letter case and as base64.
fn redact(text: &str, secret: &str) -> String {
    let mut forms: Vec<String> = Vec::new();
    // The characters of a base64 encoding that depend on the secret's bytes alone, for each of
    // the three alignments the secret can have inside a longer encoded string.
    use base64::Engine as _;
    for engine in [
        &base64::engine::general_purpose::STANDARD_NO_PAD,
        &base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ] {
        for lead in 0..3usize {
            let mut bytes = vec![0u8; lead];
            bytes.extend_from_slice(secret.as_bytes());
            let encoded = engine.encode(&bytes);
            let skip = (lead * 4).div_ceil(3);
            // The last character may mix in whatever byte follows the secret.
            let end = encoded.len().saturating_sub(1);
            if end > skip && end - skip >= MIN_ENCODED_RUN {
                forms.push(encoded[skip..end].to_owned());
            }
        }
    }
    forms.sort();
    forms.dedup();
    // Byte ranges to cut: ASCII lower-casing keeps every byte offset, so the ranges found in the
    // lower-cased text (for the secret) or the text itself (base64 is case-sensitive) hold.
    let lowered = text.to_ascii_lowercase();
    let mut cuts: Vec<(usize, usize)> = Vec::new();
    let plain = secret.to_ascii_lowercase();
    cuts.extend(lowered.match_indices(plain.as_str()).map(|(at, m)| (at, at + m.len())));
    for form in &forms {
        cuts.extend(text.match_indices(form.as_str()).map(|(at, m)| (at, at + m.len())));
    }
    if cuts.is_empty() {
        return text.to_owned();
    }
    cuts.sort_unstable();
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for (start, end) in cuts {
        if end <= at {
            continue;
        }
        if start >= at {
            out.push_str(&text[at..start]);
            out.push_str("[REDACTED]");
        }
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

fn transport_label(failure: TransportFailure) -> &'static str {
    match failure {
        TransportFailure::Timeout => "request timed out",
        TransportFailure::Connect => "connection failed",
        TransportFailure::Interrupted => "connection interrupted",
        TransportFailure::Builder => "request could not be built",
        TransportFailure::Redirect => "unexpected redirect",
    }
}

/// `retry-after-ms` (OpenAI, milliseconds, may be fractional), else `retry-after` (RFC 9110:
/// seconds or an HTTP date; a date in the past means "now").
fn header_retry_after(headers: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = header("retry-after-ms").and_then(|v| v.parse::<f64>().ok())
        && let Ok(d) = Duration::try_from_secs_f64(ms / 1000.0)
    {
        return Some(d);
    }
    let value = header("retry-after")?;
    if let Ok(secs) = value.parse::<f64>() {
        return Duration::try_from_secs_f64(secs).ok();
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// The error body in any of the shapes we meet: Google `{"error":{code,message,status,details}}`,
/// OpenAI `{"error":{message,type,param,code}}`, TEI / Ollama `{"error":"text"}`, or not JSON.
#[derive(Debug, Default)]
struct ErrorBody {
    message: Option<String>,
    /// Google `status` (RESOURCE_EXHAUSTED), else OpenAI `code`, else OpenAI `type`.
    label: Option<String>,
    openai_code: Option<String>,
    openai_type: Option<String>,
    details: Vec<Value>,
}

#[derive(Deserialize)]
struct Envelope {
    error: ErrorField,
}

#[derive(Deserialize)]
#[serde(untagged)]
enum ErrorField {
    Text(String),
    Object(ErrorObject),
}

#[derive(Deserialize)]
struct ErrorObject {
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    status: Option<String>,
    #[serde(default, rename = "type")]
    kind: Option<String>,
    /// A number for Google (429), a string for OpenAI ("rate_limit_exceeded").
    #[serde(default)]
    code: Option<Value>,
    #[serde(default)]
    details: Vec<Value>,
}

impl ErrorBody {
    fn parse(body: &[u8]) -> Self {
        match serde_json::from_slice::<Envelope>(body) {
            Ok(Envelope {
                error: ErrorField::Text(message),
            }) => Self {
                message: Some(message),
                ..Self::default()
            },
            Ok(Envelope {
                error: ErrorField::Object(e),
            }) => {
                let openai_code = e.code.as_ref().and_then(Value::as_str).map(str::to_owned);
                let label = e
                    .status
                    .clone()
                    .or_else(|| openai_code.clone())
                    .or_else(|| e.kind.clone());
                Self {
                    message: e.message,
                    label,
                    openai_code,
                    openai_type: e.kind,
                    details: e.details,
                }
            }
            Err(_) => {
                let text = String::from_utf8_lossy(body).trim().to_owned();
                Self {
                    message: (!text.is_empty()).then_some(text),
                    ..Self::default()
                }
            }
        }
    }

    /// "HTTP 429 RESOURCE_EXHAUSTED: <provider's message>", redacted and bounded.
    fn describe(&self, status: StatusCode, secret: Option<&str>) -> String {
        let mut text = format!("HTTP {}", status.as_u16());
        if let Some(label) = &self.label {
            text.push(' ');
            text.push_str(label);
        }
        text.push_str(": ");
        match &self.message {
            Some(message) if !message.trim().is_empty() => text.push_str(message.trim()),
            _ => text.push_str(status.canonical_reason().unwrap_or("no message")),
        }
        clean(&text, secret)
    }

    fn is_insufficient_quota(&self) -> bool {
        [&self.openai_code, &self.openai_type]
            .into_iter()
            .any(|v| v.as_deref() == Some("insufficient_quota"))
    }

    /// Details of one `google.rpc.*` type.
    fn details_of<'a>(&'a self, kind: &'a str) -> impl Iterator<Item = &'a Value> + 'a {
        self.details.iter().filter(move |d| {
            d.get("@type")
                .and_then(Value::as_str)
                .is_some_and(|t| t.ends_with(&format!("google.rpc.{kind}")))
        })
    }

    /// `google.rpc.RetryInfo.retryDelay`, a protobuf Duration in JSON ("38.123s").
    fn retry_delay(&self) -> Option<Duration> {
        self.details_of("RetryInfo").find_map(|d| {
            let text = d.get("retryDelay")?.as_str()?.trim().strip_suffix('s')?;
            Duration::try_from_secs_f64(text.parse::<f64>().ok()?).ok()
        })
    }

    /// A violated per-day quota: nothing helps before the daily reset.
    fn is_per_day(&self) -> bool {
        self.google_per_day_quota() || self.openai_per_day_limit()
    }

    /// Google: a `QuotaFailure` violation with a `…PerDay…` quota id.
    fn google_per_day_quota(&self) -> bool {
        self.details_of("QuotaFailure").any(|d| {
            d.get("violations").and_then(Value::as_array).is_some_and(|violations| {
                violations
                    .iter()
                    .filter_map(|v| v.get("quotaId").and_then(Value::as_str))
                    .any(|id| id.contains("PerDay"))
            })
        })
    }

    /// OpenAI (and servers copying its error shape): "Rate limit reached for … on requests per
    /// day (RPD): Limit 200, Used 200, Requested 1." — likewise "tokens per day (TPD)". Only
    /// OpenAI-shaped bodies are read this way; Google's verdict comes from its quota ids.
    fn openai_per_day_limit(&self) -> bool {
        if self.openai_code.is_none() && self.openai_type.is_none() {
            return false;
        }
        let Some(message) = &self.message else {
            return false;
        };
        let message = message.to_ascii_lowercase();
        PER_DAY_PHRASES.iter().any(|phrase| message.contains(phrase))
    }

    /// Google `ErrorInfo.reason` API_KEY_INVALID, API_KEY_EXPIRED, API_KEY_SERVICE_BLOCKED…
    fn is_api_key_reason(&self) -> bool {
        self.details_of("ErrorInfo").any(|d| {
            d.get("reason")
                .and_then(Value::as_str)
                .is_some_and(|r| r.starts_with("API_KEY_"))
        })
    }
}

#[cfg(test)]
mod tests {
    use reqwest::header::{HeaderName, HeaderValue};
    use serde_json::json;

    use super::*;

    const KEY: &str = "AIzaSyTHE-SECRET-KEY";

    fn classify(status: u16, headers: &[(&str, &str)], body: Value) -> ProviderError {
        classify_raw(status, headers, body.to_string().as_bytes())
    }

    fn classify_raw(status: u16, headers: &[(&str, &str)], body: &[u8]) -> ProviderError {
        let mut map = HeaderMap::new();
        for (name, value) in headers {
            map.insert(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(value).unwrap(),
            );
        }
        let err = response(StatusCode::from_u16(status).unwrap(), &map, body, Some(KEY));
        assert!(!format!("{err:?} {err}").contains(KEY), "key leaked: {err:?}");
        err
    }

    fn google(code: u16, status: &str, message: &str, details: Value) -> Value {
        json!({"error": {"code": code, "message": message, "status": status, "details": details}})
    }

    fn openai(message: &str, kind: &str, code: Option<&str>) -> Value {
        json!({"error": {"message": message, "type": kind, "param": null, "code": code}})
    }

    #[test]
    fn google_429_with_retry_info_carries_the_delay() {
        let details = json!([
            {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [{
                "quotaMetric": "generativelanguage.googleapis.com/embed_content_free_tier_requests",
                "quotaId": "EmbedContentRequestsPerMinutePerProjectPerModel-FreeTier"}]},
            {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "38.123s"}
        ]);
        let err = classify(
            429,
            &[],
            google(429, "RESOURCE_EXHAUSTED", "You exceeded your current quota", details),
        );
        let ProviderError::RateLimited {
            retry_after,
            scope,
            message,
        } = err
        else {
            panic!("{err:?}")
        };
        assert_eq!(retry_after, Some(Duration::from_millis(38_123)));
        assert_eq!(scope, RateLimitScope::Short);
        assert!(
            message.contains("RESOURCE_EXHAUSTED") && message.contains("exceeded"),
            "{message}"
        );
    }

    #[test]
    fn bare_google_429_has_no_hint() {
        let err = classify(
            429,
            &[],
            google(429, "RESOURCE_EXHAUSTED", "Resource has been exhausted", json!([])),
        );
        assert!(matches!(
            err,
            ProviderError::RateLimited {
                retry_after: None,
                scope: RateLimitScope::Short,
                ..
            }
        ));
    }

    #[test]
    fn google_per_day_quota_is_daily() {
        let details = json!([{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
            {"quotaId": "EmbedContentRequestsPerDayPerProjectPerModel-FreeTier"}]}]);
        let err = classify(429, &[], google(429, "RESOURCE_EXHAUSTED", "quota", details));
        assert!(matches!(
            err,
            ProviderError::RateLimited {
                scope: RateLimitScope::Daily,
                retry_after: None,
                ..
            }
        ));
    }

    fn scope_of(err: &ProviderError) -> RateLimitScope {
        match err {
            ProviderError::RateLimited { scope, .. } => *scope,
            other => panic!("not a rate limit: {other:?}"),
        }
    }

    #[test]
    fn openai_per_day_limits_are_daily() {
        let rpd = openai(
            "Rate limit reached for text-embedding-3-small in organization org-abc on requests per day (RPD): \
             Limit 200, Used 200, Requested 1. Please try again in 7m12s. \
             Visit https://platform.openai.com/account/rate-limits to learn more.",
            "requests",
            Some("rate_limit_exceeded"),
        );
        assert_eq!(scope_of(&classify(429, &[], rpd)), RateLimitScope::Daily);

        // The hint still travels with the error; the scheduler decides what a daily limit means.
        let tpd = openai(
            "Rate limit reached for text-embedding-3-large in organization org-abc on tokens per day (TPD): \
             Limit 3000000, Used 2999990, Requested 120. Please try again in 3.456s.",
            "tokens",
            Some("rate_limit_exceeded"),
        );
        let err = classify(429, &[("retry-after-ms", "3456")], tpd);
        assert!(
            matches!(err, ProviderError::RateLimited { scope: RateLimitScope::Daily, retry_after: Some(d), .. }
                if d == Duration::from_millis(3456)),
            "{err:?}"
        );

        // The abbreviation alone is enough, in any case, and so is the code without a type.
        let abbreviated = json!({"error": {"message": "Limit reached (TPD)", "code": "rate_limit_exceeded"}});
        assert_eq!(scope_of(&classify(429, &[], abbreviated)), RateLimitScope::Daily);
    }

    #[test]
    fn openai_per_minute_limits_stay_short() {
        for (message, kind) in [
            (
                "Rate limit reached for text-embedding-3-small in organization org-abc on requests per min (RPM): \
                 Limit 3000, Used 3000, Requested 1. Please try again in 20ms.",
                "requests",
            ),
            (
                "Rate limit reached for text-embedding-3-small in organization org-abc on tokens per min (TPM): \
                 Limit 1000000, Used 999000, Requested 2000. Please try again in 120ms.",
                "tokens",
            ),
        ] {
            let err = classify(
                429,
                &[("retry-after-ms", "20")],
                openai(message, kind, Some("rate_limit_exceeded")),
            );
            assert_eq!(scope_of(&err), RateLimitScope::Short, "{message}");
        }
    }

    #[test]
    fn per_day_wording_counts_only_where_it_is_the_verdict() {
        // Google decides by quota id: a per-minute violation stays short whatever the text says.
        let details = json!([{"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": [
            {"quotaId": "EmbedContentRequestsPerMinutePerProjectPerModel-FreeTier"}]}]);
        let body = google(
            429,
            "RESOURCE_EXHAUSTED",
            "Quota exceeded; your plan also has a limit of 1000 requests per day.",
            details,
        );
        assert_eq!(scope_of(&classify(429, &[], body)), RateLimitScope::Short);
        // A plain-text error of a compatible server (TEI, Ollama) has no per-day notion.
        let text = json!({"error": "too many requests per day (RPD)"});
        assert_eq!(scope_of(&classify(429, &[], text)), RateLimitScope::Short);
        // No quota left at all is still not a rate limit.
        let quota = openai(
            "You exceeded your current quota (requests per day), please check your plan and billing details.",
            "insufficient_quota",
            Some("insufficient_quota"),
        );
        assert!(matches!(
            classify(429, &[], quota),
            ProviderError::QuotaExhausted { .. }
        ));
        // And only a 429 is a rate limit.
        let bad = openai("requests per day (RPD) must be positive", "invalid_request_error", None);
        assert!(matches!(classify(400, &[], bad), ProviderError::Permanent { .. }));
    }

    #[test]
    fn openai_429_prefers_retry_after_ms() {
        let body = openai("Rate limit reached", "requests", Some("rate_limit_exceeded"));
        let err = classify(429, &[("retry-after-ms", "1500"), ("retry-after", "9")], body);
        assert!(
            matches!(err, ProviderError::RateLimited { retry_after: Some(d), .. } if d == Duration::from_millis(1500))
        );
    }

    #[test]
    fn openai_429_reads_retry_after_seconds() {
        let body = openai("Rate limit reached", "requests", Some("rate_limit_exceeded"));
        let err = classify(429, &[("retry-after", "7")], body);
        assert!(matches!(err, ProviderError::RateLimited { retry_after: Some(d), .. } if d == Duration::from_secs(7)));
    }

    #[test]
    fn retry_after_http_dates_count_from_now() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        let mut headers = HeaderMap::new();
        headers.insert("retry-after", HeaderValue::from_str(&later).unwrap());
        assert_eq!(header_retry_after(&headers, now), Some(Duration::from_secs(30)));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(30));
        headers.insert("retry-after", HeaderValue::from_str(&earlier).unwrap());
        assert_eq!(header_retry_after(&headers, now), Some(Duration::ZERO));
        // And through `response`, with a date in the future.
        let future = httpdate::fmt_http_date(SystemTime::now() + Duration::from_secs(120));
        let err = classify(429, &[("retry-after", &future)], openai("slow down", "requests", None));
        assert!(matches!(err, ProviderError::RateLimited { retry_after: Some(d), .. } if d > Duration::from_secs(100)));
    }

    #[test]
    fn openai_insufficient_quota_is_not_retryable() {
        let body = openai(
            "You exceeded your current quota",
            "insufficient_quota",
            Some("insufficient_quota"),
        );
        let err = classify(429, &[("retry-after", "1")], body);
        assert!(matches!(err, ProviderError::QuotaExhausted { .. }), "{err:?}");
    }

    #[test]
    fn compatible_server_429_without_code_is_rate_limited() {
        let err = classify(
            429,
            &[],
            json!({"error": "Model is overloaded", "error_type": "overloaded"}),
        );
        let ProviderError::RateLimited {
            retry_after: None,
            message,
            ..
        } = err
        else {
            panic!("{err:?}")
        };
        assert!(message.contains("overloaded"));
        assert!(matches!(classify_raw(429, &[], b""), ProviderError::RateLimited { .. }));
    }

    #[test]
    fn google_400_api_key_invalid_rejects_the_key() {
        let details = json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID",
            "domain": "googleapis.com", "metadata": {"service": "generativelanguage.googleapis.com"}}]);
        let message = format!("API key not valid: {KEY}. Please pass a valid API key.");
        let err = classify(400, &[], google(400, "INVALID_ARGUMENT", &message, details));
        let ProviderError::KeyRejected { message } = err else {
            panic!("{err:?}")
        };
        assert!(
            message.contains("[REDACTED]") && message.contains("API key not valid"),
            "{message}"
        );
    }

    #[test]
    fn google_403_permission_denied_rejects_the_key() {
        let details =
            json!([{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_SERVICE_BLOCKED"}]);
        let err = classify(
            403,
            &[],
            google(
                403,
                "PERMISSION_DENIED",
                "Your API key was reported as leaked.",
                details,
            ),
        );
        assert!(matches!(err, ProviderError::KeyRejected { .. }), "{err:?}");
    }

    #[test]
    fn openai_401_rejects_the_key() {
        let body = openai(
            &format!("Incorrect API key provided: {KEY}."),
            "invalid_request_error",
            Some("invalid_api_key"),
        );
        let err = classify(401, &[], body);
        let ProviderError::KeyRejected { message } = err else {
            panic!("{err:?}")
        };
        assert!(message.contains("invalid_api_key"), "{message}");
    }

    #[test]
    fn server_errors_are_transient() {
        let err = classify(
            503,
            &[],
            google(503, "UNAVAILABLE", "The model is overloaded.", json!([])),
        );
        assert!(matches!(err, ProviderError::Transient { .. }));
        let err = classify(
            500,
            &[],
            google(500, "INTERNAL", "An internal error has occurred.", json!([])),
        );
        assert!(matches!(err, ProviderError::Transient { .. }));
        assert!(matches!(
            classify_raw(502, &[], b"<html>bad gateway</html>"),
            ProviderError::Transient { .. }
        ));
    }

    #[test]
    fn request_timeout_status_is_transient() {
        assert!(matches!(classify_raw(408, &[], b""), ProviderError::Transient { .. }));
    }

    #[test]
    fn other_4xx_are_permanent_with_the_providers_message() {
        let body = google(
            400,
            "INVALID_ARGUMENT",
            "* BatchEmbedContentsRequest.requests: at most 100 requests",
            json!([]),
        );
        let ProviderError::Permanent { message } = classify(400, &[], body) else {
            panic!()
        };
        assert_eq!(
            message,
            "HTTP 400 INVALID_ARGUMENT: * BatchEmbedContentsRequest.requests: at most 100 requests"
        );
        let body = openai(
            "This model's maximum context length is 8192 tokens",
            "invalid_request_error",
            None,
        );
        let ProviderError::Permanent { message } = classify(400, &[], body) else {
            panic!()
        };
        assert!(
            message.starts_with("HTTP 400 invalid_request_error: This model's maximum"),
            "{message}"
        );
        let err = classify(
            404,
            &[],
            google(404, "NOT_FOUND", "models/text-embedding-004 is not found", json!([])),
        );
        assert!(matches!(err, ProviderError::Permanent { .. }));
    }

    #[test]
    fn tei_413_is_permanent() {
        let body = json!({"error": "Input validation error: `inputs` must have less than 512 tokens", "error_type": "Validation"});
        let ProviderError::Permanent { message } = classify(413, &[], body) else {
            panic!()
        };
        assert!(message.starts_with("HTTP 413: Input validation error"), "{message}");
    }

    #[test]
    fn unexpected_statuses_are_permanent() {
        assert!(matches!(classify_raw(302, &[], b""), ProviderError::Permanent { .. }));
    }

    #[test]
    fn keys_are_redacted_even_in_non_json_bodies_and_before_truncation() {
        let body = format!("{}{KEY}{}", "x".repeat(MAX_MESSAGE_BYTES - 5), "y".repeat(50));
        let err = classify_raw(400, &[], body.as_bytes());
        let ProviderError::Permanent { message } = err else {
            panic!()
        };
        assert!(!message.contains("AIza"), "{message}");
        assert_eq!(clean("nothing to hide", Some("")), "nothing to hide");
    }

    #[test]
    fn keys_are_redacted_in_any_case_and_base64_encoded() {
        use base64::Engine as _;
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let url = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
        let echoes = [
            format!("invalid key {}", KEY.to_ascii_uppercase()),
            format!("invalid key {}", KEY.to_ascii_lowercase()),
            format!("got {}", b64(KEY)),
            format!("Authorization: Basic {}", b64(&format!("user:{KEY}"))),
            format!("Authorization: Basic {}", b64(&format!("us:{KEY}"))),
            format!("Authorization: Basic {}", b64(&format!("u:{KEY}:x"))),
            format!("token={}", url(&format!("{KEY}?"))),
        ];
        for echo in &echoes {
            let cleaned = clean(echo, Some(KEY));
            assert!(cleaned.contains("[REDACTED]"), "{echo} -> {cleaned}");
            assert!(
                !cleaned.to_ascii_lowercase().contains(&KEY.to_ascii_lowercase()),
                "{cleaned}"
            );
            for lead in ["", "u:", "us:", "user:"] {
                let full = b64(&format!("{lead}{KEY}"));
                assert!(!cleaned.contains(&full[full.len() / 2..]), "{echo} -> {cleaned}");
            }
        }
        // Text that only resembles it stays.
        assert_eq!(clean("a short AIza prefix", Some(KEY)), "a short AIza prefix");
        // Non-ASCII text around an echo keeps its characters.
        assert_eq!(clean(&format!("clé {KEY} été"), Some(KEY)), "clé [REDACTED] été");
    }

    #[test]
    fn nul_characters_do_not_reach_stored_messages() {
        assert_eq!(clean("bad\0input", None), "bad\u{FFFD}input");
        let err = classify_raw(400, &[], b"{\"error\": {\"message\": \"oops\\u0000here\"}}");
        let ProviderError::Permanent { message } = err else {
            panic!("{err:?}")
        };
        assert!(!message.contains('\0') && message.contains("oops"), "{message:?}");
    }

    #[test]
    fn transport_failures_are_classified() {
        use TransportFailure::*;
        for failure in [Timeout, Connect, Interrupted] {
            assert!(matches!(
                classify_transport(failure, "x", None),
                ProviderError::Transient { .. }
            ));
        }
        for failure in [Builder, Redirect] {
            assert!(matches!(
                classify_transport(failure, "x", None),
                ProviderError::Permanent { .. }
            ));
        }
        let err = classify_transport(Connect, &format!("while sending {KEY}"), Some(KEY));
        assert!(!err.to_string().contains(KEY));
    }

    #[test]
    fn vectors_of_the_wrong_count_length_or_value_are_malformed() {
        let ok = vec![vec![0.5, 0.5], vec![1.0, 0.0]];
        assert!(check_vectors(&ok, 2, 2).is_ok());
        assert!(matches!(check_vectors(&ok, 3, 2), Err(ProviderError::Malformed { .. })));
        assert!(matches!(check_vectors(&ok, 2, 3), Err(ProviderError::Malformed { .. })));
        let inf = vec![vec![f32::INFINITY, 0.0]];
        assert!(matches!(
            check_vectors(&inf, 1, 2),
            Err(ProviderError::Malformed { .. })
        ));
        let nan = vec![vec![f32::NAN, 0.0]];
        assert!(matches!(
            check_vectors(&nan, 1, 2),
            Err(ProviderError::Malformed { .. })
        ));
    }

    #[tokio::test]
    async fn real_transport_errors_are_transient() {
        use tokio::io::AsyncReadExt;

        let client = crate::providers::http::build_client(
            crate::domain::ProviderKind::OpenAi,
            crate::providers::http::HttpOptions {
                connect_timeout: Duration::from_secs(2),
                request_timeout: Duration::from_millis(200),
            },
        )
        .unwrap();
        // Refused: a port nobody listens on any more.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        drop(listener);
        let err = client.get(format!("http://{addr}/")).send().await.unwrap_err();
        assert!(
            matches!(transport(&err, None), ProviderError::Transient { .. }),
            "{err:?}"
        );

        // Timeout: accepted, never answered.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let silent = tokio::spawn(async move {
            let (mut socket, _) = listener.accept().await.unwrap();
            let mut buf = [0u8; 1024];
            while socket.read(&mut buf).await.unwrap_or(0) > 0 {}
        });
        let err = client.get(format!("http://{addr}/")).send().await.unwrap_err();
        let classified = transport(&err, None);
        assert!(matches!(&classified, ProviderError::Transient { message } if message.contains("timed out")));
        silent.abort();

        // Reset: accepted, then closed without an answer.
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let (socket, _) = listener.accept().await.unwrap();
            drop(socket);
        });
        let err = client.get(format!("http://{addr}/")).send().await.unwrap_err();
        assert!(
            matches!(transport(&err, None), ProviderError::Transient { .. }),
            "{err:?}"
        );
    }
}
