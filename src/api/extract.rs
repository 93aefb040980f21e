//! Extractors that turn every rejection into the contract's JSON error (axum's defaults answer
//! in plain text). Handlers use these instead of `Json`, `Path` and `Query`.

use axum::extract::path::ErrorKind;
use axum::extract::rejection::{JsonRejection, PathRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use serde::de::DeserializeOwned;
use serde_json::json;

use super::error::ApiError;
use crate::api::AppState;
use crate::domain::Window;
use crate::service::sources::Paging;

/// `Json<T>` whose rejections are [`ApiError`]s: bad JSON, wrong types and unknown fields are
/// `invalid_request` naming the field where serde knows it; an oversized body is
/// `payload_too_large` with `server.max_body_bytes` (a route with a lower limit of its own says
/// so itself, as `/retrieve` does).
pub struct ApiJson<T>(pub T);

impl<T> FromRequest<AppState> for ApiJson<T>
where
    T: DeserializeOwned,
{
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, Self::Rejection> {
        if !json_content_type(req.headers()) {
            return Err(ApiError::invalid_request(NOT_JSON));
        }
        let bytes = match axum::body::Bytes::from_request(req, state).await {
            Ok(bytes) => bytes,
            Err(err) if err.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                return Err(ApiError::payload_too_large(state.max_body_bytes));
            }
            Err(err) => {
                return Err(ApiError::invalid_request(format!(
                    "could not read the request body: {}",
                    err.body_text()
                )));
            }
        };
        // Every body here is an object; serde would take an array for a struct, field by
        // position.
        if bytes
            .iter()
            .find(|b| !b.is_ascii_whitespace())
            .is_some_and(|&b| b != b'{')
        {
            return Err(ApiError::invalid_request(
                "invalid request body: the body must be a JSON object",
            ));
        }
        match axum::Json::<T>::from_bytes(&bytes) {
            Ok(axum::Json(value)) => Ok(Self(value)),
            Err(rejection) => Err(json_rejection(rejection, state.max_body_bytes)),
        }
    }
}

const NOT_JSON: &str = "expected a JSON body with `Content-Type: application/json`";

/// `application/json` or `application/…+json`, parameters allowed (what axum's `Json` takes).
fn json_content_type(headers: &axum::http::HeaderMap) -> bool {
    let Some(value) = headers
        .get(axum::http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
    else {
        return false;
    };
    let essence = crate::domain::media_essence(value);
    essence == "application/json" || (essence.starts_with("application/") && essence.ends_with("+json"))
}

/// Maps a JSON rejection to the contract's error; `limit` is the body limit that applied.
pub fn json_rejection(rejection: JsonRejection, limit: usize) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        return ApiError::payload_too_large(limit);
    }
    match rejection {
        JsonRejection::JsonDataError(err) => {
            let field = data_error_path(&err);
            let message = match std::error::Error::source(&err) {
                Some(inner) => inner.to_string(),
                None => err.body_text(),
            };
            // serde names the Rust type it expected ("expected struct CreateWorldRequest"), and
            // `de::object` says "expected a JSON object": what the client needs to hear is
            // which value is not an object.
            let not_object = message.contains("expected struct ") || message.contains("expected a JSON object");
            let message = match (&field, not_object) {
                (None, true) => "the body must be a JSON object".to_owned(),
                (Some(field), true) => format!("`{field}` must be a JSON object"),
                (_, false) => message,
            };
            let api = ApiError::invalid_request(format!("invalid request body: {message}"));
            match field {
                Some(field) => api.with_details(json!({ "field": field })),
                None => api,
            }
        }
        JsonRejection::JsonSyntaxError(err) => {
            let message = match std::error::Error::source(&err) {
                Some(inner) => inner.to_string(),
                None => err.body_text(),
            };
            ApiError::invalid_request(format!("malformed JSON: {message}"))
        }
        JsonRejection::MissingJsonContentType(_) => ApiError::invalid_request(NOT_JSON),
        other => ApiError::invalid_request(format!("could not read the request body: {}", other.body_text())),
    }
}

/// The JSON path of the offending value, when serde reported one (e.g. `embedding.dimensions`).
/// A missing field (and, at the top level, an unknown one) is reported at the object that lacks
/// (or has) it, so the field's own name, which serde puts in its message, is added to the path.
fn data_error_path(err: &axum::extract::rejection::JsonDataError) -> Option<String> {
    let mut source = std::error::Error::source(err);
    while let Some(s) = source {
        if let Some(e) = s.downcast_ref::<serde_path_to_error::Error<serde_json::Error>>() {
            let path = e.path().to_string();
            let message = e.inner().to_string();
            let named = ["unknown field `", "missing field `"]
                .iter()
                .find_map(|prefix| message.strip_prefix(prefix))
                .and_then(|rest| rest.split_once('`'))
                .map(|(name, _)| name);
            return match (path.as_str(), named) {
                (".", None) => None,
                (".", Some(name)) => Some(name.to_owned()),
                (_, Some(name)) if path == name || path.ends_with(&format!(".{name}")) => Some(path),
                (_, Some(name)) => Some(format!("{path}.{name}")),
                (_, None) => Some(path),
            };
        }
        source = s.source();
    }
    None
}

