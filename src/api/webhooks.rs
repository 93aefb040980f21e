//! `/v1/webhooks`: signed job lifecycle notifications — subscriptions and their delivery logs.

use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::get;
use axum::{Extension, Router};
use chrono::{DateTime, Utc};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::audit::AuditTarget;
use super::error::{ApiError, ErrorBody};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use crate::api::AppState;
use crate::domain::{Delivery, Webhook, WebhookId, WorldId};
use crate::service::webhooks::CreateWebhook;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/webhooks", get(list_webhooks).post(create_webhook))
        .route("/v1/webhooks/{webhook_id}", get(get_webhook).delete(delete_webhook))
        .route("/v1/webhooks/{webhook_id}/deliveries", get(list_deliveries))
}

super::openapi::names_schema!(
    /// The job lifecycle events a subscription can ask for: [`WebhookEvent::ALL`].
    WebhookEventName,
    "The job lifecycle events a subscription can ask for.",
    crate::domain::WebhookEvent::ALL.map(crate::domain::WebhookEvent::as_str)
);

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateWebhookRequest {
    /// Where deliveries are POSTed: an absolute `http` or `https` URL of at most 2048
    /// characters, as a source's `url` (a host name or IP address, no user information, no
    /// whitespace or control characters).
    #[schema(
        example = "https://hooks.example.com/quarry",
        min_length = 1,
        max_length = 2048,
        pattern = "(set from SourceUrl::PATTERN)"
    )]
    pub url: String,
    /// Only this world's jobs; left out: every world's.
    pub world_id: Option<Uuid>,
    /// The events to deliver; left out: all of them. `job.waiting` is sent when a running job
    /// starts waiting for a minute or more (or for as long as nobody knows), e.g. for a spent
    /// daily quota or with no usable key left; `job.held` when a gated re-ingest is held.
    #[schema(value_type = Option<Vec<WebhookEventName>>, min_items = 1, max_items = 16)]
    pub events: Option<Vec<String>>,
    /// At most 200 characters, no control characters; blank is none.
    #[schema(
        example = "CI notifications",
        max_length = 200,
        pattern = r"^[^\u0000-\u001f\u007f-\u009f]*$"
    )]
    pub description: Option<String>,
    /// The signing secret, `whsec_` and the padded standard base64 of 24 to 64 bytes; left
    /// out: quarry makes one (32 random bytes). Stored encrypted under `security.master_key`;
    /// returned only in this response.
    #[schema(value_type = Option<String>, example = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", pattern = "(set from SECRET_PATTERN)")]
    pub secret: Option<SecretString>,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Webhook)]
pub struct WebhookDto {
    pub webhook_id: Uuid,
    /// The receiver. Shown whole only when the subscription is created; afterwards, as a URL
    /// may carry a receiver's token, each query value reads `redacted`.
    pub url: String,
    /// `null`: every world's jobs.
    pub world_id: Option<Uuid>,
    #[schema(value_type = Vec<WebhookEventName>)]
    pub events: Vec<&'static str>,
    pub description: Option<String>,
    pub created_at: DateTime<Utc>,
}

impl From<Webhook> for WebhookDto {
    fn from(hook: Webhook) -> Self {
        WebhookDto {
            webhook_id: hook.id.0,
            url: crate::outbound::redacted(&hook.url),
            world_id: hook.world_id.map(|w| w.0),
            events: hook.events.iter().map(|e| e.as_str()).collect(),
            description: hook.description,
            created_at: hook.created_at,
        }
    }
}

