//! `/v1/jobs/{job_id}` and `/v1/worlds/{world_id}/jobs`: read jobs, pause, resume, cancel, retry
//! failed chunks (of a job, or of a whole world).

use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use uuid::Uuid;

use super::error::{ApiError, ErrorBody, ErrorCode};
use super::extract::{ApiPath, ApiQuery};
use crate::api::AppState;
use crate::domain::{GateMetric, GateState, Job, JobId, JobKind, JobStatus, ReingestGate, WaitReason, WorldId};

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/v1/jobs/{job_id}", get(get_job))
        .route("/v1/jobs/{job_id}/pause", post(pause_job))
        .route("/v1/jobs/{job_id}/resume", post(resume_job))
        .route("/v1/jobs/{job_id}/cancel", post(cancel_job))
        .route("/v1/jobs/{job_id}/retry", post(retry_job))
        .route("/v1/worlds/{world_id}/retry-failed", post(retry_failed))
        .route("/v1/jobs/{job_id}/events", get(job_events))
        .route("/v1/worlds/{world_id}/jobs", get(list_jobs))
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = JobCounts)]
pub struct JobCountsDto {
    pub total: u64,
    pub embedded: u64,
    pub pending: u64,
    pub failed: u64,
    /// Failed attempts that were retried.
    pub retries: u64,
    /// Times entries were given back because a key was rate limited (no attempt spent).
    pub rate_limited: u64,
    /// Entries embedded by reusing an existing vector of identical text.
    pub reused: u64,
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = JobError)]
pub struct JobErrorDto {
    pub chunk_number: u32,
    pub book_number: u32,
    pub code: String,
    pub message: String,
}

/// What a job does: `ingest` (new sources), `reingest` (the world under a new profile),
/// `repair`, or `replace` (a new version of one source: `source_id`).
#[derive(Clone, Copy, Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = JobKind)]
pub enum JobKindDto {
    Ingest,
    Reingest,
    Repair,
    Replace,
}

impl From<JobKind> for JobKindDto {
    fn from(kind: JobKind) -> Self {
        match kind {
            JobKind::Ingest => Self::Ingest,
            JobKind::Reingest => Self::Reingest,
            JobKind::Repair => Self::Repair,
            JobKind::Replace => Self::Replace,
        }
    }
}

/// Where a job is in its life; `cancelled`, `completed` and `failed` are final. `held`: a
/// gated re-ingest whose new run scored worse than the run served (or whose evaluation could
/// not finish); the world keeps its run until the re-ingest is promoted or discarded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = JobStatus)]
pub enum JobStatusDto {
    Queued,
    Running,
    Paused,
    Held,
    Cancelled,
    Completed,
    Failed,
}

impl JobStatusDto {
    /// How the API shows `job`'s status: a held re-ingest is `held`.
    fn of(job: &Job) -> Self {
        if job.is_held() { Self::Held } else { job.status.into() }
    }
}