/// `Path<T>` whose rejections are `invalid_request` naming the parameter.
pub struct ApiPath<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiPath<T>
where
    T: DeserializeOwned + Send,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Path::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Path(value)) => Ok(Self(value)),
            Err(rejection) => Err(path_rejection(rejection)),
        }
    }
}

fn path_rejection(rejection: PathRejection) -> ApiError {
    match rejection {
        PathRejection::FailedToDeserializePathParams(err) => {
            let (key, value) = match err.kind() {
                ErrorKind::ParseErrorAtKey { key, value, .. } => (Some(key.clone()), Some(value.clone())),
                ErrorKind::DeserializeError { key, value, .. } => (Some(key.clone()), Some(value.clone())),
                ErrorKind::InvalidUtf8InPathParam { key } => (Some(key.clone()), None),
                ErrorKind::ParseError { value, .. } | ErrorKind::ParseErrorAtIndex { value, .. } => {
                    (None, Some(value.clone()))
                }
                _ => (None, None),
            };
            let message = match (&key, &value) {
                (Some(k), Some(v)) => format!("path parameter `{k}` must be a UUID, got `{v}`"),
                (None, Some(v)) => format!("path parameter must be a UUID, got `{v}`"),
                _ => format!("invalid path parameter: {}", err.body_text()),
            };
            let api = ApiError::invalid_request(message);
            match key {
                Some(key) => api.with_details(json!({ "field": key })),
                None => api,
            }
        }
        other => ApiError::invalid_request(format!("invalid path: {}", other.body_text())),
    }
}

/// `Query<T>` whose rejections are `invalid_request`.
pub struct ApiQuery<T>(pub T);

impl<S, T> FromRequestParts<S> for ApiQuery<T>
where
    T: DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, Self::Rejection> {
        match axum::extract::Query::<T>::from_request_parts(parts, state).await {
            Ok(axum::extract::Query(value)) => Ok(Self(value)),
            Err(QueryRejection::FailedToDeserializeQueryString(err)) => Err(ApiError::invalid_request(format!(
                "invalid query string: {}",
                err.body_text()
            ))),
            Err(other) => Err(ApiError::invalid_request(format!(
                "invalid query string: {}",
                other.body_text()
            ))),
        }
    }
}

/// Parses the raw query values: `offset` an integer ≥ 0 (default 0), `limit` an integer in
/// 1..=1000 (default 100). Anything else is `invalid_request` naming the parameter.
pub(crate) fn paging(offset: Option<&str>, limit: Option<&str>) -> Result<Paging, ApiError> {
    let invalid = |field: &str, message: String| {
        ApiError::invalid_request(message).with_details(serde_json::json!({ "field": field }))
    };
    let offset = match offset {
        None => 0,
        Some(raw) => raw
            .trim()
            .parse::<i64>()
            .ok()
            .and_then(|n| u64::try_from(n).ok())
            .ok_or_else(|| {
                invalid(
                    "offset",
                    format!("offset must be an integer of at least 0, not `{raw}`"),
                )
            })?,
    };
    let limit = match limit {
        None => Paging::DEFAULT_LIMIT,
        Some(raw) => raw
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|n| (1..=Paging::MAX_LIMIT).contains(n))
            .ok_or_else(|| {
                invalid(
                    "limit",
                    format!("limit must be an integer from 1 to {}, not `{raw}`", Paging::MAX_LIMIT),
                )
            })?,
    };
    Ok(Paging { offset, limit })
}

/// A list endpoint's query: only `offset`, `limit` and `also` may appear, each once.
pub(crate) fn list_query(query: &[(String, String)], also: &[&str]) -> Result<Paging, ApiError> {
    let mut seen: Vec<&str> = Vec::new();
    for (key, _) in query {
        if key != "offset" && key != "limit" && !also.contains(&key.as_str()) {
            let allowed: Vec<&str> = also.iter().copied().chain(["offset", "limit"]).collect();
            return Err(ApiError::invalid_request(format!(
                "unknown query parameter `{key}` (use {})",
                allowed.join(", ")
            ))
            .with_details(json!({ "field": key })));
        }
        if seen.contains(&key.as_str()) {
            return Err(ApiError::invalid_request(format!("`{key}` is given more than once"))
                .with_details(json!({ "field": key })));
        }
        seen.push(key);
    }
    let value = |name: &str| query.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str());
    paging(value("offset"), value("limit"))
}

/// The store window for `paging`: one row more than the page, to tell whether another follows.
pub(crate) fn window(paging: Paging) -> Window {
    Window {
        offset: paging.offset,
        limit: u64::from(paging.limit) + 1,
    }
}

/// The page out of the rows read through [`window`], and the `offset` of the next page
/// (`None` when this one is the last).
pub(crate) fn page<T>(mut rows: Vec<T>, paging: Paging) -> (Vec<T>, Option<u64>) {
    let limit = paging.limit as usize;
    if rows.len() > limit {
        rows.truncate(limit);
        (rows, Some(paging.offset + u64::from(paging.limit)))
    } else {
        (rows, None)
    }
}
