//! `/mcp`: quarry as a Model Context Protocol server (streamable HTTP, the official Rust SDK
//! `rmcp`), behind the same bearer token as `/v1`. Three tools: `list_worlds`, `retrieve` (the
//! `/retrieve` settings as arguments; the answer's context and citations in the result) and
//! `get_source_text` (a bounded slice of a source's stored text). Stateless: every request stands
//! alone, so any replica answers any request.
//!
//! Bad arguments and failures the API would answer 4xx/5xx for are tool errors (`isError: true`,
//! with the API's error code and message), never a transport failure.

use std::sync::Arc;
use tokio_util::sync::CancellationToken;

use axum::http::request::Parts;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::handler::server::tool::Extension;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rmcp::{ServerHandler, schemars, tool, tool_handler, tool_router};
use serde::Deserialize;
use serde_json::{Map, Value, json};

use super::error::ApiError;
use super::retrieve::RetrieveRequest;
use crate::api::AppState;
use crate::domain::{SourceId, SourceKey, WorldId};
use crate::service::tokens::Principal;

/// The most chars `get_source_text` returns at once.
pub const MAX_SOURCE_TEXT_CHARS: u64 = 100_000;
/// What `get_source_text` returns when not told.
const DEFAULT_SOURCE_TEXT_CHARS: u64 = 20_000;

/// The `/mcp` service: a new handler per request over the app's state, stopped at shutdown.
pub fn service(state: AppState) -> StreamableHttpService<QuarryMcp, LocalSessionManager> {
    let shutdown = state.shutdown.child_token();
    StreamableHttpService::new(
        move || Ok(QuarryMcp::new(state.clone())),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .with_sse_keep_alive(None)
            // The bearer token guards the route; quarry is reached by whatever host name it has.
            .disable_allowed_hosts()
            .with_cancellation_token(shutdown),
    )
}

#[derive(Clone)]
pub struct QuarryMcp {
    state: AppState,
    tool_router: ToolRouter<Self>,
}

/// `retrieve`'s arguments: `world_id` and the fields of a `/retrieve` body, read by the same
/// [`RetrieveRequest`] (its JSON Schema is the OpenAPI document's, with `world_id` added).
#[derive(Debug, Deserialize)]
pub struct RetrieveArgs(Map<String, Value>);

impl schemars::JsonSchema for RetrieveArgs {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "RetrieveArgs".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let mut schema = super::openapi::inline_schema::<RetrieveRequest>();
        if let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) {
            properties.insert(
                "world_id".into(),
                json!({"type": "string", "format": "uuid", "description": "The world to search (its id)."}),
            );
        }
        if let Some(required) = schema.get_mut("required").and_then(Value::as_array_mut) {
            required.push(json!("world_id"));
        }
        schemars::Schema::try_from(schema).unwrap_or_default()
    }
}

/// `get_source_text`'s arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub struct SourceTextArgs {
    /// The world (a UUID). Required.
    #[schemars(required)]
    pub world_id: Option<String>,
    /// The source (a UUID). This or `key` is required.
    pub source_id: Option<String>,
    /// The source's key (as it was uploaded, e.g. `guides/install.md`), instead of `source_id`.
    pub key: Option<String>,
    /// The first char to return (0-based, in Unicode scalar values; default 0).
    pub offset: Option<u64>,
    /// How many chars to return (1–100000, default 20000).
    pub max_chars: Option<u64>,
}

/// A tool error: what went wrong, as the API would say it.
fn tool_error(code: &str, message: impl std::fmt::Display) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(format!("{code}: {message}"))])
}

/// A tool error from the API's error: the text as [`tool_error`] writes it, and the API's whole
/// error body (`details` included) as the structured content.
fn api_error(err: ApiError) -> CallToolResult {
    let body = err.into_body("mcp");
    let mut result = tool_error(&body.error.code, &body.error.message);
    result.structured_content = serde_json::to_value(&body).ok();
    result
}

/// Whether the request's token reaches `world` (the auth layer put its [`Principal`] on the
/// request; without one, nothing is reached): `None`, or the refusal — a world out of reach is
/// answered as a missing one, as `/v1` does.
fn reach(parts: &Parts, world: WorldId) -> Option<CallToolResult> {
    match parts.extensions.get::<Principal>() {
        Some(principal) if principal.sees(world) => None,
        _ => Some(api_error(
            crate::service::ServiceError::NotFound(crate::service::Missing::World).into(),
        )),
    }
}

/// A tool error for an argument that is wrong, naming it as the API does.
fn invalid(field: &str, message: impl Into<String>) -> CallToolResult {
    api_error(ApiError::invalid_request(message).with_details(serde_json::json!({ "field": field })))
}

/// A required UUID argument; the `invalid_request` message when it is missing or not a UUID.
fn uuid_of(field: &str, raw: Option<&str>) -> Result<uuid::Uuid, String> {
    let raw = raw.ok_or_else(|| format!("{field} is required"))?;
    uuid::Uuid::parse_str(raw.trim()).map_err(|_| format!("{field} must be a UUID, not `{raw}`"))
}

#[tool_router]
impl QuarryMcp {
    fn new(state: AppState) -> Self {
        Self {
            state,
            tool_router: Self::tool_router(),
        }
    }

