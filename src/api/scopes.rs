//! The scope every route needs, in one table: the router's check, the OpenAPI document's
//! `security` and the test that walks every operation all read [`ROUTES`], so a route cannot
//! ship without a scope (one missing from the table needs `admin`, and the test fails).

use axum::http::Method;

use crate::domain::AuditAction;
use crate::domain::Scope::{self, Admin, Ingest, Read};

/// Whom a route concerns beyond its scope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// One world, named in the path (`{world_id}`, or the world of `{job_id}`): a token
    /// limited to other worlds is answered as if the world did not exist.
    World,
    /// No world in particular (listings filter by the token's worlds; creating a world adds it
    /// to a limited token's grant).
    Listing,
    /// Every world (provider keys, webhooks, tokens, the cluster, MCP): a token limited to
    /// some worlds is refused.
    Global,
}

/// `(method, route template, scope, reach)` for every `/v1` route.
pub const ROUTES: &[(&str, &str, Scope, Reach)] = &[
    ("GET", "/v1/models", Read, Reach::Listing),
    ("GET", "/v1/worlds", Read, Reach::Listing),
    ("POST", "/v1/worlds", Admin, Reach::Listing),
    ("GET", "/v1/worlds/{world_id}", Read, Reach::World),
    ("PATCH", "/v1/worlds/{world_id}", Admin, Reach::World),
    ("DELETE", "/v1/worlds/{world_id}", Admin, Reach::World),
    ("POST", "/v1/worlds/{world_id}/retrieve", Read, Reach::World),
    ("GET", "/v1/worlds/{world_id}/evals", Read, Reach::World),
    ("POST", "/v1/worlds/{world_id}/evals", Ingest, Reach::World),
    ("POST", "/v1/worlds/{world_id}/evals/suggest", Read, Reach::World),
    ("GET", "/v1/worlds/{world_id}/evals/{eval_id}", Read, Reach::World),
    ("PUT", "/v1/worlds/{world_id}/evals/{eval_id}", Ingest, Reach::World),
    ("DELETE", "/v1/worlds/{world_id}/evals/{eval_id}", Ingest, Reach::World),
    ("GET", "/v1/worlds/{world_id}/evals/{eval_id}/runs", Read, Reach::World),
    (
        "POST",
        "/v1/worlds/{world_id}/evals/{eval_id}/runs",
        Ingest,
        Reach::World,
    ),
    (
        "GET",
        "/v1/worlds/{world_id}/evals/{eval_id}/runs/{run_id}",
        Read,
        Reach::World,
    ),
    (
        "DELETE",
        "/v1/worlds/{world_id}/evals/{eval_id}/runs/{run_id}",
        Ingest,
        Reach::World,
    ),
    (
        "POST",
        "/v1/worlds/{world_id}/evals/{eval_id}/runs/{run_id}/cancel",
        Ingest,
        Reach::World,
    ),
    (
        "GET",
        "/v1/worlds/{world_id}/evals/{eval_id}/runs/{run_id}/events",
        Read,
        Reach::World,
    ),
    (
        "GET",
        "/v1/worlds/{world_id}/evals/{eval_id}/runs/{a}/compare/{b}",
        Read,
        Reach::World,
    ),
    ("POST", "/v1/worlds/{world_id}/repair", Admin, Reach::World),
    ("POST", "/v1/worlds/{world_id}/reingest", Admin, Reach::World),
    (
        "POST",
        "/v1/worlds/{world_id}/reingest/{job_id}/promote",
        Admin,
        Reach::World,
    ),
    (
        "POST",
        "/v1/worlds/{world_id}/reingest/{job_id}/discard",
        Admin,
        Reach::World,
    ),
    ("POST", "/v1/worlds/{world_id}/retry-failed", Ingest, Reach::World),
    ("GET", "/v1/worlds/{world_id}/jobs", Read, Reach::World),
    ("GET", "/v1/worlds/{world_id}/sources", Read, Reach::World),
    ("POST", "/v1/worlds/{world_id}/sources", Ingest, Reach::World),
    ("POST", "/v1/worlds/{world_id}/sources/upload", Ingest, Reach::World),
    ("GET", "/v1/worlds/{world_id}/sources/by-key", Read, Reach::World),
    ("PUT", "/v1/worlds/{world_id}/sources/by-key", Ingest, Reach::World),
    ("DELETE", "/v1/worlds/{world_id}/sources/by-key", Ingest, Reach::World),
    ("GET", "/v1/worlds/{world_id}/sources/{source_id}", Read, Reach::World),
    ("PUT", "/v1/worlds/{world_id}/sources/{source_id}", Ingest, Reach::World),
    (
        "DELETE",
        "/v1/worlds/{world_id}/sources/{source_id}",
        Ingest,
        Reach::World,
    ),
    (
        "GET",
        "/v1/worlds/{world_id}/sources/{source_id}/text",
        Read,
        Reach::World,
    ),
    (
        "GET",
        "/v1/worlds/{world_id}/sources/{source_id}/chunks",
        Read,
        Reach::World,
    ),
    ("GET", "/v1/jobs/{job_id}", Read, Reach::World),
    ("GET", "/v1/jobs/{job_id}/events", Read, Reach::World),
    ("POST", "/v1/jobs/{job_id}/pause", Ingest, Reach::World),
    ("POST", "/v1/jobs/{job_id}/resume", Ingest, Reach::World),
    ("POST", "/v1/jobs/{job_id}/cancel", Ingest, Reach::World),
    ("POST", "/v1/jobs/{job_id}/retry", Ingest, Reach::World),
    ("GET", "/v1/provider-keys", Admin, Reach::Global),
    ("POST", "/v1/provider-keys", Admin, Reach::Global),
    ("PATCH", "/v1/provider-keys/{key_id}", Admin, Reach::Global),
    ("DELETE", "/v1/provider-keys/{key_id}", Admin, Reach::Global),
    ("GET", "/v1/providers", Admin, Reach::Global),
    ("GET", "/v1/webhooks", Admin, Reach::Global),
    ("POST", "/v1/webhooks", Admin, Reach::Global),
    ("GET", "/v1/webhooks/{webhook_id}", Admin, Reach::Global),
    ("DELETE", "/v1/webhooks/{webhook_id}", Admin, Reach::Global),
    ("GET", "/v1/webhooks/{webhook_id}/deliveries", Admin, Reach::Global),
    ("GET", "/v1/cluster", Admin, Reach::Global),
    ("GET", "/v1/tokens", Admin, Reach::Global),
    ("POST", "/v1/tokens", Admin, Reach::Listing),
    ("GET", "/v1/tokens/{token_id}", Admin, Reach::Global),
    ("DELETE", "/v1/tokens/{token_id}", Admin, Reach::Global),
    ("POST", "/v1/tokens/{token_id}/rotate", Admin, Reach::Global),
    ("GET", "/v1/token", Read, Reach::Listing),
    ("GET", "/v1/audit", Admin, Reach::Global),
];

