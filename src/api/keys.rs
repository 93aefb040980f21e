//! `/v1/provider-keys` (manage keys) and `/v1/providers` (live scheduler view).

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Extension, Router};
use chrono::{DateTime, Utc};
use secrecy::SecretString;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::audit::AuditTarget;
use super::error::{ApiError, ErrorBody};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use crate::api::AppState;
use crate::domain::{KeyId, ProviderKind, StoredKey};
use crate::providers::breaker::BreakerState;
use crate::providers::scheduler::KeyStatus;
use crate::service::keys::CreateKey;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/provider-keys", get(list_keys).post(create_key))
        .route(
            "/v1/provider-keys/{key_id}",
            axum::routing::patch(update_key).delete(delete_key),
        )
        .route("/v1/providers", get(list_providers))
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateKeyRequest {
    /// The provider the key is for (the reranker's keys are `rerank`).
    #[schema(value_type = KeyProvider, example = "google")]
    pub provider: String,
    /// The API key, exactly as the provider issued it: 1 to 1024 visible ASCII characters
    /// (`!` to `~`), no whitespace (it is sent in an HTTP header). Stored encrypted; never
    /// returned.
    #[schema(value_type = String, example = "AIza...", min_length = 1, max_length = 1024, pattern = r"^[!-~]+$")]
    pub secret: SecretString,
    /// At most 200 characters as sent, no control characters; stored without surrounding
    /// whitespace, and a blank label is none (the key is then named after its fingerprint).
    #[schema(example = "team-a", max_length = 200, pattern = r"^[^\u0000-\u001f\u007f-\u009f]*$")]
    pub label: Option<String>,
    /// Keys of one quota group (e.g. one Google Cloud project) share one quota: a rate limit on
    /// one cools them all down. As `label`: at most 200 characters, no control characters, blank
    /// is none.
    #[schema(
        example = "project-1",
        max_length = 200,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub quota_group: Option<String>,
}

/// The providers that take keys (the local model needs none).
pub const KEYED: [ProviderKind; 3] = [ProviderKind::Google, ProviderKind::OpenAi, ProviderKind::Rerank];

super::openapi::names_schema!(
    /// The providers that take keys: [`KEYED`].
    KeyProvider,
    "The providers that take keys.",
    KEYED.map(ProviderKind::as_str)
);

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateKeyRequest {
    /// Disable, or enable (which also lifts a retirement and a cooldown).
    pub enabled: bool,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ProviderKey)]
