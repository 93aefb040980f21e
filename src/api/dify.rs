//! `POST /dify/retrieval`: Dify's External Knowledge API, so that a Dify app can use a world as
//! its knowledge base. In Dify's "external knowledge API" form the endpoint is quarry's address
//! with `/dify` (Dify appends `/retrieval`) and the API key a quarry token with `read`; the
//! "external knowledge ID" is a world's id or name.
//!
//! # Decisions
//! - **Dify's shapes throughout**, errors included: `{"error_code", "error_msg"}` with Dify's
//!   codes (1001 the `Authorization` header is not `Bearer <token>`, 1002 the token is not
//!   accepted or lacks `read`, 2001 no such knowledge) and, for what Dify names no code for,
//!   the HTTP status as the code and quarry's own code beside it (`code`).
//! - **`score` is the cosine similarity of the query and the chunk**, whatever the world's mode:
//!   Dify's `score_threshold` (0–1) is applied to it (0, Dify's "off", keeps everything; a
//!   negative cosine reads 0). A hybrid world still ranks by fusion;
//!   fused scores (about 1/60) would make any threshold drop everything.
//! - **`content` is the hit's chunk text**, verified against the store; `metadata` is always an
//!   object: the source's metadata, then quarry's own fields (which win on a clash).

use std::collections::BTreeMap;

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::Auth;
use super::error::ApiError;
use super::retrieve::request::{RetrieveMode, RetrieveRequest};
use crate::api::AppState;
use crate::domain::{Scope, World};
use crate::service::retrieval::SourceFilter;
use crate::service::retrieval::conditions::{Comparison, Condition, Conditions, MAX_CONDITIONS};
use crate::service::tokens::Principal;

/// The most results one request may ask for.
pub const MAX_TOP_K: u64 = 100;

pub fn router(state: AppState, auth: Auth) -> Router {
    Router::new()
        .route("/dify/retrieval", post(retrieval))
        .with_state((state, auth))
}

#[derive(Debug, Deserialize)]
struct DifyRequest {
    knowledge_id: String,
    query: String,
    retrieval_setting: RetrievalSetting,
    #[serde(default)]
    metadata_condition: Option<MetadataCondition>,
}

#[derive(Debug, Deserialize)]
struct RetrievalSetting {
    top_k: Value,
    #[serde(default)]
    score_threshold: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct MetadataCondition {
    #[serde(default)]
    logical_operator: Option<String>,
    conditions: Vec<DifyCondition>,
}

#[derive(Debug, Deserialize)]
struct DifyCondition {
    name: Value,
    comparison_operator: String,
    #[serde(default)]
    value: Option<Value>,
}

#[derive(Debug, Serialize)]
struct Record {
    content: String,
    score: f32,
    title: String,
    metadata: BTreeMap<String, Value>,
}

/// An error in Dify's shape.
struct DifyError {
    status: StatusCode,
    error_code: u16,
    message: String,
    code: Option<&'static str>,
    /// The answer `/v1` would have given: its `Retry-After` and what the error log reads of it
    /// are kept.
    original: Option<Box<Response>>,
}

impl DifyError {
    fn new(status: StatusCode, error_code: u16, message: impl Into<String>) -> Self {
        Self {
            status,
            error_code,
            message: message.into(),
            code: None,
            original: None,
        }
    }