/// `(method, route template, action)` for every route whose success the audit log records:
/// every `admin` route that changes something (a test holds the two tables to that).
pub const AUDITED: &[(&str, &str, AuditAction)] = &[
    ("POST", "/v1/worlds", AuditAction::WorldCreated),
    ("PATCH", "/v1/worlds/{world_id}", AuditAction::WorldUpdated),
    ("DELETE", "/v1/worlds/{world_id}", AuditAction::WorldDeleted),
    ("POST", "/v1/worlds/{world_id}/reingest", AuditAction::WorldReingested),
    (
        "POST",
        "/v1/worlds/{world_id}/reingest/{job_id}/promote",
        AuditAction::ReingestPromoted,
    ),
    (
        "POST",
        "/v1/worlds/{world_id}/reingest/{job_id}/discard",
        AuditAction::ReingestDiscarded,
    ),
    ("POST", "/v1/worlds/{world_id}/repair", AuditAction::WorldRepaired),
    ("POST", "/v1/provider-keys", AuditAction::KeyAdded),
    ("PATCH", "/v1/provider-keys/{key_id}", AuditAction::KeyUpdated),
    ("DELETE", "/v1/provider-keys/{key_id}", AuditAction::KeyRemoved),
    ("POST", "/v1/webhooks", AuditAction::WebhookCreated),
    ("DELETE", "/v1/webhooks/{webhook_id}", AuditAction::WebhookDeleted),
    ("POST", "/v1/tokens", AuditAction::TokenCreated),
    ("DELETE", "/v1/tokens/{token_id}", AuditAction::TokenRevoked),
    ("POST", "/v1/tokens/{token_id}/rotate", AuditAction::TokenRotated),
];

/// The action the audit log records when `method` on `template` succeeds, if any.
pub fn audited(method: &Method, template: &str) -> Option<AuditAction> {
    AUDITED
        .iter()
        .find(|(m, t, _)| *m == method.as_str() && *t == template)
        .map(|(_, _, action)| *action)
}

/// The MCP endpoint (every method): its tools read (list worlds, retrieve, read sources). They
/// name worlds in their arguments, so the tools themselves hold a token limited to some worlds
/// to those (`list_worlds` filters; another world is `world_not_found`).
pub const MCP: (Scope, Reach) = (Read, Reach::Listing);

/// What `method` on the route `template` needs; a route missing from the table needs `admin`
/// of every world.
pub fn needed(method: &Method, template: &str) -> (Scope, Reach) {
    if template == "/mcp" || template.starts_with("/mcp/") {
        return MCP;
    }
    ROUTES
        .iter()
        .find(|(m, t, _, _)| *m == method.as_str() && *t == template)
        .map_or((Admin, Reach::Global), |(_, _, scope, reach)| (*scope, *reach))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_admin_route_that_changes_something_is_audited_and_nothing_else() {
        let mut writes: Vec<(&str, &str)> = ROUTES
            .iter()
            .filter(|(method, _, scope, _)| *scope == Admin && *method != "GET")
            .map(|(method, template, _, _)| (*method, *template))
            .collect();
        let mut audited: Vec<(&str, &str)> = AUDITED.iter().map(|(m, t, _)| (*m, *t)).collect();
        writes.sort_unstable();
        audited.sort_unstable();
        assert_eq!(writes, audited);
        let mut actions: Vec<&str> = AUDITED.iter().map(|(_, _, a)| a.as_str()).collect();
        actions.sort_unstable();
        actions.dedup();
        assert_eq!(actions.len(), AuditAction::ALL.len(), "each action is one route's");
    }

    #[test]
    fn mcp_needs_read_wherever_its_requests_are_matched() {
        for template in ["/mcp", "/mcp/{*__private__axum_nest_tail_param}"] {
            assert_eq!(needed(&Method::POST, template), (Read, Reach::Listing), "{template}");
        }
    }
}
