//! The OpenAPI 3.1 document, generated from the handlers and DTOs, served at `/openapi.json`
//! with an interactive reference at `/docs` (Swagger UI, vendored into the binary: nothing is
//! downloaded at build or run time). The same document is committed as
//! `openapi/openapi.json`; a test fails when the two differ.

use axum::Router;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_swagger_ui::SwaggerUi;

use super::{
    audit, cluster, error, eval_runs, evals, health, jobs, keys, maintenance, metrics, models, retrieve, sources,
    tokens, webhooks, worlds,
};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "quarry",
        description = "Retrieval-augmented generation service: worlds (isolated corpora with one locked \
                       embedding profile), ingestion into sentence-aware chunks, and retrieval of chunk text \
                       verified against the store. Every non-2xx response has the body \
                       `{\"error\": {\"code\", \"message\", \"details\"?}}`."
    ),
    paths(
        worlds::create_world,
        worlds::list_worlds,
        worlds::get_world,
        worlds::update_world,
        worlds::delete_world,
        models::list_models,
        sources::add_source,
        sources::upload_source,
        sources::list_sources,
        sources::get_source,
        sources::put_source,
        sources::delete_source,
        sources::get_source_by_key,
        sources::put_source_by_key,
        sources::delete_source_by_key,
        sources::source_text,
        sources::list_chunks,
        jobs::get_job,
        jobs::list_jobs,
        jobs::pause_job,
        jobs::resume_job,
        jobs::cancel_job,
        jobs::retry_job,
        jobs::retry_failed,
        jobs::job_events,
        maintenance::repair_world,
        maintenance::reingest_world,
        maintenance::promote_reingest,
        maintenance::discard_reingest,
        retrieve::retrieve,
        evals::create_eval,
        evals::list_evals,
        evals::get_eval,
        evals::replace_eval,
        evals::delete_eval,
        evals::suggest_eval,
        eval_runs::start_run,
        eval_runs::list_runs,
        eval_runs::get_run,
        eval_runs::cancel_run,
        eval_runs::delete_run,
        eval_runs::compare_runs,
        eval_runs::run_events,
        keys::create_key,
        keys::list_keys,
        keys::update_key,
        keys::delete_key,
        keys::list_providers,
        metrics::metrics,
        webhooks::create_webhook,
        webhooks::list_webhooks,
        webhooks::get_webhook,
        webhooks::delete_webhook,
        webhooks::list_deliveries,
        tokens::create_token,
        tokens::list_tokens,
        tokens::get_token,
        tokens::delete_token,
        tokens::rotate_token,
        tokens::current_token,
        audit::list_audit,
        cluster::cluster,
        health::healthz,
        health::readyz,
    ),
    components(schemas(error::ErrorBody, error::ErrorDetail)),
    modifiers(&BearerAuth, &Scopes, &CommonErrors, &Described, &ErrorCodes, &Links, &Rules),
    tags(
        (name = "worlds", description = "Isolated corpora with a locked embedding profile"),
        (name = "models", description = "Embedding models a world can use"),
        (name = "sources", description = "Source documents and their chunks"),
        (name = "evaluation", description = "Test sets of questions to measure retrieval on a world's own documents"),
        (name = "jobs", description = "Background ingestion jobs"),
        (name = "retrieval", description = "Search a world and get verified chunk text"),
        (name = "providers", description = "Provider API keys and the key scheduler's live view"),
        (name = "webhooks", description = "Signed notifications of job lifecycle events (Standard Webhooks)"),
        (name = "tokens", description = "API tokens with scopes and world grants, and the audit log of administrative actions"),
        (name = "operations", description = "Health and readiness probes, metrics, and the replicas sharing the store"),
    )
)]
pub struct ApiDoc;

struct BearerAuth;

impl Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
    }
}

/// Every `/v1` operation's scope, from the route table ([`super::scopes::ROUTES`]): its
/// `security` names the scope, its description says it, and it can answer 403
/// `insufficient_scope`.
struct Scopes;

