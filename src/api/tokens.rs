//! `/v1/tokens`: API tokens with scopes and world grants, managed through the API.

use std::time::Duration;

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use axum::{Extension, Router};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::error::{ApiError, ErrorBody};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use crate::api::AppState;
use crate::domain::{ApiToken, Scope, TokenId, WorldId};
use crate::service::tokens::{NewToken, Principal};
use crate::service::{Invalid, ServiceError};

/// Longest grace a rotation keeps the old secret for (a week).
pub const MAX_GRACE_S: u64 = 7 * 24 * 3600;

/// The grace a rotation keeps the old secret for when the request names none (an hour).
pub const DEFAULT_GRACE_S: u64 = 3600;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/tokens", get(list_tokens).post(create_token))
        .route("/v1/tokens/{token_id}", get(get_token).delete(delete_token))
        .route("/v1/tokens/{token_id}/rotate", post(rotate_token))
        .route("/v1/token", get(current_token))
}

super::openapi::names_schema!(
    /// What a token may do: [`Scope::ALL`].
    ScopeName,
    "What a token may do.",
    Scope::ALL.map(Scope::as_str)
);

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateTokenRequest {
    /// 1 to 200 characters, not all blank, no control characters.
    #[schema(
        example = "support bot",
        min_length = 1,
        max_length = 200,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*[^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000][^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub name: String,
    /// `read` (retrieve; list and read worlds, sources, chunks, jobs, events; MCP), `ingest`
    /// (`read`, and write sources and steer jobs), `admin` (everything) and `metrics` (read
    /// `/metrics`). At least one.
    #[schema(value_type = Vec<ScopeName>, min_items = 1)]
    pub scopes: Vec<String>,
    /// The worlds the token may touch; left out: every world (or, when the caller's own token is
    /// limited, the caller's worlds). Worlds it creates join the list.
    pub worlds: Option<Vec<Uuid>>,
    /// When it stops being accepted; left out: never.
    pub expires_at: Option<DateTime<Utc>>,
    /// Requests a minute the token may make on each replica (1 to 1000000; up to ten seconds'
    /// worth at once); past it, 429 `token_rate_limited` with `Retry-After`. Left out: no limit
    /// of its own.
    #[serde(default, deserialize_with = "super::de::integer")]
    #[schema(value_type = Option<u32>, minimum = 1, maximum = 1000000)]
    pub rate_per_minute: Option<i64>,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Token)]
pub struct TokenDto {
    pub id: Uuid,
    pub name: String,
    #[schema(value_type = Vec<ScopeName>)]
    pub scopes: Vec<&'static str>,
    /// `null`: every world.
    pub worlds: Option<Vec<Uuid>>,
    pub created_at: DateTime<Utc>,
    pub expires_at: Option<DateTime<Utc>>,
    /// When it was last used, to the minute.
    pub last_used_at: Option<DateTime<Utc>>,
    pub rate_per_minute: Option<u32>,
}

impl From<ApiToken> for TokenDto {
    fn from(t: ApiToken) -> Self {
        TokenDto {
            id: t.id.0,
            name: t.name,
            scopes: t.scopes.iter().map(|s| s.as_str()).collect(),
            worlds: t.worlds.map(|w| w.into_iter().map(|w| w.0).collect()),
            created_at: t.created_at,
            expires_at: t.expires_at,
            last_used_at: t.last_used_at,
            rate_per_minute: t.rate_per_minute,
        }
    }
}

