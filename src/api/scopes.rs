//! The scope every route needs, in one table: the router's check, the OpenAPI document's
//! `security` and the test that walks every operation all read [`ROUTES`], so a route cannot
//! ship without a scope (one missing from the table needs `admin`, and the test fails).

use axum::http::Method;

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
    ("POST", "/v1/worlds/{world_id}/repair", Admin, Reach::World),
    ("POST", "/v1/worlds/{world_id}/reingest", Admin, Reach::World),
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
];

/// The MCP endpoint (every method): its tools read (list worlds, retrieve, read sources), and
/// name worlds in their arguments, so a token limited to some worlds is refused there.
pub const MCP: (Scope, Reach) = (Read, Reach::Global);

/// What `method` on the route `template` needs; a route missing from the table needs `admin`
/// of every world.
pub fn needed(method: &Method, template: &str) -> (Scope, Reach) {
    if template == "/v1/mcp" || template.starts_with("/v1/mcp/") {
        return MCP;
    }
    ROUTES
        .iter()
        .find(|(m, t, _, _)| *m == method.as_str() && *t == template)
        .map_or((Admin, Reach::Global), |(_, _, scope, reach)| (*scope, *reach))
}
