//! `/v1/worlds/{world_id}/evals/{eval_id}/runs`: evaluation runs — a test set scored against the
//! world under a few retrieval settings and budgets, in the background, watched as events and
//! compared run against run.

use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use uuid::Uuid;

use super::error::{ApiError, ErrorBody};
use super::extract::{ApiJson, ApiPath, ApiQuery};
use crate::api::AppState;
use crate::api::retrieve::request::{RetrieveExpand, RetrieveFilter, RetrieveFusion, RetrieveMode, RetrieveRerank};
use crate::domain::{EvalRun, EvalRunId, EvalRunStatus, EvalSetId, MeasuredIndex, WorldId};
use crate::service::evals::report::{Comparison, ItemChange, Outcome, RunReport, report};
use crate::service::evals::runs::{NewRun, RunEvent};
use crate::store::EvalRunProgress;

pub fn router() -> Router<AppState> {
    Router::new()
        .route(
            "/v1/worlds/{world_id}/evals/{eval_id}/runs",
            get(list_runs).post(start_run),
        )
        .route(
            "/v1/worlds/{world_id}/evals/{eval_id}/runs/{run_id}",
            get(get_run).delete(delete_run),
        )
        .route(
            "/v1/worlds/{world_id}/evals/{eval_id}/runs/{run_id}/cancel",
            post(cancel_run),
        )
        .route(
            "/v1/worlds/{world_id}/evals/{eval_id}/runs/{run_id}/events",
            get(run_events),
        )
        .route(
            "/v1/worlds/{world_id}/evals/{eval_id}/runs/{a}/compare/{b}",
            get(compare_runs),
        )
}

/// What a run measures: retrieval settings and context budgets. Every setting runs at every
/// budget, for every item of the test set.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EvalRunRequest {
    /// 1 to 8 settings, each a `/retrieve` body without `query` (the items are the queries)
    /// and without `max_context_tokens` (`budgets` sets it): `mode`, `fusion`, `top_k`,
    /// `expand`, `neighbors`, `min_score`, `rerank`, `hnsw_ef`, `filter`. Absent: one setting,
    /// the defaults.
    #[serde(default)]
    #[schema(value_type = Option<Vec<EvalRunSetting>>, min_items = 1, max_items = 8)]
    pub settings: Option<Vec<Value>>,
    /// 1 to 4 context budgets in tokens. Absent: the server's default
    /// (`retrieval.max_context_tokens`).
    #[serde(default)]
    #[schema(min_items = 1, max_items = 4)]
    pub budgets: Option<Vec<BudgetTokens>>,
}

/// One setting of a run: a `/retrieve` body without `query` and `max_context_tokens`, each
/// field as `/retrieve` documents it (its refusals name `settings[i].<field>`). For the
/// document only: the server reads it with `/retrieve`'s own parser.
#[derive(Debug, Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EvalRunSetting {
    #[schema(example = 8, minimum = 0, maximum = 1000)]
    pub top_k: Option<u64>,
    #[schema(minimum = 0.0, maximum = 1.0)]
    pub min_score: Option<f64>,
    pub mode: Option<RetrieveMode>,
    pub fusion: Option<RetrieveFusion>,
    #[schema(minimum = 0, maximum = 3)]
    pub neighbors: Option<u32>,
    pub expand: Option<RetrieveExpand>,
    pub rerank: Option<RetrieveRerank>,
    pub explain: Option<bool>,
    #[schema(minimum = 16, maximum = 1024)]
    pub hnsw_ef: Option<u32>,
    pub filter: Option<RetrieveFilter>,
}