pub struct KeyDto {
    pub key_id: Uuid,
    pub provider: String,
    pub label: String,
    /// Last four characters and a sha256 prefix, e.g. `…a1b2:0f3c9a1e`.
    pub fingerprint: String,
    /// `api` (added here) or `config` (from configuration; read-only but can be disabled).
    pub source: String,
    pub quota_group: Option<String>,
    pub enabled: bool,
    pub retired: bool,
    pub retired_reason: Option<String>,
    /// Whether quarry can embed with the key now: enabled, not retired and its secret at hand
    /// (cooldowns aside).
    pub usable: bool,
    /// Why a key that is enabled cannot be used, e.g. its secret does not decrypt with the
    /// configured `security.master_key`.
    pub problem: Option<String>,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

impl From<StoredKey> for KeyDto {
    fn from(k: StoredKey) -> Self {
        KeyDto {
            key_id: k.id.0,
            provider: k.provider.as_str().to_owned(),
            label: k.label,
            fingerprint: k.fingerprint,
            source: k.origin.as_str().to_owned(),
            quota_group: k.quota_group,
            usable: k.enabled && !k.retired,
            enabled: k.enabled,
            retired: k.retired,
            retired_reason: k.retired_reason,
            problem: None,
            created_at: k.created_at,
            updated_at: k.updated_at,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct KeyList {
    pub keys: Vec<KeyDto>,
    /// The `offset` of the next page; `null` on the last one.
    pub next_offset: Option<u64>,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ProviderKeyStatus)]
pub struct KeyStatusDto {
    pub key_id: Uuid,
    pub label: String,
    pub fingerprint: String,
    pub source: String,
    pub enabled: bool,
    pub retired: bool,
    pub retired_reason: Option<String>,
    pub quota_group: Option<String>,
    /// When the key (or its quota group) may be used again; `null` when it is not cooling down.
    pub cooling_down_until: Option<DateTime<Utc>>,
    pub in_flight: usize,
    /// Requests and outcomes since this process started.
    pub requests: u64,
    pub rate_limited: u64,
    pub failures: u64,
}

impl From<KeyStatus> for KeyStatusDto {
    fn from(k: KeyStatus) -> Self {
        KeyStatusDto {
            key_id: k.key_id.0,
            label: k.label,
            fingerprint: k.fingerprint,
            source: k.origin.as_str().to_owned(),
            enabled: k.enabled,
            retired: k.retired,
            retired_reason: k.retired_reason,
            quota_group: k.quota_group,
            cooling_down_until: k.cooling_down_until,
            in_flight: k.in_flight,
            requests: k.requests,
            rate_limited: k.rate_limited,
            failures: k.failures,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Provider)]
pub struct ProviderDto {
    pub provider: String,
    pub keys: Vec<KeyStatusDto>,
    /// This process's circuit breakers for the provider's models that failed since their last
    /// success (a closed, healthy breaker is not listed).
    pub breakers: Vec<BreakerDto>,
}

/// A circuit breaker's state (`breakers[].state`).
#[derive(Clone, Copy, Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = BreakerState)]
pub enum BreakerStateDto {
    Closed,
    Open,
    HalfOpen,
}

/// A circuit breaker: a run of transient failures (5xx, overloaded, timeouts) opens it, and
/// while it is open the provider is not called for the model; work waits without spending
/// attempts.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Breaker)]
pub struct BreakerDto {
    pub model: String,
    /// `closed` (failing, still called), `open` (not called until `open_until`) or `half_open`
    /// (one probe call decides).
    #[schema(example = "open")]
    pub state: BreakerStateDto,
    /// Transient failures since the last success.
    pub failures_in_row: u32,
    pub open_until: Option<DateTime<Utc>>,
    /// The first failure since the last success.
    pub failing_since: Option<DateTime<Utc>>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct ProviderList {
    pub providers: Vec<ProviderDto>,
}

/// Register a provider API key (encrypted at rest under `security.master_key`).
#[utoipa::path(post, path = "/v1/provider-keys", tag = "providers", request_body = CreateKeyRequest,
    responses((status = 201, body = KeyDto),
        (status = 400, description = "invalid_request", body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 409, description = "master_key_missing or provider_key_exists", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn create_key(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<CreateKeyRequest>,
) -> Result<(StatusCode, Extension<AuditTarget>, axum::Json<KeyDto>), ApiError> {
    let key = state
        .keys
        .create(CreateKey {
            provider: req.provider.parse().map_err(|m: String| {
                ApiError::invalid_request(m).with_details(serde_json::json!({ "field": "provider" }))
            })?,
            secret: req.secret,
            label: req.label,
            quota_group: req.quota_group,
        })
        .await?;
    Ok((
        StatusCode::CREATED,
        Extension(AuditTarget(key.id.0)),
        axum::Json(key.into()),
    ))
}

/// Every key: API keys and (read-only) configuration keys. Secrets are never returned.
#[utoipa::path(get, path = "/v1/provider-keys", tag = "providers",
    params(("offset" = Option<u64>, Query, description = "keys to skip (default 0)", minimum = 0, maximum = 9223372036854775807_i64),
        ("limit" = Option<u32>, Query, description = "keys to return, 1 to 1000 (default 100)", minimum = 1, maximum = 1000)),
    responses((status = 200, body = KeyList), (status = 400, description = "invalid_request (`details.field`: `offset`, `limit` or an unknown parameter)", body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list_keys(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<Vec<(String, String)>>,
) -> Result<axum::Json<KeyList>, ApiError> {
    let paging = super::extract::list_query(&query, &[])?;
    let keys = state.keys.list(super::extract::window(paging)).await?;
    let (keys, next_offset) = super::extract::page(keys, paging);
    let problems = state.keys.problems();
    Ok(axum::Json(KeyList {
        keys: keys
            .into_iter()
            .map(|key| {
                let problem = problems.get(&key.id).copied();
                let mut dto = KeyDto::from(key);
                if let Some(problem) = problem {
                    dto.usable = false;
                    dto.problem = Some(problem.to_owned());
                }
                dto
            })
            .collect(),
        next_offset,
    }))
}

/// Enable or disable a key. Enabling lifts a retirement and a cooldown.
#[utoipa::path(patch, path = "/v1/provider-keys/{key_id}", tag = "providers",
    params(("key_id" = Uuid, Path)), request_body = UpdateKeyRequest,
    responses((status = 200, body = KeyDto), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "key_not_found", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn update_key(
    State(state): State<AppState>,
    ApiPath(key_id): ApiPath<KeyId>,
    ApiJson(req): ApiJson<UpdateKeyRequest>,
) -> Result<axum::Json<KeyDto>, ApiError> {
    Ok(axum::Json(state.keys.set_enabled(key_id, req.enabled).await?.into()))
}

/// Delete an API key (configuration keys: 409 `provider_key_read_only`).
#[utoipa::path(delete, path = "/v1/provider-keys/{key_id}", tag = "providers",
    params(("key_id" = Uuid, Path)),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "key_not_found", body = ErrorBody),
        (status = 409, description = "provider_key_read_only", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn delete_key(
    State(state): State<AppState>,
    ApiPath(key_id): ApiPath<KeyId>,
) -> Result<StatusCode, ApiError> {
    state.keys.delete(key_id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The scheduler's live view: per key, whether it is usable, cooling down, in flight, and its
/// counters since this process started.
#[utoipa::path(get, path = "/v1/providers", tag = "providers",
    responses((status = 200, body = ProviderList), (status = 401, body = ErrorBody)), security(("bearer" = [])))]
pub async fn list_providers(State(state): State<AppState>) -> axum::Json<ProviderList> {
    let status = state.keys.status();
    let breakers = state.breakers.views(std::time::Instant::now(), Utc::now());
    let providers = KEYED
        .into_iter()
        .map(|provider| ProviderDto {
            provider: provider.as_str().to_owned(),
            keys: status
                .iter()
                .filter(|k| k.provider == provider)
                .cloned()
                .map(Into::into)
                .collect(),
            breakers: breakers
                .iter()
                .filter(|b| b.provider == provider)
                .map(|b| BreakerDto {
                    model: b.model.clone(),
                    state: match b.state {
                        BreakerState::Closed => BreakerStateDto::Closed,
                        BreakerState::Open => BreakerStateDto::Open,
                        BreakerState::HalfOpen => BreakerStateDto::HalfOpen,
                    },
                    failures_in_row: b.failures_in_row,
                    open_until: b.open_until,
                    failing_since: b.failing_since,
                })
                .collect(),
        })
        .collect();
    axum::Json(ProviderList { providers })
}