/// A token with its secret — the only time quarry shows it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = CreatedToken)]
pub struct CreatedTokenDto {
    #[serde(flatten)]
    pub token: TokenDto,
    /// `Authorization: Bearer <secret>`. Stored as a digest only: lost, it is rotated.
    #[schema(example = "qk_5f0c7c4e9b1a4c0e8d2f6a7b3c9e1d04_Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5")]
    pub secret: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct TokenList {
    pub tokens: Vec<TokenDto>,
    /// The `offset` of the next page; `null` on the last one.
    pub next_offset: Option<u64>,
}

/// The token a request presents, as `GET /v1/token` shows it: what a client (the console) needs
/// to know what it may do.
#[derive(Debug, Serialize, ToSchema)]
pub struct CurrentToken {
    /// `null` for a bootstrap token from `auth.tokens`.
    pub id: Option<Uuid>,
    /// The managed token's name, or `bootstrap`.
    #[schema(example = "support bot")]
    pub name: String,
    /// A bootstrap token holds every scope.
    #[schema(value_type = Vec<ScopeName>)]
    pub scopes: Vec<&'static str>,
    /// `null`: every world.
    pub worlds: Option<Vec<Uuid>>,
    /// `null`: never.
    pub expires_at: Option<DateTime<Utc>>,
}

impl From<&Principal> for CurrentToken {
    fn from(principal: &Principal) -> Self {
        match principal {
            Principal::Bootstrap => CurrentToken {
                id: None,
                name: "bootstrap".to_owned(),
                scopes: Scope::ALL.iter().map(|s| s.as_str()).collect(),
                worlds: None,
                expires_at: None,
            },
            Principal::Token(token) => CurrentToken {
                id: Some(token.id.0),
                name: token.name.clone(),
                scopes: token.scopes.iter().map(|s| s.as_str()).collect(),
                worlds: (token.worlds.as_ref()).map(|w| w.iter().map(|w| w.0).collect()),
                expires_at: token.expires_at,
            },
        }
    }
}

/// Who am I: the token this request presents — its name, id, scopes, worlds and expiry.
#[utoipa::path(get, path = "/v1/token", tag = "tokens",
    responses((status = 200, body = CurrentToken), (status = 401, body = ErrorBody),
        (status = 403, description = "insufficient_scope", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn current_token(Extension(principal): Extension<Principal>) -> axum::Json<CurrentToken> {
    axum::Json(CurrentToken::from(&principal))
}

/// Make a token. The answer carries its secret, shown this once.
#[utoipa::path(post, path = "/v1/tokens", tag = "tokens", request_body = CreateTokenRequest,
    responses((status = 201, body = CreatedTokenDto),
        (status = 400, description = "invalid_request (`details.field`: `name`, `scopes` or `rate_per_minute`)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, description = "insufficient_scope", body = ErrorBody),
        (status = 404, description = "world_not_found (a world of `worlds` the caller cannot reach)", body = ErrorBody),
        (status = 422, description = "expiry_in_past", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn create_token(
    State(state): State<AppState>,
    Extension(principal): Extension<Principal>,
    ApiJson(req): ApiJson<CreateTokenRequest>,
) -> Result<
    (
        StatusCode,
        Extension<super::audit::AuditTarget>,
        axum::Json<CreatedTokenDto>,
    ),
    ApiError,
> {
    let mut scopes = Vec::with_capacity(req.scopes.len());
    for name in &req.scopes {
        let scope = Scope::parse(name).ok_or_else(|| {
            ServiceError::invalid(
                Invalid::Request,
                "scopes",
                format!("unknown scope `{name}` (read, ingest, admin or metrics)"),
            )
        })?;
        scopes.push(scope);
    }
    let new = NewToken {
        name: req.name,
        scopes,
        worlds: req.worlds.map(|w| w.into_iter().map(WorldId).collect()),
        expires_at: req.expires_at,
        // Out of u32's range is out of the rate's range too: the service names the field.
        rate_per_minute: req.rate_per_minute.map(|rate| u32::try_from(rate).unwrap_or(0)),
    };
    let (token, secret) = state.tokens.create(&principal, new).await?;
    Ok((
        StatusCode::CREATED,
        Extension(super::audit::AuditTarget(token.id.0)),
        axum::Json(CreatedTokenDto {
            token: token.into(),
            secret,
        }),
    ))
}

/// Every token, oldest first. Secrets are never returned.
#[utoipa::path(get, path = "/v1/tokens", tag = "tokens",
    params(("offset" = Option<u64>, Query, description = "tokens to skip (default 0)", minimum = 0, maximum = 9223372036854775807_i64),
        ("limit" = Option<u32>, Query, description = "tokens to return, 1 to 1000 (default 100)", minimum = 1, maximum = 1000)),
    responses((status = 200, body = TokenList), (status = 400, description = "invalid_request (`details.field`: `offset`, `limit` or an unknown parameter)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, description = "insufficient_scope", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list_tokens(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<Vec<(String, String)>>,
) -> Result<axum::Json<TokenList>, ApiError> {
    let paging = super::extract::list_query(&query, &[])?;
    let tokens = state.tokens.list(super::extract::window(paging)).await?;
    let (tokens, next_offset) = super::extract::page(tokens, paging);
    Ok(axum::Json(TokenList {
        tokens: tokens.into_iter().map(Into::into).collect(),
        next_offset,
    }))
}

/// One token.
#[utoipa::path(get, path = "/v1/tokens/{token_id}", tag = "tokens",
    params(("token_id" = Uuid, Path)),
    responses((status = 200, body = TokenDto), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, description = "insufficient_scope", body = ErrorBody),
        (status = 404, description = "token_not_found", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn get_token(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<TokenId>,
) -> Result<axum::Json<TokenDto>, ApiError> {
    Ok(axum::Json(state.tokens.get(id).await?.into()))
}

/// Revoke a token: every replica refuses it within 5 seconds.
#[utoipa::path(delete, path = "/v1/tokens/{token_id}", tag = "tokens",
    params(("token_id" = Uuid, Path)),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 403, description = "insufficient_scope", body = ErrorBody),
        (status = 404, description = "token_not_found", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn delete_token(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<TokenId>,
) -> Result<StatusCode, ApiError> {
    state.tokens.revoke(id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A new secret for a token (shown this once); the current one stays accepted for `grace_s`.
#[utoipa::path(post, path = "/v1/tokens/{token_id}/rotate", tag = "tokens",
    params(("token_id" = Uuid, Path),
        ("grace_s" = Option<u64>, Query, description = "how long the current secret stays accepted beside the new one, 0 to 604800 seconds (default 3600)", minimum = 0, maximum = 604800)),
    responses((status = 200, body = CreatedTokenDto),
        (status = 400, description = "invalid_request (`details.field`: `grace_s` or an unknown parameter)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, description = "insufficient_scope", body = ErrorBody),
        (status = 404, description = "token_not_found", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn rotate_token(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<TokenId>,
    ApiQuery(query): ApiQuery<Vec<(String, String)>>,
) -> Result<axum::Json<CreatedTokenDto>, ApiError> {
    let mut grace_s = DEFAULT_GRACE_S;
    for (name, value) in &query {
        let parsed = (name == "grace_s")
            .then(|| value.parse::<u64>().ok())
            .flatten()
            .filter(|g| *g <= MAX_GRACE_S);
        grace_s = parsed.ok_or_else(|| {
            ServiceError::invalid(
                Invalid::Request,
                if name == "grace_s" { "grace_s" } else { name.as_str() },
                format!("the only parameter is grace_s, 0 to {MAX_GRACE_S} seconds"),
            )
        })?;
    }
    let (token, secret) = state.tokens.rotate(id, Duration::from_secs(grace_s)).await?;
    Ok(axum::Json(CreatedTokenDto {
        token: token.into(),
        secret,
    }))
}