impl Modify for Scopes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::SecurityRequirement;
        for (path, item) in openapi.paths.paths.iter_mut() {
            if !path.starts_with("/v1/") {
                continue;
            }
            let methods = [
                (axum::http::Method::GET, &mut item.get),
                (axum::http::Method::POST, &mut item.post),
                (axum::http::Method::PUT, &mut item.put),
                (axum::http::Method::PATCH, &mut item.patch),
                (axum::http::Method::DELETE, &mut item.delete),
            ];
            for (method, operation) in methods {
                let Some(operation) = operation.as_mut() else { continue };
                let (scope, reach) = super::scopes::needed(&method, path);
                operation.security = Some(vec![SecurityRequirement::new("bearer", [scope.as_str()])]);
                let whom = match reach {
                    super::scopes::Reach::World => {
                        " A token limited to other worlds is answered 404, as a missing world."
                    }
                    super::scopes::Reach::Global => " A token limited to some worlds is refused.",
                    super::scopes::Reach::Listing => "",
                };
                let note = format!("Scope: `{}`.{whom}", scope.as_str());
                operation.description = Some(match operation.description.take() {
                    Some(text) if !text.is_empty() => format!("{text}\n\n{note}"),
                    _ => note,
                });
                (operation.responses.responses)
                    .entry("403".into())
                    .or_insert_with(|| error_response("insufficient_scope"));
            }
        }
    }
}

/// A response with an `ErrorBody`, described by `description`.
fn error_response(description: &str) -> utoipa::openapi::RefOr<utoipa::openapi::Response> {
    use utoipa::openapi::{ContentBuilder, Ref, RefOr, ResponseBuilder};
    RefOr::T(
        ResponseBuilder::new()
            .description(description)
            .content(
                "application/json",
                ContentBuilder::new()
                    .schema(Some(Ref::from_schema_name("ErrorBody")))
                    .build(),
            )
            .build(),
    )
}

/// Answers every `/v1` operation that reads the store can give whatever it does, added where a
/// handler does not list them itself: 400 `invalid_request` for an id in the path that is not a UUID, and 503 when the
/// store (or the vector store) cannot be reached.
struct CommonErrors;

impl Modify for CommonErrors {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::RefOr;
        use utoipa::openapi::path::ParameterIn;
        let error = error_response;
        for (path, item) in openapi.paths.paths.iter_mut() {
            // Models and the scheduler's live view are answered from memory.
            if !path.starts_with("/v1/") || path == "/v1/models" || path == "/v1/providers" {
                continue;
            }
            for operation in operations(item) {
                let has_path_id = operation
                    .parameters
                    .iter()
                    .flatten()
                    .any(|p| matches!(p, RefOr::T(p) if p.parameter_in == ParameterIn::Path));
                let responses = &mut operation.responses.responses;
                if has_path_id {
                    responses
                        .entry("400".into())
                        .or_insert_with(|| error("invalid_request (an id in the path is not a UUID)"));
                }
                responses
                    .entry("503".into())
                    .or_insert_with(|| error("store_unavailable (the database cannot be reached or is busy)"));
            }
        }
    }
}

/// The operations of a path, whichever methods it has.
fn operations(item: &mut utoipa::openapi::PathItem) -> impl Iterator<Item = &mut utoipa::openapi::path::Operation> {
    [
        &mut item.get,
        &mut item.post,
        &mut item.put,
        &mut item.patch,
        &mut item.delete,
    ]
    .into_iter()
    .flatten()
}

/// Gives every response a description (OpenAPI requires one; generators and validators refuse
/// a document without): the status's meaning, for the responses a handler did not describe.
struct Described;

impl Modify for Described {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::RefOr;
        for item in openapi.paths.paths.values_mut() {
            for operation in operations(item) {
                for (status, response) in operation.responses.responses.iter_mut() {
                    if let RefOr::T(response) = response
                        && response.description.trim().is_empty()
                    {
                        response.description = default_description(status).to_owned();
                    }
                }
            }
        }
    }
}

fn default_description(status: &str) -> &'static str {
    match status {
        "200" => "OK",
        "201" => "Created",
        "202" => "Accepted: the work goes on in the background (see the job)",
        "204" => "No Content: done",
        "400" => "invalid_request (a malformed body or an id in the path that is not a UUID)",
        "401" => "unauthorized (the bearer token is missing or not accepted)",
        "404" => "not found",
        "409" => "conflict with the current state",
        "413" => "payload_too_large",
        "503" => "store_unavailable or vector_store_unavailable (worth a retry)",
        _ => "see the error body's `code`",
    }
}