/// A new subscription, with its signing secret — the only time quarry shows it.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = CreatedWebhook)]
pub struct CreatedWebhookDto {
    #[serde(flatten)]
    pub webhook: WebhookDto,
    /// Verify each delivery's `webhook-signature` with it (any Standard Webhooks library does).
    #[schema(example = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")]
    pub secret: String,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct WebhookList {
    pub webhooks: Vec<WebhookDto>,
    /// The `offset` of the next page; `null` on the last one.
    pub next_offset: Option<u64>,
}

super::openapi::names_schema!(
    /// Where a delivery is: [`DeliveryStatus::ALL`].
    DeliveryStatusName,
    "Where a delivery is.",
    crate::domain::DeliveryStatus::ALL.map(crate::domain::DeliveryStatus::as_str)
);

/// One event sent (or to be sent) to a subscription.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Delivery)]
pub struct DeliveryDto {
    /// The message id the receiver sees as `webhook-id` (the same on every attempt).
    #[schema(example = "msg_42")]
    pub delivery_id: String,
    #[schema(value_type = WebhookEventName)]
    pub event: &'static str,
    pub job_id: Uuid,
    pub world_id: Uuid,
    /// `pending` (to be sent, or to be tried again at `next_attempt_at`), `delivered` (the
    /// receiver answered 2xx) or `failed` (every attempt failed; not tried again).
    #[schema(value_type = DeliveryStatusName)]
    pub status: &'static str,
    pub attempts: u32,
    /// The receiver's status code on the last attempt, when it answered.
    pub last_status_code: Option<u16>,
    /// Why the last attempt failed.
    pub last_error: Option<String>,
    pub created_at: DateTime<Utc>,
    pub last_attempt_at: Option<DateTime<Utc>>,
    pub next_attempt_at: Option<DateTime<Utc>>,
}

impl From<Delivery> for DeliveryDto {
    fn from(d: Delivery) -> Self {
        DeliveryDto {
            delivery_id: format!("msg_{}", d.id),
            event: d.event.as_str(),
            job_id: d.job_id.0,
            world_id: d.world_id.0,
            status: d.status.as_str(),
            attempts: d.attempts,
            last_status_code: d.last_status_code,
            last_error: d.last_error,
            created_at: d.created_at,
            last_attempt_at: d.last_attempt_at,
            next_attempt_at: d.next_attempt_at,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct DeliveryList {
    /// Newest first.
    pub deliveries: Vec<DeliveryDto>,
    /// The `offset` of the next page; `null` on the last one.
    pub next_offset: Option<u64>,
}

/// Subscribe a URL to job lifecycle events, signed with a secret (Standard Webhooks).
#[utoipa::path(post, path = "/v1/webhooks", tag = "webhooks", request_body = CreateWebhookRequest,
    responses((status = 201, body = CreatedWebhookDto),
        (status = 400, description = "invalid_request (`details.field`: `url`, `events`, `world_id`, `description` or `secret`)", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found (`world_id` names no world)", body = ErrorBody),
        (status = 409, description = "master_key_missing or webhook_limit_reached", body = ErrorBody),
        (status = 422, description = "destination_not_allowed (the URL's host is an address that is not public and not in `webhooks.allowed_networks`; a host name is checked on what it resolves to at every delivery instead)", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn create_webhook(
    State(state): State<AppState>,
    ApiJson(req): ApiJson<CreateWebhookRequest>,
) -> Result<(StatusCode, Extension<AuditTarget>, axum::Json<CreatedWebhookDto>), ApiError> {
    let created = state
        .webhooks
        .create(CreateWebhook {
            url: req.url,
            world_id: req.world_id.map(WorldId),
            events: req.events,
            description: req.description,
            secret: req.secret,
        })
        .await?;
    let secret = created.secret.expose_secret().to_owned();
    let url = created.webhook.url.clone();
    Ok((
        StatusCode::CREATED,
        Extension(AuditTarget(created.webhook.id.0)),
        axum::Json(CreatedWebhookDto {
            // The creator sees what it sent, once.
            webhook: WebhookDto {
                url,
                ..created.webhook.into()
            },
            secret,
        }),
    ))
}

/// Every subscription, oldest first. Secrets are never returned.
#[utoipa::path(get, path = "/v1/webhooks", tag = "webhooks",
    params(("offset" = Option<u64>, Query, description = "subscriptions to skip (default 0)", minimum = 0, maximum = 9223372036854775807_i64),
        ("limit" = Option<u32>, Query, description = "subscriptions to return, 1 to 1000 (default 100)", minimum = 1, maximum = 1000)),
    responses((status = 200, body = WebhookList), (status = 400, description = "invalid_request (`details.field`: `offset`, `limit` or an unknown parameter)", body = ErrorBody), (status = 401, body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list_webhooks(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<Vec<(String, String)>>,
) -> Result<axum::Json<WebhookList>, ApiError> {
    let paging = super::extract::list_query(&query, &[])?;
    let hooks = state.webhooks.list(super::extract::window(paging)).await?;
    let (hooks, next_offset) = super::extract::page(hooks, paging);
    Ok(axum::Json(WebhookList {
        webhooks: hooks.into_iter().map(Into::into).collect(),
        next_offset,
    }))
}

/// One subscription.
#[utoipa::path(get, path = "/v1/webhooks/{webhook_id}", tag = "webhooks",
    params(("webhook_id" = Uuid, Path)),
    responses((status = 200, body = WebhookDto), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "webhook_not_found", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn get_webhook(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<WebhookId>,
) -> Result<axum::Json<WebhookDto>, ApiError> {
    Ok(axum::Json(state.webhooks.get(id).await?.into()))
}

/// Unsubscribe: the subscription and its delivery log go, and nothing more is sent to it.
#[utoipa::path(delete, path = "/v1/webhooks/{webhook_id}", tag = "webhooks",
    params(("webhook_id" = Uuid, Path)),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "webhook_not_found", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn delete_webhook(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<WebhookId>,
) -> Result<StatusCode, ApiError> {
    state.webhooks.delete(id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A subscription's delivery log, newest first: what was sent, how often, and what the
/// receiver answered. Settled deliveries stay `webhooks.keep_deliveries_days` days.
#[utoipa::path(get, path = "/v1/webhooks/{webhook_id}/deliveries", tag = "webhooks",
    params(("webhook_id" = Uuid, Path),
        ("offset" = Option<u64>, Query, description = "deliveries to skip (default 0)", minimum = 0, maximum = 9223372036854775807_i64),
        ("limit" = Option<u32>, Query, description = "deliveries to return, 1 to 1000 (default 100)", minimum = 1, maximum = 1000)),
    responses((status = 200, body = DeliveryList), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "webhook_not_found", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list_deliveries(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<WebhookId>,
    ApiQuery(query): ApiQuery<Vec<(String, String)>>,
) -> Result<axum::Json<DeliveryList>, ApiError> {
    let paging = super::extract::list_query(&query, &[])?;
    let deliveries = state.webhooks.deliveries(id, super::extract::window(paging)).await?;
    let (deliveries, next_offset) = super::extract::page(deliveries, paging);
    Ok(axum::Json(DeliveryList {
        deliveries: deliveries.into_iter().map(Into::into).collect(),
        next_offset,
    }))
}
