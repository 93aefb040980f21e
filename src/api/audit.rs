//! `/v1/audit`: the audit log of administrative actions, and what the auth layer needs to write
//! it (the route's action from [`super::scopes::AUDITED`], the target a create names).

use axum::Router;
use axum::extract::State;
use axum::routing::get;
use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;
use uuid::Uuid;

use super::error::{ApiError, ErrorBody};
use super::extract::ApiQuery;
use crate::api::AppState;
use crate::domain::{AuditAction, AuditEvent};
use crate::service::{Invalid, ServiceError};

pub fn router() -> Router<AppState> {
    Router::new().route("/v1/audit", get(list_audit))
}

/// The id of what a create made, set on its answer (as a response extension) for the audit
/// log; other audited routes name their target in the path.
#[derive(Clone, Debug)]
pub struct AuditTarget(pub Uuid);

super::openapi::names_schema!(
    /// An action the audit log records: [`AuditAction::ALL`].
    AuditActionName,
    "An action the audit log records.",
    AuditAction::ALL.map(AuditAction::as_str)
);

/// Who acted.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AuditActor)]
pub struct AuditActorDto {
    /// The managed token's id; `null` for a bootstrap token from `auth.tokens`.
    pub token_id: Option<Uuid>,
    /// The managed token's name when it acted, or `bootstrap`.
    pub name: String,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = AuditEvent)]
pub struct AuditEventDto {
    /// Orders the log: a later entry has a larger `seq`.
    pub seq: i64,
    pub at: DateTime<Utc>,
    /// `world.created`, `world.updated`, `world.deleted`, `world.reingested`,
    /// `world.reingest_promoted`, `world.reingest_discarded`, `world.repaired`, `provider_key.added`, `provider_key.updated`, `provider_key.removed`, `webhook.created`,
    /// `webhook.deleted`, `token.created`, `token.revoked` or `token.rotated`.
    #[schema(value_type = AuditActionName, example = "token.created")]
    pub action: &'static str,
    pub actor: AuditActorDto,
    /// The id of the world, provider key, webhook or token acted on.
    pub target: Option<String>,
    /// The client's IP address as quarry saw it (behind a proxy, the proxy's).
    pub address: Option<String>,
}

impl From<AuditEvent> for AuditEventDto {
    fn from(entry: AuditEvent) -> Self {
        let e = entry.event;
        AuditEventDto {
            seq: entry.seq,
            at: e.at,
            action: e.action.as_str(),
            actor: AuditActorDto {
                token_id: e.actor.token_id.map(|id| id.0),
                name: e.actor.name,
            },
            target: e.target,
            address: e.address,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AuditList {
    /// Newest first.
    pub events: Vec<AuditEventDto>,
    /// The `offset` of the next page; `null` on the last one.
    pub next_offset: Option<u64>,
}

/// The audit log, newest first: administrative actions that succeeded, kept
/// `audit.keep_days` days.
#[utoipa::path(get, path = "/v1/audit", tag = "tokens",
    params(("offset" = Option<u64>, Query, description = "entries to skip (default 0)", minimum = 0, maximum = 9223372036854775807_i64),
        ("limit" = Option<u32>, Query, description = "entries to return, 1 to 1000 (default 100)", minimum = 1, maximum = 1000),
        ("action" = Option<AuditActionName>, Query, description = "only entries of this action")),
    responses((status = 200, body = AuditList),
        (status = 400, description = "invalid_request (`details.field`: `offset`, `limit`, `action` or an unknown parameter)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 403, description = "insufficient_scope", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list_audit(
    State(state): State<AppState>,
    ApiQuery(query): ApiQuery<Vec<(String, String)>>,
) -> Result<axum::Json<AuditList>, ApiError> {
    let paging = super::extract::list_query(&query, &["action"])?;
    let action = match query.iter().find(|(k, _)| k == "action") {
        None => None,
        Some((_, value)) => Some(AuditAction::parse(value).ok_or_else(|| {
            let known: Vec<&str> = AuditAction::ALL.iter().map(|a| a.as_str()).collect();
            ServiceError::invalid(
                Invalid::Request,
                "action",
                format!("unknown action `{value}` (one of {})", known.join(", ")),
            )
        })?),
    };
    let events = state.audit.list(action, super::extract::window(paging)).await?;
    let (events, next_offset) = super::extract::page(events, paging);
    Ok(axum::Json(AuditList {
        events: events.into_iter().map(Into::into).collect(),
        next_offset,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The document's enum of actions is the domain's list, spelled the same.
    #[test]
    fn the_documented_actions_are_the_recorded_ones() {
        let schema = serde_json::to_value(<AuditActionName as utoipa::PartialSchema>::schema()).unwrap();
        let documented: Vec<&str> = schema["enum"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        let recorded: Vec<&str> = AuditAction::ALL.iter().map(|a| a.as_str()).collect();
        assert_eq!(documented, recorded);
    }
}