/// Documents the error codes from their one table ([`error::ErrorCode`]): the document's
/// description gets the table (code, status, `Retry-After`, meaning), and each error response
/// the meaning of every code its description names.
struct ErrorCodes;

impl Modify for ErrorCodes {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use std::fmt::Write as _;
        use utoipa::openapi::RefOr;

        use error::{ErrorCode, RetryAfter};
        use utoipa::openapi::schema::{ObjectBuilder, Type};
        let mut table =
            String::from("\n\n## Error codes\n\n| code | status | Retry-After | meaning |\n|---|---|---|---|\n");
        for code in ErrorCode::ALL {
            let retry = match code.retry_after() {
                RetryAfter::No => "no".to_owned(),
                RetryAfter::Given => "yes".to_owned(),
                RetryAfter::Seconds(secs) => format!("{secs} s"),
            };
            let _ = writeln!(
                table,
                "| `{}` | {} | {retry} | {} |",
                code.as_str(),
                code.status().as_u16(),
                code.description()
            );
        }
        let description = openapi.info.description.get_or_insert_with(String::new);
        description.push_str(table.trim_end());
        // The code is an enum of the table's codes (generated clients get a type for it), one
        // schema that `ErrorDetail.code` refers to.
        let components = openapi.components.get_or_insert_with(Default::default);
        let codes = utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::Type::String)
            .description(Some(
                "Stable machine-readable error code (the table in the API's description).",
            ))
            .enum_values(Some(ErrorCode::ALL.iter().map(|code| code.as_str())))
            .build();
        components
            .schemas
            .insert("ErrorCode".to_owned(), RefOr::T(codes.into()));
        if let Some(RefOr::T(utoipa::openapi::Schema::Object(detail))) = components.schemas.get_mut("ErrorDetail") {
            detail.properties.insert(
                "code".to_owned(),
                RefOr::Ref(utoipa::openapi::Ref::from_schema_name("ErrorCode")),
            );
        }
        let header = |description: &str, schema: Type| {
            RefOr::T(
                utoipa::openapi::header::HeaderBuilder::new()
                    .schema(Some(ObjectBuilder::new().schema_type(schema)))
                    .description(Some(description))
                    .build(),
            )
        };
        for item in openapi.paths.paths.values_mut() {
            for operation in operations(item) {
                for (status, response) in operation.responses.responses.iter_mut() {
                    let RefOr::T(response) = response else { continue };
                    // Every answer carries the request's id (the client's `X-Request-Id`, or
                    // one quarry made), as its log lines do.
                    response.headers.insert(
                        "X-Request-Id".to_owned(),
                        header(
                            "The request's id: the one sent in `X-Request-Id`, or a UUID quarry made; its log lines carry it.",
                            Type::String,
                        ),
                    );
                    if !status.starts_with(['4', '5']) {
                        continue;
                    }
                    let named: Vec<ErrorCode> = ErrorCode::ALL
                        .iter()
                        .copied()
                        .filter(|code| names(&response.description, code.as_str()))
                        .collect();
                    if named.is_empty() {
                        continue;
                    }
                    if named.iter().any(|code| code.retry_after() != RetryAfter::No) {
                        response.headers.insert(
                            "Retry-After".to_owned(),
                            header(
                                "Seconds to wait before trying again (with the codes whose row in the table says so).",
                                Type::Integer,
                            ),
                        );
                    }
                    response.description.push('\n');
                    for code in named {
                        let _ = write!(response.description, "\n- `{}`: {}", code.as_str(), code.description());
                    }
                }
            }
        }
    }
}

/// One link: from (operation, status), its name, to (operation), parameters.
type Link = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    &'static [(&'static str, &'static str)],
);