    /// Every world: id, name, embedding profile, whether it is hybrid, and its counts.
    #[tool(
        description = "List the worlds (isolated corpora) quarry keeps: id, name, embedding model, hybrid or \
                          not, and how many sources and chunks each has. Use a world's id with `retrieve`."
    )]
    async fn list_worlds(&self, Extension(parts): Extension<Parts>) -> CallToolResult {
        let window = crate::domain::Window { offset: 0, limit: 1000 };
        let Some(principal) = parts.extensions.get::<Principal>() else {
            return api_error(ApiError::new(super::error::ErrorCode::Unauthorized, "no token"));
        };
        let listed = if principal.sees_every_world() {
            self.state.worlds.list(window).await.map_err(ApiError::from)
        } else {
            super::worlds::listed(&self.state, principal, None, window).await
        };
        match listed {
            Ok(worlds) => {
                let worlds: Vec<Value> = worlds
                    .into_iter()
                    .map(|w| serde_json::to_value(super::worlds::WorldDto::from(w)).unwrap_or(Value::Null))
                    .collect();
                CallToolResult::structured(json!({ "worlds": worlds }))
            }
            Err(err) => api_error(err),
        }
    }

    /// Searches a world; the answer's context (numbered passages with citations) comes first.
    #[tool(
        description = "Search a world for passages that answer a question. Returns `context.text` (the \
                          passages, numbered, within the token budget) and `context.chunks` with citations \
                          (source, book and chunk numbers, title, url), and the ranked results. Arguments as \
                          quarry's POST /v1/worlds/{world_id}/retrieve."
    )]
    async fn retrieve(
        &self,
        Extension(parts): Extension<Parts>,
        cancelled: CancellationToken,
        Parameters(args): Parameters<RetrieveArgs>,
    ) -> CallToolResult {
        let RetrieveArgs(mut args) = args;
        let world_id = args.remove("world_id");
        let world = match uuid_of("world_id", world_id.as_ref().and_then(Value::as_str)) {
            Ok(id) => WorldId(id),
            Err(message) => return invalid("world_id", message),
        };
        if let Some(refused) = reach(&parts, world) {
            return refused;
        }
        let request = match RetrieveRequest::parse(args.into()) {
            Ok(request) => request,
            Err(err) => return api_error(err),
        };
        // rmcp runs the tool on a task of its own: the retrieval is dropped when the request's
        // token fires (the client went away, the request timed out, the server stops), as a
        // `/retrieve` is dropped with its connection.
        let answered = tokio::select! {
            () = cancelled.cancelled() => return tool_error("request_cancelled", "the request was given up"),
            answered = super::retrieve::answer(&self.state, world, &request) => answered,
        };
        match answered {
            Ok(answer) => {
                let text = answer.context.text.clone();
                let mut result = CallToolResult::structured(serde_json::to_value(&answer).unwrap_or(Value::Null));
                // The context first, as a model reads it; the whole answer stays structured.
                result.content = vec![ContentBlock::text(text)];
                result
            }
            Err(err) => api_error(err),
        }
    }

    /// A slice of a source's stored text, at most [`MAX_SOURCE_TEXT_CHARS`] chars.
    #[tool(
        description = "Read a source's stored text (for HTML, the converted text), a slice at a time: \
                          `offset` (chars, default 0) and `max_chars` (at most 100000, default 20000). The \
                          result says the source's total length, so a long text can be read in turns. Name the source by \
                          `source_id` or by its `key`."
    )]
    async fn get_source_text(
        &self,
        Extension(parts): Extension<Parts>,
        Parameters(args): Parameters<SourceTextArgs>,
    ) -> CallToolResult {
        let world = match uuid_of("world_id", args.world_id.as_deref()) {
            Ok(w) => WorldId(w),
            Err(message) => return invalid("world_id", message),
        };
        if let Some(refused) = reach(&parts, world) {
            return refused;
        }
        let source = match (args.source_id.as_deref(), args.key.as_deref()) {
            (Some(_), Some(_)) => return invalid("key", "give source_id or key, not both"),
            (None, Some(key)) => {
                let key = match SourceKey::parse(key) {
                    Ok(key) => key,
                    Err(message) => return invalid("key", message),
                };
                match self.state.sources.get_by_key(world, &key).await {
                    Ok(view) => view.source.id,
                    Err(err) => return api_error(err.into()),
                }
            }
            (id, None) => match uuid_of("source_id", id) {
                Ok(s) => SourceId(s),
                Err(message) => return invalid("source_id", message),
            },
        };
        let max = args.max_chars.unwrap_or(DEFAULT_SOURCE_TEXT_CHARS);
        if max == 0 || max > MAX_SOURCE_TEXT_CHARS {
            return invalid(
                "max_chars",
                format!("max_chars must be between 1 and {MAX_SOURCE_TEXT_CHARS}"),
            );
        }
        let text = match self.state.sources.text(world, source).await {
            Ok(text) => text,
            Err(err) => return api_error(err.into()),
        };
        let offset = args.offset.unwrap_or(0);
        let total = text.chars().count() as u64;
        let slice: String = text
            .chars()
            .skip(usize::try_from(offset).unwrap_or(usize::MAX))
            .take(usize::try_from(max).unwrap_or(usize::MAX))
            .collect();
        let returned = slice.chars().count() as u64;
        let mut result = CallToolResult::structured(json!({
            "text": slice,
            "offset": offset,
            "chars": returned,
            "total_chars": total,
            "more": offset.saturating_add(returned) < total,
        }));
        result.content = vec![ContentBlock::text(slice)];
        result
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for QuarryMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("quarry", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "quarry keeps worlds (corpora) of documents. Call list_worlds to find a world's id, then \
                 retrieve with a question to get the passages that answer it (context.text, with citations); \
                 get_source_text reads a whole source.",
            )
    }
}