    fn invalid(message: impl Into<String>) -> Self {
        Self::from(ApiError::invalid_request(message))
    }
}

impl From<ApiError> for DifyError {
    fn from(err: ApiError) -> Self {
        let (status, code, message) = (err.status, err.code, err.message.clone());
        let error_code = match code {
            super::error::ErrorCode::WorldNotFound => 2001,
            _ => status.as_u16(),
        };
        Self {
            status,
            error_code,
            message,
            code: Some(code.as_str()),
            original: Some(Box::new(err.into_response())),
        }
    }
}

impl IntoResponse for DifyError {
    fn into_response(self) -> Response {
        let mut body = json!({ "error_code": self.error_code, "error_msg": self.message });
        if let Some(code) = self.code {
            body["code"] = Value::from(code);
        }
        let mut response = (self.status, axum::Json(body)).into_response();
        if let Some(original) = self.original {
            let (parts, _) = (*original).into_parts();
            if let Some(wait) = parts.headers.get(header::RETRY_AFTER) {
                response.headers_mut().insert(header::RETRY_AFTER, wait.clone());
            }
            *response.extensions_mut() = parts.extensions;
        }
        response
    }
}

async fn retrieval(
    State((state, auth)): State<(AppState, Auth)>,
    headers: HeaderMap,
    body: Bytes,
) -> Result<axum::Json<Value>, DifyError> {
    let principal = authorize(&auth, &headers).await?;
    let req: DifyRequest = serde_json::from_slice(&body)
        .map_err(|err| DifyError::invalid(format!("the body is not Dify's retrieval request: {err}")))?;
    let top_k = match &req.retrieval_setting.top_k {
        // An integral number is an integer (2.0 is 2), as JSON Schema counts them.
        Value::Number(n) => n
            .as_u64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0 && *f >= 1.0).map(|f| f as u64))
            .filter(|k| (1..=MAX_TOP_K).contains(k)),
        _ => None,
    }
    .ok_or_else(|| {
        DifyError::invalid(format!(
            "retrieval_setting.top_k must be an integer from 1 to {MAX_TOP_K}"
        ))
    })?;
    let threshold = match &req.retrieval_setting.score_threshold {
        None | Some(Value::Null) => 0.0,
        Some(Value::Number(n)) => n
            .as_f64()
            .filter(|t| (0.0..=1.0).contains(t))
            .ok_or_else(|| DifyError::invalid("retrieval_setting.score_threshold must be between 0 and 1"))?,
        Some(_) => return Err(DifyError::invalid("retrieval_setting.score_threshold must be a number")),
    };
    let conditions = req.metadata_condition.map(conditions).transpose()?;
    let world = knowledge(&state, &principal, &req.knowledge_id).await?;

    // Ranked hits always (never the whole-corpus context `auto` gives a small world): Dify
    // wants records to rank, and makes its own context of them.
    let request = RetrieveRequest {
        query: req.query,
        top_k: Some(top_k),
        mode: Some(if world.hybrid {
            RetrieveMode::Hybrid
        } else {
            RetrieveMode::Dense
        }),
        explain: Some(true),
        ..RetrieveRequest::default()
    };
    let mut settings = request.settings();
    settings.filter = conditions.map(|c| SourceFilter {
        conditions: Some(c),
        ..SourceFilter::default()
    });
    let answer = super::retrieve::answer_with(&state, world.id, &request.query, &settings).await?;
    let records: Vec<Record> = answer
        .results
        .into_iter()
        .filter_map(|hit| {
            // Dify's scores run 0–1: an unrelated chunk's (rare) negative cosine reads 0.
            let cosine = (hit.explain.as_ref())
                .and_then(|e| e.dense.as_ref())
                .map_or(hit.score, |dense| dense.score)
                .clamp(0.0, 1.0);
            // 0 is how Dify says "no threshold".
            if threshold > 0.0 && f64::from(cosine) < threshold {
                return None;
            }
            let mut metadata: BTreeMap<String, Value> =
                hit.metadata.into_iter().map(|(k, v)| (k, Value::String(v))).collect();
            for (key, value) in [
                ("source_id", json!(hit.source_id)),
                ("filename", json!(hit.source_filename)),
                ("url", json!(hit.url)),
                ("page", json!(hit.page)),
                ("chunk_id", json!(hit.chunk_id)),
                ("book_number", json!(hit.book_number)),
                ("chunk_number", json!(hit.chunk_number)),
                ("char_start", json!(hit.char_start)),
                ("char_end", json!(hit.char_end)),
            ] {
                metadata.insert(key.to_owned(), value);
            }
            Some(Record {
                content: hit.chunk_text,
                score: cosine,
                title: hit.title.unwrap_or_else(|| hit.source_filename.clone()),
                metadata,
            })
        })
        .collect();
    Ok(axum::Json(json!({ "records": records })))
}

/// The caller, from `Authorization: Bearer <token>`: 1001 when the header is missing or not of
/// that form, 1002 when the token is not accepted or lacks `read`; 429 past its rate.
async fn authorize(auth: &Auth, headers: &HeaderMap) -> Result<Principal, DifyError> {
    let malformed = || {
        DifyError::new(
            StatusCode::UNAUTHORIZED,
            1001,
            "Invalid Authorization header format. Expected 'Bearer <api-key>' format.",
        )
    };
    let value = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(malformed)?;
    let token = value
        .strip_prefix("Bearer ")
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .ok_or_else(malformed)?;
    let refused = |why: &str| DifyError::new(StatusCode::FORBIDDEN, 1002, format!("Authorization failed: {why}"));
    let principal = auth
        .principal(Some(token))
        .await?
        .ok_or_else(|| refused("the token is not accepted"))?;
    if !principal.grants(Scope::Read) {
        return Err(refused("the token lacks the `read` scope"));
    }
    if let Principal::Token(token) = &principal
        && let Err(wait) = auth.tokens.admit(token)
    {
        return Err(ApiError::token_rate_limited(wait).into());
    }
    Ok(principal)
}

/// The world `knowledge_id` names — its id, or its name — among those the caller reaches;
/// 2001 otherwise, exactly as for a world that does not exist.
async fn knowledge(state: &AppState, principal: &Principal, knowledge_id: &str) -> Result<World, DifyError> {
    let missing = || {
        DifyError::new(
            StatusCode::NOT_FOUND,
            2001,
            format!("The knowledge does not exist: no world has the id or name `{knowledge_id}`"),
        )
    };
    match state
        .worlds
        .find_row(knowledge_id.trim(), |world| principal.sees(world))
        .await
    {
        Ok(Some(world)) => Ok(world),
        Ok(None) => Err(missing()),
        Err(err) => Err(ApiError::from(err).into()),
    }
}

fn conditions(condition: MetadataCondition) -> Result<Conditions, DifyError> {
    let any = match condition.logical_operator.as_deref().map(str::trim) {
        None | Some("and") | Some("") => false,
        Some("or") => true,
        Some(other) => {
            return Err(DifyError::invalid(format!(
                "metadata_condition.logical_operator must be `and` or `or`, not `{other}`"
            )));
        }
    };
    if condition.conditions.len() > MAX_CONDITIONS {
        return Err(DifyError::invalid(format!(
            "metadata_condition takes at most {MAX_CONDITIONS} conditions"
        )));
    }
    let list = condition
        .conditions
        .into_iter()
        .map(|c| {
            let names = match c.name {
                Value::String(name) => vec![name],
                Value::Array(names) if !names.is_empty() && names.len() <= 64 => names
                    .into_iter()
                    .map(|n| match n {
                        Value::String(name) => Ok(name),
                        _ => Err(DifyError::invalid("a condition's name must be a string or strings")),
                    })
                    .collect::<Result<_, _>>()?,
                _ => return Err(DifyError::invalid("a condition's name must be a string or strings")),
            };
            let comparison = Comparison::parse(c.comparison_operator.trim(), c.value.as_ref())
                .map_err(|message| DifyError::invalid(format!("metadata_condition: {message}")))?;
            Ok(Condition { names, comparison })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Conditions { any, list })
}