/// OpenAPI `links`: which operation a response's ids lead to, so that clients (and the
/// stateful phase of `scripts/fuzz-api`) can chain create world → add source → its job →
/// retrieve → delete without guessing. Each entry: the operation and status answering, the
/// link's name, the operation it leads to and its parameters (runtime expressions on the
/// response body).
const LINKS: &[Link] = {
    const WORLD: &[(&str, &str)] = &[("world_id", "$response.body#/id")];
    const SOURCE: &[(&str, &str)] = &[
        ("world_id", "$response.body#/source/world_id"),
        ("source_id", "$response.body#/source/id"),
    ];
    const SOURCE_WORLD: &[(&str, &str)] = &[("world_id", "$response.body#/source/world_id")];
    const SOURCE_JOB: &[(&str, &str)] = &[("job_id", "$response.body#/job/id")];
    const JOB: &[(&str, &str)] = &[("job_id", "$response.body#/id")];
    const JOB_WORLD: &[(&str, &str)] = &[("world_id", "$response.body#/world_id")];
    const KEY: &[(&str, &str)] = &[("key_id", "$response.body#/key_id")];
    &[
        ("create_world", "201", "GetWorld", "get_world", WORLD),
        ("create_world", "201", "UpdateWorld", "update_world", WORLD),
        ("create_world", "201", "AddSource", "add_source", WORLD),
        ("create_world", "201", "ListSources", "list_sources", WORLD),
        ("create_world", "201", "ListJobs", "list_jobs", WORLD),
        ("create_world", "201", "Retrieve", "retrieve", WORLD),
        ("create_world", "201", "Reingest", "reingest_world", WORLD),
        ("create_world", "201", "Repair", "repair_world", WORLD),
        ("create_world", "201", "RetryFailed", "retry_failed", WORLD),
        ("create_world", "201", "DeleteWorld", "delete_world", WORLD),
        ("add_source", "202", "GetSource", "get_source", SOURCE),
        ("add_source", "202", "SourceText", "source_text", SOURCE),
        ("add_source", "202", "ListChunks", "list_chunks", SOURCE),
        ("add_source", "202", "DeleteSource", "delete_source", SOURCE),
        ("add_source", "202", "GetJob", "get_job", SOURCE_JOB),
        ("add_source", "202", "JobEvents", "job_events", SOURCE_JOB),
        ("add_source", "202", "PauseJob", "pause_job", SOURCE_JOB),
        ("add_source", "202", "CancelJob", "cancel_job", SOURCE_JOB),
        ("add_source", "202", "RetryJob", "retry_job", SOURCE_JOB),
        ("add_source", "202", "Retrieve", "retrieve", SOURCE_WORLD),
        ("add_source", "202", "DeleteWorld", "delete_world", SOURCE_WORLD),
        ("get_job", "200", "ListJobs", "list_jobs", JOB_WORLD),
        ("get_job", "200", "ResumeJob", "resume_job", JOB),
        ("pause_job", "200", "ResumeJob", "resume_job", JOB),
        ("reingest_world", "202", "GetJob", "get_job", JOB),
        ("reingest_world", "202", "CancelJob", "cancel_job", JOB),
        ("reingest_world", "202", "Retrieve", "retrieve", JOB_WORLD),
        ("repair_world", "202", "GetJob", "get_job", JOB),
        ("create_key", "201", "UpdateKey", "update_key", KEY),
        ("create_key", "201", "DeleteKey", "delete_key", KEY),
    ]
};

struct Links;

impl Modify for Links {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::RefOr;
        use utoipa::openapi::link::LinkBuilder;
        for item in openapi.paths.paths.values_mut() {
            for operation in operations(item) {
                let Some(id) = operation.operation_id.clone() else {
                    continue;
                };
                for (from, status, name, to, parameters) in LINKS {
                    if *from != id {
                        continue;
                    }
                    let Some(RefOr::T(response)) = operation.responses.responses.get_mut(*status) else {
                        continue;
                    };
                    let link = parameters
                        .iter()
                        .fold(LinkBuilder::new().operation_id(*to), |link, (param, expr)| {
                            link.parameter(*param, *expr)
                        })
                        .build();
                    response.links.insert((*name).to_owned(), RefOr::T(link));
                }
            }
        }
    }
}

/// Rules the derived schemas cannot state: a source's and a webhook's `url` pattern and a
/// webhook's `secret` pattern (constants the server matches too), that a world update sets at
/// least one field (`{}`, or only `null`s, is `invalid_request`: there is nothing to update),
/// and that an evaluation item's `expected` names at least one thing.
struct Rules;