/// A context budget, in tokens.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(transparent)]
#[schema(example = 1024, minimum = 1, maximum = 1048576)]
pub struct BudgetTokens(#[serde(deserialize_with = "super::de::required_integer")] pub i64);

/// Where a run is in its life; `completed`, `failed` and `cancelled` are final. `waiting`: a
/// gated re-ingest's run, queued once the new index is embedded.
#[derive(Clone, Copy, Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = EvalRunStatus)]
pub enum EvalRunStatusDto {
    Waiting,
    Queued,
    Running,
    Completed,
    Failed,
    Cancelled,
}

impl From<EvalRunStatus> for EvalRunStatusDto {
    fn from(status: EvalRunStatus) -> Self {
        match status {
            EvalRunStatus::Waiting => Self::Waiting,
            EvalRunStatus::Queued => Self::Queued,
            EvalRunStatus::Running => Self::Running,
            EvalRunStatus::Completed => Self::Completed,
            EvalRunStatus::Failed => Self::Failed,
            EvalRunStatus::Cancelled => Self::Cancelled,
        }
    }
}

/// Items scored of all.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = EvalRunProgress)]
pub struct ProgressDto {
    pub done: u32,
    pub total: u32,
}

impl From<EvalRunProgress> for ProgressDto {
    fn from(p: EvalRunProgress) -> Self {
        Self {
            done: p.done,
            total: p.total,
        }
    }
}

/// The index a run measured: the world's run and the profiles it was built with.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = MeasuredIndex)]
pub struct MeasuredDto {
    /// The world's run measured: its `active_run` when the run started, or for a gated
    /// re-ingest's run, the run served or the one being built.
    pub run_id: Uuid,
    pub provider: String,
    pub model: String,
    pub dimensions: u32,
    pub max_tokens: u32,
    pub overlap_tokens: u32,
    pub parent_max_tokens: u32,
    pub context_prefix: bool,
    pub hybrid: bool,
}

impl From<MeasuredIndex> for MeasuredDto {
    fn from(m: MeasuredIndex) -> Self {
        Self {
            run_id: m.run_id.0,
            provider: m.provider,
            model: m.model,
            dimensions: m.dimensions,
            max_tokens: m.max_tokens,
            overlap_tokens: m.overlap_tokens,
            parent_max_tokens: m.parent_max_tokens,
            context_prefix: m.context_prefix,
            hybrid: m.hybrid,
        }
    }
}

/// The answer figures at one budget.
#[derive(Debug, Serialize, ToSchema)]
pub struct BudgetScores {
    pub budget: u32,
    /// Items with an answer text.
    pub answer_items: usize,
    /// The mean share of the answers' word 4-grams found in `context.text`.
    pub answer_share: Option<f64>,
    /// The share of answers at least 80 % in the context.
    pub fully: Option<f64>,
}

/// One setting's figures; `null` where no item could be judged.
#[derive(Debug, Serialize, ToSchema)]
pub struct SettingScores {
    /// The setting's place in `settings`.
    pub setting: usize,
    /// Items that name sources or chunks.
    pub hit_items: usize,
    pub hit_at_1: Option<f64>,
    pub hit_at_5: Option<f64>,
    pub mrr_at_10: Option<f64>,
    /// Percentiles of the retrievals' time in the service.
    pub latency_p50_ms: Option<f64>,
    pub latency_p95_ms: Option<f64>,
    pub budgets: Vec<BudgetScores>,
}

/// One item's outcome under every setting.
#[derive(Debug, Serialize, ToSchema)]
pub struct ItemScores {
    /// The item's place in the test set.
    pub index: usize,
    pub query: String,
    /// Whether the item names sources or chunks (`first_hit` is judged).
    pub hit_judged: bool,
    /// Whether the item has an answer text (`answer_share` is judged).
    pub answer_judged: bool,
    /// Per setting: the rank (from 1) of the first expected result; `null` when none came.
    pub first_hit: Vec<Option<u32>>,
    /// Per setting, per budget: the answer's share in the context.
    pub answer_share: Vec<Vec<Option<f64>>>,
    /// Per setting, per budget: the retrieval's time in the service.
    pub latency_ms: Vec<Vec<f64>>,
    /// The settings that found it: a hit within rank 5, or the answer fully (80 %) in the
    /// context at some budget.
    pub found_by: Vec<usize>,
}

/// What the items scored so far add up to.
#[derive(Debug, Serialize, ToSchema)]
pub struct EvalRunReport {
    pub scored: usize,
    pub settings: Vec<SettingScores>,
    pub items: Vec<ItemScores>,
}

impl From<RunReport> for EvalRunReport {
    fn from(r: RunReport) -> Self {
        Self {
            scored: r.scored,
            settings: (r.settings.into_iter().enumerate())
                .map(|(setting, s)| SettingScores {
                    setting,
                    hit_items: s.hits.hit_items,
                    hit_at_1: s.hits.hit_at_1,
                    hit_at_5: s.hits.hit_at_5,
                    mrr_at_10: s.hits.mrr_at_10,
                    latency_p50_ms: s.latency_p50_ms,
                    latency_p95_ms: s.latency_p95_ms,
                    budgets: (s.budgets.into_iter())
                        .map(|(budget, b)| BudgetScores {
                            budget,
                            answer_items: b.answer_items,
                            answer_share: b.answer_share,
                            fully: b.fully,
                        })
                        .collect(),
                })
                .collect(),
            items: (r.items.into_iter())
                .map(|i| ItemScores {
                    index: i.index,
                    query: i.query,
                    hit_judged: i.record.hit_judged,
                    answer_judged: i.record.answer_judged,
                    first_hit: i.record.first_hit,
                    answer_share: i.record.answer_share,
                    latency_ms: i.record.ms,
                    found_by: i.found_by,
                })
                .collect(),
        }
    }
}

/// An evaluation run.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = EvalRun)]
pub struct EvalRunDto {
    pub run_id: Uuid,
    pub eval_id: Uuid,
    pub world_id: Uuid,
    /// The test set's name when the run was asked for.
    pub eval_name: String,
    pub status: EvalRunStatusDto,
    /// As sent.
    #[schema(value_type = Vec<Object>)]
    pub settings: Vec<Value>,
    pub budgets: Vec<u32>,
    pub progress: ProgressDto,
    /// The index measured; `null` until the first items are scored.
    pub measured: Option<MeasuredDto>,
    /// Times the run was taken up: more than 1 when it was resumed after a restart.
    pub attempts: u32,
    /// Why a failed run failed.
    pub error: Option<String>,
    /// For a gated re-ingest's run: the re-ingest job it decides; `null` otherwise.
    pub reingest_job_id: Option<Uuid>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// The scores so far; only in a single run's answer, not in listings.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub report: Option<EvalRunReport>,
}

impl EvalRunDto {
    fn of(run: EvalRun, progress: EvalRunProgress, with_report: bool) -> Self {
        let report = with_report.then(|| report(&run).into());
        Self {
            run_id: run.id.0,
            eval_id: run.eval_id.0,
            world_id: run.world_id.0,
            eval_name: run.eval_name,
            status: run.status.into(),
            settings: run.settings,
            budgets: run.budgets,
            progress: progress.into(),
            measured: run.measured.map(Into::into),
            attempts: run.attempts,
            error: run.error,
            reingest_job_id: run.gate_job.map(|j| j.0),
            created_at: run.created_at,
            started_at: run.started_at,
            finished_at: run.finished_at,
            report,
        }
    }

    fn whole(run: EvalRun) -> Self {
        let progress = EvalRunProgress {
            done: u32::try_from(run.scores.len()).unwrap_or(u32::MAX),
            total: u32::try_from(run.items.len()).unwrap_or(u32::MAX),
        };
        Self::of(run, progress, true)
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct EvalRunList {
    /// Oldest first, without their reports.
    pub runs: Vec<EvalRunDto>,
    /// The `offset` of the next page; `null` on the last one.
    pub next_offset: Option<u64>,
}

/// One setting's figures in run `b` less those in run `a`.
#[derive(Debug, Serialize, ToSchema)]
pub struct SettingDeltaDto {
    pub setting: usize,
    pub hit_at_1: Option<f64>,
    pub hit_at_5: Option<f64>,
    pub mrr_at_10: Option<f64>,
    pub latency_p50_ms: Option<f64>,
    /// The budgets both runs measured.
    pub budgets: Vec<BudgetDelta>,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct BudgetDelta {
    pub budget: u32,
    pub answer_share: Option<f64>,
    pub fully: Option<f64>,
}

/// An item's outcome under one setting in one run.
#[derive(Debug, Serialize, ToSchema)]
pub struct OutcomeDto {
    pub first_hit: Option<u32>,
    /// At the budgets both runs measured, in run `a`'s order.
    pub answer_share: Vec<Option<f64>>,
}

/// An item that did better or worse under one setting.
#[derive(Debug, Serialize, ToSchema)]
pub struct ItemChangeDto {
    pub query: String,
    pub setting: usize,
    pub before: OutcomeDto,
    pub after: OutcomeDto,
}

/// How run `b` differs from run `a`.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = EvalComparison)]
pub struct ComparisonDto {
    pub a: Uuid,
    pub b: Uuid,
    /// Per setting, by place (as many as the run with fewer has).
    pub settings: Vec<SettingDeltaDto>,
    /// Items in both runs, matched by query.
    pub items_compared: usize,
    /// Items with a better rank (within 10) or a larger answer share, and nothing worse.
    pub better: Vec<ItemChangeDto>,
    /// Items with a worse rank or a smaller answer share, and nothing better.
    pub worse: Vec<ItemChangeDto>,
    /// Items better on one figure and worse on another.
    pub mixed: usize,
}

impl From<Outcome> for OutcomeDto {
    fn from(o: Outcome) -> Self {
        Self {
            first_hit: o.first_hit,
            answer_share: o.answer_share,
        }
    }
}

impl From<ItemChange> for ItemChangeDto {
    fn from(c: ItemChange) -> Self {
        Self {
            query: c.query,
            setting: c.setting,
            before: c.before.into(),
            after: c.after.into(),
        }
    }
}

impl From<Comparison> for ComparisonDto {
    fn from(c: Comparison) -> Self {
        Self {
            a: c.a.0,
            b: c.b.0,
            settings: (c.settings.into_iter())
                .map(|s| SettingDeltaDto {
                    setting: s.setting,
                    hit_at_1: s.hit_at_1,
                    hit_at_5: s.hit_at_5,
                    mrr_at_10: s.mrr_at_10,
                    latency_p50_ms: s.latency_p50_ms,
                    budgets: (s.budgets.into_iter())
                        .map(|(budget, answer_share, fully)| BudgetDelta {
                            budget,
                            answer_share,
                            fully,
                        })
                        .collect(),
                })
                .collect(),
            items_compared: c.items_compared,
            better: c.better.into_iter().map(Into::into).collect(),
            worse: c.worse.into_iter().map(Into::into).collect(),
            mixed: c.mixed,
        }
    }
}

/// Start a run: every item of the test set is retrieved under every setting at every budget,
/// in the background (one retrieval at a time, its keys taken in turn with the world's
/// ingestion). Watch it with `…/events` or
/// read it; its report fills as items are scored.
#[utoipa::path(post, path = "/v1/worlds/{world_id}/evals/{eval_id}/runs", tag = "evaluation",
    params(("world_id" = Uuid, Path), ("eval_id" = Uuid, Path)), request_body = EvalRunRequest,
    responses((status = 202, body = EvalRunDto),
        (status = 400, description = "invalid_request (`details.field`: `budgets`, `settings`) or invalid_retrieval_settings (`details.field`: `settings[i].<field>`)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, description = "world_not_found or eval_not_found", body = ErrorBody),
        (status = 409, description = "eval_limit_reached (2 runs of the world under way, or 100 runs kept by the world)", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn start_run(
    State(state): State<AppState>,
    ApiPath((world, eval)): ApiPath<(WorldId, EvalSetId)>,
    ApiJson(request): ApiJson<EvalRunRequest>,
) -> Result<(StatusCode, axum::Json<EvalRunDto>), ApiError> {
    let new = NewRun {
        settings: request.settings,
        // Out of range (the document forbids it): the service names `budgets`.
        budgets: (request.budgets).map(|b| b.into_iter().map(|t| u32::try_from(t.0).unwrap_or(0)).collect()),
    };
    let run = state.evals.start_run(world, eval, new).await?;
    Ok((StatusCode::ACCEPTED, axum::Json(EvalRunDto::whole(run))))
}

/// A test set's runs, oldest first, without their reports.
#[utoipa::path(get, path = "/v1/worlds/{world_id}/evals/{eval_id}/runs", tag = "evaluation",
    params(("world_id" = Uuid, Path), ("eval_id" = Uuid, Path),
        ("offset" = Option<u64>, Query, description = "runs to skip (default 0)", minimum = 0, maximum = 9223372036854775807_i64),
        ("limit" = Option<u32>, Query, description = "runs to return, 1 to 1000 (default 100)", minimum = 1, maximum = 1000)),
    responses((status = 200, body = EvalRunList),
        (status = 400, description = "invalid_request (`details.field`: `offset`, `limit` or an unknown parameter)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, description = "world_not_found or eval_not_found", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list_runs(
    State(state): State<AppState>,
    ApiPath((world, eval)): ApiPath<(WorldId, EvalSetId)>,
    ApiQuery(query): ApiQuery<Vec<(String, String)>>,
) -> Result<axum::Json<EvalRunList>, ApiError> {
    let paging = super::extract::list_query(&query, &[])?;
    let runs = state
        .evals
        .list_runs(world, eval, super::extract::window(paging))
        .await?;
    let (runs, next_offset) = super::extract::page(runs, paging);
    Ok(axum::Json(EvalRunList {
        runs: (runs.into_iter())
            .map(|(run, progress)| EvalRunDto::of(run, progress, false))
            .collect(),
        next_offset,
    }))
}

/// A run with its report: the figures per setting and budget, and every item's outcome.
#[utoipa::path(get, path = "/v1/worlds/{world_id}/evals/{eval_id}/runs/{run_id}", tag = "evaluation",
    params(("world_id" = Uuid, Path), ("eval_id" = Uuid, Path), ("run_id" = Uuid, Path)),
    responses((status = 200, body = EvalRunDto), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found, eval_not_found or eval_run_not_found", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn get_run(
    State(state): State<AppState>,
    ApiPath((world, eval, id)): ApiPath<(WorldId, EvalSetId, EvalRunId)>,
) -> Result<axum::Json<EvalRunDto>, ApiError> {
    Ok(axum::Json(EvalRunDto::whole(
        state.evals.get_run(world, eval, id).await?,
    )))
}

/// Cancel a queued or running run; the items scored so far stay in its report.
#[utoipa::path(post, path = "/v1/worlds/{world_id}/evals/{eval_id}/runs/{run_id}/cancel", tag = "evaluation",
    params(("world_id" = Uuid, Path), ("eval_id" = Uuid, Path), ("run_id" = Uuid, Path)),
    responses((status = 200, body = EvalRunDto), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found, eval_not_found or eval_run_not_found", body = ErrorBody),
        (status = 409, description = "eval_run_state (the run has ended)", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn cancel_run(
    State(state): State<AppState>,
    ApiPath((world, eval, id)): ApiPath<(WorldId, EvalSetId, EvalRunId)>,
) -> Result<axum::Json<EvalRunDto>, ApiError> {
    Ok(axum::Json(EvalRunDto::whole(
        state.evals.cancel_run(world, eval, id).await?,
    )))
}

/// Delete an ended run.
#[utoipa::path(delete, path = "/v1/worlds/{world_id}/evals/{eval_id}/runs/{run_id}", tag = "evaluation",
    params(("world_id" = Uuid, Path), ("eval_id" = Uuid, Path), ("run_id" = Uuid, Path)),
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found, eval_not_found or eval_run_not_found", body = ErrorBody),
        (status = 409, description = "eval_run_state (the run is under way: cancel it first)", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn delete_run(
    State(state): State<AppState>,
    ApiPath((world, eval, id)): ApiPath<(WorldId, EvalSetId, EvalRunId)>,
) -> Result<StatusCode, ApiError> {
    state.evals.delete_run(world, eval, id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// How completed run `b` differs from completed run `a`: each setting's figures (`b − a`) and
/// the items that got better or worse.
#[utoipa::path(get, path = "/v1/worlds/{world_id}/evals/{eval_id}/runs/{a}/compare/{b}", tag = "evaluation",
    params(("world_id" = Uuid, Path), ("eval_id" = Uuid, Path), ("a" = Uuid, Path, description = "the run before"),
        ("b" = Uuid, Path, description = "the run after")),
    responses((status = 200, body = ComparisonDto), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found, eval_not_found or eval_run_not_found", body = ErrorBody),
        (status = 409, description = "eval_run_state (a run is not completed)", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn compare_runs(
    State(state): State<AppState>,
    ApiPath((world, eval, a, b)): ApiPath<(WorldId, EvalSetId, EvalRunId, EvalRunId)>,
) -> Result<axum::Json<ComparisonDto>, ApiError> {
    Ok(axum::Json(state.evals.compare_runs(world, eval, a, b).await?.into()))
}

/// Server-sent events of a run: `progress` (`{"done": n, "total": n}`) as items are scored and
/// `status` (`{"status": "running"}`) as it changes, the current ones first (ids count this
/// stream's events; a stream opened again starts from the state then); it ends after a final
/// status.
#[utoipa::path(get, path = "/v1/worlds/{world_id}/evals/{eval_id}/runs/{run_id}/events", tag = "evaluation",
    params(("world_id" = Uuid, Path), ("eval_id" = Uuid, Path), ("run_id" = Uuid, Path)),
    responses((status = 200, description = "text/event-stream of run events", content_type = "text/event-stream"),
        (status = 400, body = ErrorBody), (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found, eval_not_found or eval_run_not_found", body = ErrorBody),
        (status = 503, description = "server_busy (too many event streams open; see `Retry-After`)", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn run_events(
    State(state): State<AppState>,
    ApiPath((world, eval, id)): ApiPath<(WorldId, EvalSetId, EvalRunId)>,
    extensions: axum::http::Extensions,
) -> Result<impl axum::response::IntoResponse, ApiError> {
    use axum::response::sse::{Event, KeepAlive, Sse};
    use futures_util::StreamExt as _;
    let events = (state.evals)
        .run_events(world, eval, id, state.shutdown.clone())
        .await?;
    let slot = super::jobs::stream_slot(&state, &extensions)?;
    // Ids count the events of this stream (a client that reconnects gets the state anew).
    let mut n = 0u64;
    let stream = events.map(move |event| {
        let _held = &slot;
        n += 1;
        let (kind, data) = match event {
            RunEvent::Status(status) => ("status", serde_json::json!({ "status": status.as_str() })),
            RunEvent::Progress(p) => ("progress", serde_json::json!({ "done": p.done, "total": p.total })),
        };
        Ok::<_, std::convert::Infallible>(Event::default().id(n.to_string()).event(kind).data(data.to_string()))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(state.sse_keep_alive)))
}