impl From<JobStatus> for JobStatusDto {
    fn from(status: JobStatus) -> Self {
        match status {
            JobStatus::Queued => Self::Queued,
            JobStatus::Running => Self::Running,
            JobStatus::Paused => Self::Paused,
            JobStatus::Cancelled => Self::Cancelled,
            JobStatus::Completed => Self::Completed,
            JobStatus::Failed => Self::Failed,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Job)]
pub struct JobDto {
    pub id: Uuid,
    pub world_id: Uuid,
    pub kind: JobKindDto,
    pub status: JobStatusDto,
    pub run_id: Uuid,
    pub counts: JobCountsDto,
    /// The first 100 failed chunks, by book and chunk number. `counts.failed` counts them all;
    /// every chunk's error is also in its source's chunk listing (`last_error`).
    pub errors: Vec<JobErrorDto>,
    pub created_at: DateTime<Utc>,
    pub started_at: Option<DateTime<Utc>>,
    pub finished_at: Option<DateTime<Utc>>,
    /// Why a running job is not moving, when the workers know; `null` otherwise.
    pub waiting: Option<WaitingDto>,
    /// For a `replace`: the source it makes a new version of; `null` for other kinds.
    pub source_id: Option<Uuid>,
    /// For a gated re-ingest: its gate, where the decision is and what decided it (in a job
    /// read or listed, and in promote's and discard's answers); `null` otherwise.
    pub gate: Option<GateDto>,
}

/// Why a running job is not moving.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = Waiting)]
pub struct WaitingDto {
    /// `rate_limited` (every key of the provider is cooling down), `daily_quota` (every key's
    /// daily quota is spent; `until` is the reset), `no_eligible_key` (no enabled key is left:
    /// add or enable one), `provider_unavailable` (the provider failed repeatedly, or this
    /// process cannot run its model) or `vector_store_unavailable`.
    #[schema(example = "daily_quota")]
    pub reason: WaitReasonDto,
    /// When the workers try again; `null` when that depends on you (a key to add).
    pub until: Option<DateTime<Utc>>,
}

/// Why a running job is not moving (`waiting.reason`).
#[derive(Clone, Copy, Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = WaitReason)]
pub enum WaitReasonDto {
    RateLimited,
    DailyQuota,
    NoEligibleKey,
    ProviderUnavailable,
    VectorStoreUnavailable,
}

impl From<WaitReason> for WaitReasonDto {
    fn from(reason: WaitReason) -> Self {
        match reason {
            WaitReason::RateLimited => Self::RateLimited,
            WaitReason::DailyQuota => Self::DailyQuota,
            WaitReason::NoEligibleKey => Self::NoEligibleKey,
            WaitReason::ProviderUnavailable => Self::ProviderUnavailable,
            WaitReason::VectorStoreUnavailable => Self::VectorStoreUnavailable,
        }
    }
}

impl From<Job> for JobDto {
    fn from(j: Job) -> Self {
        let waiting = j.waiting_at(Utc::now()).map(|w| WaitingDto {
            reason: w.reason.into(),
            until: w.until,
        });
        JobDto {
            waiting,
            source_id: j.source.map(|s| s.0),
            gate: None,
            status: JobStatusDto::of(&j),
            id: j.id.0,
            world_id: j.world_id.0,
            kind: j.kind.into(),
            run_id: j.run_id.0,
            counts: JobCountsDto {
                total: j.counts.total,
                embedded: j.counts.embedded,
                pending: j.counts.pending,
                failed: j.counts.failed,
                retries: j.counts.retries,
                rate_limited: j.counts.rate_limited,
                reused: j.counts.reused,
            },
            errors: j
                .errors
                .into_iter()
                .map(|e| JobErrorDto {
                    chunk_number: e.chunk_number,
                    book_number: e.book_number,
                    code: e.code,
                    message: e.message,
                })
                .collect(),
            created_at: j.created_at,
            started_at: j.started_at,
            finished_at: j.finished_at,
        }
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct JobList {
    pub jobs: Vec<JobDto>,
    /// The `offset` of the next page; `null` on the last one.
    pub next_offset: Option<u64>,
}

/// One job with its counts and per-chunk errors.
#[utoipa::path(get, path = "/v1/jobs/{job_id}", tag = "jobs", params(("job_id" = Uuid, Path)),
    responses((status = 200, body = JobDto), (status = 401, body = ErrorBody),
        (status = 404, description = "job_not_found", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn get_job(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<JobId>,
) -> Result<axum::Json<JobDto>, ApiError> {
    let job = state.jobs.get(id).await?;
    Ok(axum::Json(with_gate(&state, job).await?))
}

/// `job` as the API shows it, with its gate when it has one.
pub async fn with_gate(state: &AppState, mut job: Job) -> Result<JobDto, ApiError> {
    let gate = match job.gate {
        Some(_) => state.evals.gate(job.id).await?,
        None => None,
    };
    // The gate was read after the job: its state is the newer one, and the status shown
    // (`held` or not) follows it, so that one answer never says `running` beside a held gate.
    if let Some(gate) = &gate {
        job.gate = Some(gate.state);
    }
    let mut dto = JobDto::from(job);
    dto.gate = gate.map(Into::into);
    Ok(dto)
}

/// Jobs of a world, newest first; `status` keeps those with one of the given statuses.
#[utoipa::path(get, path = "/v1/worlds/{world_id}/jobs", tag = "jobs",
    params(("world_id" = Uuid, Path),
        ("status" = Option<Vec<JobStatusDto>>, Query, style = Form, explode = false, min_items = 1,
            description = "only jobs with one of these statuses, comma-separated, e.g. `queued,running`"),
        ("offset" = Option<u64>, Query, description = "jobs to skip (default 0)", minimum = 0, maximum = 9223372036854775807_i64),
        ("limit" = Option<u32>, Query, description = "jobs to return, 1 to 1000 (default 100)", minimum = 1, maximum = 1000)),
    responses((status = 200, body = JobList),
        (status = 400, description = "invalid_request (`details.field`: `status`, `offset`, `limit` or an unknown parameter)", body = ErrorBody),
        (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn list_jobs(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<WorldId>,
    ApiQuery(query): ApiQuery<Vec<(String, String)>>,
) -> Result<axum::Json<JobList>, ApiError> {
    let paging = super::extract::list_query(&query, &["status"])?;
    // The statuses asked for as shown, and as stored (a held re-ingest is stored running).
    let wanted: Option<Vec<(JobStatusDto, JobStatus)>> = match query.iter().find(|(k, _)| k == "status").map(|(_, v)| v)
    {
        None => None,
        Some(list) => {
            let mut wanted = Vec::new();
            for name in list.split(',').map(str::trim) {
                let status = match name {
                    "held" => Ok((JobStatusDto::Held, JobStatus::Running)),
                    name => name.parse::<JobStatus>().map(|s| (s.into(), s)),
                };
                let Ok(status) = status else {
                    return Err(ApiError::invalid_request(format!(
                        "unknown job status `{name}` (use queued, running, paused, held, cancelled, completed or failed)"
                    ))
                    .with_details(serde_json::json!({ "field": "status" })));
                };
                wanted.push(status);
            }
            Some(wanted)
        }
    };
    let stored: Vec<JobStatus> = wanted.iter().flatten().map(|(_, s)| *s).collect();
    let jobs = state.jobs.list(id, &stored, super::extract::window(paging)).await?;
    let (jobs, next_offset) = super::extract::page(jobs, paging);
    let mut shown = Vec::with_capacity(jobs.len());
    for job in jobs {
        let dto = with_gate(&state, job).await?;
        if wanted.as_ref().is_none_or(|w| w.iter().any(|(s, _)| *s == dto.status)) {
            shown.push(dto);
        }
    }
    Ok(axum::Json(JobList {
        jobs: shown,
        next_offset,
    }))
}

/// Pause a queued or running job (workers stop taking its entries).
#[utoipa::path(post, path = "/v1/jobs/{job_id}/pause", tag = "jobs", params(("job_id" = Uuid, Path)),
    responses((status = 200, body = JobDto), (status = 401, body = ErrorBody),
        (status = 404, description = "job_not_found", body = ErrorBody),
        (status = 409, description = "job_state_conflict", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn pause_job(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<JobId>,
) -> Result<axum::Json<JobDto>, ApiError> {
    Ok(axum::Json(state.jobs.pause(id).await?.into()))
}

/// Resume a paused job.
#[utoipa::path(post, path = "/v1/jobs/{job_id}/resume", tag = "jobs", params(("job_id" = Uuid, Path)),
    responses((status = 200, body = JobDto), (status = 401, body = ErrorBody),
        (status = 404, description = "job_not_found", body = ErrorBody),
        (status = 409, description = "job_state_conflict", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn resume_job(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<JobId>,
) -> Result<axum::Json<JobDto>, ApiError> {
    Ok(axum::Json(state.jobs.resume(id).await?.into()))
}

/// Cancel a job that has not finished. Its remaining entries stay pending; responses still in
/// flight are dropped.
#[utoipa::path(post, path = "/v1/jobs/{job_id}/cancel", tag = "jobs", params(("job_id" = Uuid, Path)),
    responses((status = 200, body = JobDto), (status = 401, body = ErrorBody),
        (status = 404, description = "job_not_found", body = ErrorBody),
        (status = 409, description = "job_state_conflict", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn cancel_job(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<JobId>,
) -> Result<axum::Json<JobDto>, ApiError> {
    Ok(axum::Json(state.jobs.cancel(id).await?.into()))
}

/// Retry a job's failed chunks: they go back to pending with their attempts reset, the job's
/// `failed` count drops by as many, and a `failed` job is `running` again (a `status` event, then
/// `progress`). A running or paused job keeps its status. Chunks only of a run the world serves
/// or is building: a failed re-ingest's run was retired (start a new re-ingest), and a cancelled
/// job is not retried (`POST /v1/worlds/{world_id}/retry-failed` takes its chunks).
#[utoipa::path(post, path = "/v1/jobs/{job_id}/retry", tag = "jobs", params(("job_id" = Uuid, Path)),
    responses((status = 200, body = JobDto), (status = 401, body = ErrorBody),
        (status = 404, description = "job_not_found", body = ErrorBody),
        (status = 409, description = "nothing_to_retry (no failed chunk), job_state_conflict (a cancelled job, a failed re-ingest)", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn retry_job(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<JobId>,
) -> Result<axum::Json<JobDto>, ApiError> {
    Ok(axum::Json(state.jobs.retry(id).await?.into()))
}

/// What a world's retry put back in the queue.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = RetryFailed)]
pub struct RetryFailedDto {
    /// Chunks pending again.
    pub retried: u64,
    /// The jobs that took them, as they are now: each failed chunk under its own job when that
    /// job can run again, the others under a repair job (or the world's running re-ingest).
    pub jobs: Vec<JobDto>,
}

/// Retry every failed chunk of a world (in the run it serves and one a re-ingest is building).
#[utoipa::path(post, path = "/v1/worlds/{world_id}/retry-failed", tag = "jobs", params(("world_id" = Uuid, Path)),
    responses((status = 200, body = RetryFailedDto), (status = 401, body = ErrorBody),
        (status = 404, description = "world_not_found", body = ErrorBody),
        (status = 409, description = "nothing_to_retry", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn retry_failed(
    State(state): State<AppState>,
    ApiPath(world): ApiPath<WorldId>,
) -> Result<axum::Json<RetryFailedDto>, ApiError> {
    let (retried, jobs) = state.jobs.retry_world(world).await?;
    Ok(axum::Json(RetryFailedDto {
        retried,
        jobs: jobs.into_iter().map(Into::into).collect(),
    }))
}

/// The job event streams open now: in all, and per client address.
#[derive(Debug)]
pub struct EventStreams {
    open: std::sync::Mutex<(usize, std::collections::HashMap<std::net::IpAddr, usize>)>,
    max: usize,
    max_per_client: usize,
}

/// Why no stream slot was given.
enum Full {
    Server(usize),
    Client(usize),
}

impl EventStreams {
    pub fn new(max: usize, max_per_client: usize) -> Self {
        Self {
            open: std::sync::Mutex::default(),
            max,
            max_per_client,
        }
    }

    /// A slot, unless `max` streams are open already, or `max_per_client` of `client`'s.
    fn take(self: &std::sync::Arc<Self>, client: Option<std::net::IpAddr>) -> Result<StreamSlot, Full> {
        let mut open = self.open.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if open.0 >= self.max {
            return Err(Full::Server(self.max));
        }
        if let Some(client) = client {
            let mine = open.1.entry(client).or_default();
            if *mine >= self.max_per_client {
                return Err(Full::Client(self.max_per_client));
            }
            *mine += 1;
        }
        open.0 += 1;
        Ok(StreamSlot {
            streams: self.clone(),
            client,
        })
    }
}

/// One open event stream, counted in [`EventStreams`] until it is dropped (ended, or the
/// client went away).
pub(super) struct StreamSlot {
    streams: std::sync::Arc<EventStreams>,
    client: Option<std::net::IpAddr>,
}

impl Drop for StreamSlot {
    fn drop(&mut self) {
        let mut open = self
            .streams
            .open
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        open.0 = open.0.saturating_sub(1);
        if let Some(client) = self.client
            && let std::collections::hash_map::Entry::Occupied(mut mine) = open.1.entry(client)
        {
            *mine.get_mut() -= 1;
            if *mine.get() == 0 {
                mine.remove();
            }
        }
    }
}

/// The event id in `Last-Event-ID` (0, the start, when absent): an integer from 0 to 2^63 - 1.
/// Anything else is `invalid_request`: replaying from the start instead would hand the client
/// every event again as if they were new.
fn last_event_id(headers: &axum::http::HeaderMap) -> Result<i64, ApiError> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(0);
    };
    value
        .to_str()
        .ok()
        .map(str::trim)
        .filter(|v| !v.is_empty() && v.bytes().all(|b| b.is_ascii_digit()))
        .and_then(|v| v.parse::<i64>().ok())
        .ok_or_else(|| {
            ApiError::invalid_request(format!(
                "Last-Event-ID must be an event id, an integer from 0 to {}, not `{}`",
                i64::MAX,
                String::from_utf8_lossy(value.as_bytes())
            ))
            .with_details(serde_json::json!({ "field": "Last-Event-ID" }))
        })
}

/// Server-sent events of a job: `progress`, `warning`, `error` and `status`, each with its id.
/// Replays from `Last-Event-ID` (everything when absent) and ends after a terminal status that
/// nothing follows (a retried job's stream goes on past its `failed`).
#[utoipa::path(get, path = "/v1/jobs/{job_id}/events", tag = "jobs",
    params(("job_id" = Uuid, Path), ("Last-Event-ID" = Option<i64>, Header, nullable = false, minimum = 0, maximum = 9223372036854775807_i64,
        description = "resume after this event id (the `id` of the last event received); absent: from the start")),
    responses((status = 200, description = "text/event-stream of job events", content_type = "text/event-stream"),
        (status = 400, description = "invalid_request (`details.field`: `Last-Event-ID` when it is not an event id)", body = ErrorBody),
        (status = 401, body = ErrorBody), (status = 404, description = "job_not_found", body = ErrorBody),
        (status = 503, description = "server_busy (`server.max_event_streams` streams are open, or `server.max_event_streams_per_client` of this client's; see `Retry-After`) or store_unavailable", body = ErrorBody)),
    security(("bearer" = [])))]
pub async fn job_events(
    State(state): State<AppState>,
    ApiPath(id): ApiPath<JobId>,
    headers: axum::http::HeaderMap,
    extensions: axum::http::Extensions,
) -> Result<impl axum::response::IntoResponse, ApiError> {
    use axum::response::sse::{Event, KeepAlive, Sse};
    use futures_util::StreamExt as _;
    let last = last_event_id(&headers)?;
    // 404 before a slot is taken (nothing is read until the stream is polled).
    let events = state.jobs.events(id, last, state.shutdown.clone()).await?;
    let slot = stream_slot(&state, &extensions)?;
    // The slot is held for as long as the stream is open.
    let stream = events.map(move |event| {
        let _held = &slot;
        Ok::<_, std::convert::Infallible>(
            Event::default()
                .id(event.id.to_string())
                .event(event.kind.as_str())
                .data(event.data),
        )
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(state.sse_keep_alive)))
}

/// A place among the open event streams (job and evaluation run streams alike): each polls the
/// store, so their number is bounded, in all and per client (503 `server_busy` past either).
pub(super) fn stream_slot(state: &AppState, extensions: &axum::http::Extensions) -> Result<StreamSlot, ApiError> {
    let client = crate::serve::peer(extensions).map(|addr| crate::serve::client_key(addr.ip()));
    state.event_streams.take(client).map_err(|full| {
        let message = match full {
            Full::Server(max) => format!(
                "{max} event streams are open, the most this server keeps (server.max_event_streams); retry shortly"
            ),
            Full::Client(max) => format!(
                "this client holds {max} event streams, the most one client may (server.max_event_streams_per_client); \
                 close one or retry shortly"
            ),
        };
        ApiError::new(ErrorCode::ServerBusy, message)
    })
}

/// What a gate compares: `hit_at_1`, `hit_at_5`, `mrr_at_10` (on the items that name sources
/// or chunks), `answer_share` or `fully` (on the items with an answer, at the gate's budget).
#[derive(Clone, Copy, Debug, Deserialize, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = GateMetric)]
pub enum GateMetricDto {
    #[serde(rename = "hit_at_1")]
    HitAt1,
    #[serde(rename = "hit_at_5")]
    HitAt5,
    #[serde(rename = "mrr_at_10")]
    MrrAt10,
    AnswerShare,
    Fully,
}

impl From<GateMetricDto> for GateMetric {
    fn from(m: GateMetricDto) -> Self {
        match m {
            GateMetricDto::HitAt1 => Self::HitAt1,
            GateMetricDto::HitAt5 => Self::HitAt5,
            GateMetricDto::MrrAt10 => Self::MrrAt10,
            GateMetricDto::AnswerShare => Self::AnswerShare,
            GateMetricDto::Fully => Self::Fully,
        }
    }
}

impl From<GateMetric> for GateMetricDto {
    fn from(m: GateMetric) -> Self {
        match m {
            GateMetric::HitAt1 => Self::HitAt1,
            GateMetric::HitAt5 => Self::HitAt5,
            GateMetric::MrrAt10 => Self::MrrAt10,
            GateMetric::AnswerShare => Self::AnswerShare,
            GateMetric::Fully => Self::Fully,
        }
    }
}

/// Where a gate's decision is: `waiting` (the new run is being built), `evaluating`, `held`
/// (promote or discard decides), `passed` (the world switched), `promoted`, `discarded` (on
/// request, or the re-ingest failed or was cancelled).
#[derive(Clone, Copy, Debug, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = GateState)]
pub enum GateStateDto {
    Waiting,
    Evaluating,
    Held,
    Passed,
    Promoted,
    Discarded,
}

impl From<GateState> for GateStateDto {
    fn from(s: GateState) -> Self {
        match s {
            GateState::Waiting => Self::Waiting,
            GateState::Evaluating => Self::Evaluating,
            GateState::Held => Self::Held,
            GateState::Passed => Self::Passed,
            GateState::Promoted => Self::Promoted,
            GateState::Discarded => Self::Discarded,
        }
    }
}

/// A re-ingest's gate. Its two evaluation runs are ordinary runs of the test set: read them,
/// or compare them (`GET /v1/worlds/{world_id}/evals/{eval_id}/runs/{before_run_id}/compare/{after_run_id}`)
/// for the items that got better or worse.
#[derive(Debug, Serialize, ToSchema)]
#[schema(as = ReingestGate)]
pub struct GateDto {
    pub state: GateStateDto,
    pub eval_id: Uuid,
    pub metric: GateMetricDto,
    pub tolerance: f64,
    /// The run scoring the run the world served when the re-ingest was asked for.
    pub before_run_id: Uuid,
    /// The run scoring the new run.
    pub after_run_id: Uuid,
    /// The metric on each, once both completed.
    pub before: Option<f64>,
    pub after: Option<f64>,
    /// What decided the gate, in words.
    pub reason: Option<String>,
    pub decided_at: Option<DateTime<Utc>>,
}

impl From<ReingestGate> for GateDto {
    fn from(g: ReingestGate) -> Self {
        Self {
            state: g.state.into(),
            eval_id: g.eval_id.0,
            metric: g.metric.into(),
            tolerance: g.tolerance,
            before_run_id: g.before_run.0,
            after_run_id: g.after_run.0,
            before: g.before_value,
            after: g.after_value,
            reason: g.reason,
            decided_at: g.decided_at,
        }
    }
}