impl Modify for Rules {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::RefOr;
        use utoipa::openapi::schema::{AllOfBuilder, AnyOfBuilder, ObjectBuilder, Schema, Type};
        let Some(components) = openapi.components.as_mut() else {
            return;
        };
        for name in ["AddSourceRequest", "AddSourceUpload"] {
            if let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut(name)
                && let Some(RefOr::T(Schema::Object(url))) = object.properties.get_mut("url")
            {
                url.pattern = Some(crate::domain::SourceUrl::PATTERN.to_owned());
            }
        }
        if let Some(RefOr::T(Schema::Object(object))) = components.schemas.get_mut("CreateWebhookRequest") {
            if let Some(RefOr::T(Schema::Object(url))) = object.properties.get_mut("url") {
                url.pattern = Some(crate::domain::SourceUrl::PATTERN.to_owned());
            }
            if let Some(RefOr::T(Schema::Object(secret))) = object.properties.get_mut("secret") {
                secret.pattern = Some(crate::service::webhooks::SECRET_PATTERN.to_owned());
            }
        }
        for item in openapi.paths.paths.values_mut() {
            for operation in operations(item) {
                for parameter in operation.parameters.iter_mut().flatten() {
                    if let RefOr::T(parameter) = parameter {
                        parameter_rules(parameter);
                    }
                }
            }
        }
        let Some(components) = openapi.components.as_mut() else {
            return;
        };
        let set = |field: &str, kind: Type| {
            ObjectBuilder::new()
                .required(field)
                .property(field, ObjectBuilder::new().schema_type(kind))
                .build()
        };
        if let Some(update) = components.schemas.remove("UpdateWorldRequest") {
            let one_field = AnyOfBuilder::new()
                .item(set("name", Type::String))
                .item(set("embedding", Type::Object))
                .item(set("chunking", Type::Object))
                .item(set("hybrid", Type::Boolean))
                .build();
            let schema = AllOfBuilder::new().item(update).item(Schema::AnyOf(one_field)).build();
            components
                .schemas
                .insert("UpdateWorldRequest".to_owned(), RefOr::T(Schema::AllOf(schema)));
        }
        // An evaluation item names something a good answer holds: one field, not `null`.
        if let Some(expected) = components.schemas.remove("Expected") {
            let one_field = AnyOfBuilder::new()
                .item(set("sources", Type::Array))
                .item(set("source_keys", Type::Array))
                .item(set("chunks", Type::Array))
                .item(set("answer", Type::String))
                .build();
            let schema = AllOfBuilder::new()
                .item(expected)
                .item(Schema::AnyOf(one_field))
                .build();
            components
                .schemas
                .insert("Expected".to_owned(), RefOr::T(Schema::AllOf(schema)));
        }
    }
}

/// A source key in the query, and the version preconditions, as the server parses them (the
/// derived schemas say only "a string, or null", and a header is never null).
fn parameter_rules(parameter: &mut utoipa::openapi::path::Parameter) {
    use utoipa::openapi::path::ParameterIn;
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    use utoipa::openapi::{RefOr, Required};
    // Lengths only where the pattern leaves them open: schemathesis' coverage phase makes its
    // boundary strings from `minLength` and `maxLength` alone, which a pattern then refuses.
    let text = |pattern: &str, lengths: Option<(usize, usize)>| {
        let mut schema = ObjectBuilder::new()
            .schema_type(Type::String)
            .pattern(Some(pattern))
            .build();
        if let Some((min, max)) = lengths {
            schema.min_length = Some(min);
            schema.max_length = Some(max);
        }
        RefOr::T(schema.into())
    };
    let schema = match (&parameter.parameter_in, parameter.name.as_str()) {
        (ParameterIn::Query, "key") => text(
            crate::domain::SourceKey::PATTERN,
            Some((1, crate::domain::SourceKey::MAX_CHARS)),
        ),
        (ParameterIn::Header, "If-Match") => text(r#"^[ \t]{0,4}(\*|[0-9]{1,9}|"[0-9]{1,9}")[ \t]{0,4}$"#, None),
        (ParameterIn::Header, "If-None-Match") => RefOr::T(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .enum_values(Some(["*"]))
                .build()
                .into(),
        ),
        (ParameterIn::Header, "Idempotency-Key") => text(r"^[!-~]{1,255}$", None),
        _ => return,
    };
    if parameter.parameter_in == ParameterIn::Header {
        parameter.required = Required::False;
    }
    parameter.schema = Some(schema);
}

/// Whether `text` names `code` as a word of its own (`not_found` is not named by
/// `world_not_found`).
fn names(text: &str, code: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    text.match_indices(code).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + code.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

/// The document as served and committed (pretty JSON with a trailing newline).
pub fn document() -> String {
    let mut json = ApiDoc::openapi()
        .to_pretty_json()
        .unwrap_or_else(|err| format!("{{\"error\": \"{err}\"}}"));
    json.push('\n');
    json
}

/// Declares `$name`, the schema of a string whose values are the names `$values` lists (an
/// enumeration the domain owns, which the handlers parse into): the document and the parser
/// read one list.
macro_rules! names_schema {
    ($(#[$doc:meta])* $name:ident, $description:literal, $values:expr) => {
        $(#[$doc])*
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                $crate::api::openapi::string_names($description, $values)
            }
        }

        impl utoipa::ToSchema for $name {}
    };
}
pub(crate) use names_schema;

/// A string schema with `description` whose values are `names`.
pub fn string_names<'a>(
    description: &str,
    names: impl IntoIterator<Item = &'a str>,
) -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
    use utoipa::openapi::schema::{ObjectBuilder, Type};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .description(Some(description))
        .enum_values(Some(names))
        .build()
        .into()
}

/// The JSON Schema of `T` as the document has it, every `$ref` to a component replaced by the
/// component itself: a schema that stands alone, for MCP's tool arguments.
pub fn inline_schema<T: utoipa::ToSchema>() -> serde_json::Value {
    let document = serde_json::to_value(ApiDoc::openapi()).unwrap_or_default();
    let components = document["components"]["schemas"].clone();
    let own = serde_json::to_value(T::schema()).unwrap_or_default();
    inline(own, &components, 0)
}

/// `value` with each `{"$ref": "#/components/schemas/X"}` replaced by `components[X]`, inlined
/// in turn (to a depth that no schema of quarry's reaches; deeper refs are left as they are).
fn inline(value: serde_json::Value, components: &serde_json::Value, depth: usize) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::Object(map) => {
            if depth < 16
                && let Some(name) = map
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(|r| r.strip_prefix("#/components/schemas/"))
                && let Some(target) = components.get(name)
            {
                let mut target = inline(target.clone(), components, depth + 1);
                // Keywords beside the `$ref` (a description, say) stay with it.
                if let Value::Object(target) = &mut target {
                    for (key, value) in map.into_iter().filter(|(k, _)| k != "$ref") {
                        target.insert(key, inline(value, components, depth + 1));
                    }
                }
                return target;
            }
            Value::Object(
                map.into_iter()
                    .map(|(k, v)| (k, inline(v, components, depth)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.into_iter().map(|v| inline(v, components, depth)).collect()),
        other => other,
    }
}

/// `/openapi.json` and `/docs`.
pub fn router() -> Router {
    Router::from(SwaggerUi::new("/docs").url("/openapi.json", ApiDoc::openapi()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_error_code_is_documented() {
        let document = document();
        for code in error::ErrorCode::ALL {
            assert!(
                document.contains(&format!("`{}`", code.as_str())),
                "{code:?} undocumented"
            );
        }
        assert!(names("world_not_found or not_found", "not_found"));
    }

    #[test]
    fn every_link_is_in_the_document_and_leads_to_an_operation_with_its_parameters() {
        let document: serde_json::Value = serde_json::from_str(&document()).unwrap();
        let operations: Vec<&serde_json::Value> = document["paths"]
            .as_object()
            .unwrap()
            .values()
            .flat_map(|item| item.as_object().unwrap().values())
            .collect();
        let by_id = |id: &str| {
            operations
                .iter()
                .find(|op| op["operationId"] == id)
                .unwrap_or_else(|| panic!("no operation {id}"))
        };
        for (from, status, name, to, parameters) in LINKS {
            let link = &by_id(from)["responses"][*status]["links"][*name];
            assert_eq!(link["operationId"], *to, "{from} {status} {name}");
            let target = by_id(to);
            for (param, _) in *parameters {
                let declared = target["parameters"]
                    .as_array()
                    .is_some_and(|ps| ps.iter().any(|p| p["name"] == *param));
                assert!(declared, "{to} has no parameter {param}");
            }
        }
        assert!(!names("world_not_found", "not_found"));
    }
}
