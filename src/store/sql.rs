//! SQL shared by both backends, and the one implementation of the store traits.
//!
//! SQLite and PostgreSQL agree on everything quarry asks of them here (`$n` parameters,
//! `RETURNING`, `COUNT(*) FILTER`, cascading foreign keys), so the queries are written once
//! and [`impl_store!`] expands the trait implementations for each pool type. What differs
//! between the two (connection setup, claiming work) lives in `sqlite.rs` / `postgres.rs`.

use chrono::{DateTime, Utc};
use uuid::Uuid;

use super::{Error, Result};
use crate::domain::{
    ChunkingProfile, EmbeddingProfile, Job, JobCounts, JobError, JobId, RunId, Source, SourceId, World, WorldId,
};

pub(super) const INSERT_WORLD: &str = "INSERT INTO worlds (id, name, provider, model, dimensions, max_tokens, \
     overlap_tokens, hybrid, active_run_id, collection, created_at, updated_at) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11)";

pub(super) const INSERT_RUN: &str = "INSERT INTO runs (id, world_id, provider, model, dimensions, max_tokens, \
     overlap_tokens, collection, status, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)";

pub(super) const SELECT_WORLD: &str = "SELECT id, name, provider, model, dimensions, max_tokens, overlap_tokens, \
     hybrid, active_run_id, collection, created_at, updated_at FROM worlds WHERE id = $1";

pub(super) const LIST_WORLDS: &str = "SELECT id, name, provider, model, dimensions, max_tokens, overlap_tokens, \
     hybrid, active_run_id, collection, created_at, updated_at FROM worlds ORDER BY created_at, id";

pub(super) const RENAME_WORLD: &str = "UPDATE worlds SET name = $2, updated_at = $3 WHERE id = $1 \
     RETURNING id, name, provider, model, dimensions, max_tokens, overlap_tokens, hybrid, active_run_id, \
     collection, created_at, updated_at";

pub(super) const DELETE_WORLD: &str = "DELETE FROM worlds WHERE id = $1";

pub(super) const WORLD_COLLECTIONS: &str =
    "SELECT DISTINCT collection FROM runs WHERE world_id = $1 ORDER BY collection";

pub(super) const WORLD_STATS: &str = "SELECT \
     (SELECT COUNT(*) FROM sources WHERE world_id = $1) AS sources, \
     COUNT(m.chunk_id) AS chunks, \
     COUNT(m.chunk_id) FILTER (WHERE m.state = 'embedded') AS embedded, \
     COUNT(m.chunk_id) FILTER (WHERE m.state = 'pending') AS pending, \
     COUNT(m.chunk_id) FILTER (WHERE m.state = 'failed') AS failed \
     FROM worlds w LEFT JOIN manifest_entries m ON m.world_id = w.id AND m.run_id = w.active_run_id \
     WHERE w.id = $1";

/// Hands out the next book number and returns it with the active run (locks the world row on
/// Postgres, so concurrent uploads to one world serialise here).
pub(super) const NEXT_BOOK: &str = "UPDATE worlds SET next_book_number = next_book_number + 1 WHERE id = $1 \
     RETURNING next_book_number - 1 AS book_number, active_run_id";

pub(super) const INSERT_SOURCE: &str = "INSERT INTO sources (id, world_id, book_number, filename, content_type, \
     text, sha256, chars, created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)";

pub(super) const INSERT_CHUNK: &str = "INSERT INTO chunks (id, world_id, run_id, source_id, book_number, \
     chunk_number, char_start, char_end, token_count, chunk_text, overlap_text, text_sha256) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";

pub(super) const INSERT_MANIFEST: &str = "INSERT INTO manifest_entries (chunk_id, world_id, run_id, source_id, \
     job_id, point_id, state, updated_at) VALUES ($1, $2, $3, $4, $5, $6, 'pending', $7)";

pub(super) const INSERT_JOB: &str = "INSERT INTO jobs (id, world_id, kind, status, run_id, total, created_at, \
     started_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)";

pub(super) const SELECT_SOURCE: &str = "SELECT id, world_id, book_number, filename, content_type, sha256, chars, \
     created_at FROM sources WHERE world_id = $1 AND id = $2";

pub(super) const LIST_SOURCES: &str = "SELECT id, world_id, book_number, filename, content_type, sha256, chars, \
     created_at FROM sources WHERE world_id = $1 ORDER BY book_number";

pub(super) const SOURCE_COUNTS: &str = "SELECT COUNT(*) AS chunks, \
     COUNT(*) FILTER (WHERE m.state = 'embedded') AS embedded, \
     COUNT(*) FILTER (WHERE m.state = 'pending') AS pending, \
     COUNT(*) FILTER (WHERE m.state = 'failed') AS failed \
     FROM manifest_entries m JOIN worlds w ON w.id = m.world_id AND w.active_run_id = m.run_id \
     WHERE m.world_id = $1 AND m.source_id = $2";

pub(super) const SELECT_JOB: &str = "SELECT id, world_id, kind, status, run_id, total, embedded, failed, retries, \
     rate_limited, reused, created_at, started_at, finished_at FROM jobs WHERE id = $1";

pub(super) const LIST_JOBS: &str = "SELECT id, world_id, kind, status, run_id, total, embedded, failed, retries, \
     rate_limited, reused, created_at, started_at, finished_at FROM jobs WHERE world_id = $1 \
     ORDER BY created_at DESC, id";

pub(super) const JOB_ERRORS: &str = "SELECT c.book_number, c.chunk_number, m.last_error_code, \
     m.last_error_message FROM manifest_entries m JOIN chunks c ON c.id = m.chunk_id \
     WHERE m.job_id = $1 AND m.state = 'failed' ORDER BY c.book_number, c.chunk_number";

pub(super) const COUNT_ELIGIBLE_KEYS: &str =
    "SELECT COUNT(*) FROM provider_keys WHERE provider = $1 AND enabled AND NOT retired";

#[derive(sqlx::FromRow)]
pub(super) struct WorldRow {
    id: Uuid,
    name: String,
    provider: String,
    model: String,
    dimensions: i64,
    max_tokens: i64,
    overlap_tokens: i64,
    hybrid: bool,
    active_run_id: Uuid,
    collection: String,
    created_at: DateTime<Utc>,
    updated_at: DateTime<Utc>,
}

impl TryFrom<WorldRow> for World {
    type Error = Error;

    fn try_from(row: WorldRow) -> Result<World> {
        Ok(World {
            id: WorldId(row.id),
            name: row.name,
            embedding: EmbeddingProfile {
                provider: row.provider.parse().map_err(|reason| corrupt("worlds", reason))?,
                model: row.model,
                dimensions: narrow("worlds", row.dimensions)?,
            },
            chunking: ChunkingProfile {
                max_tokens: narrow("worlds", row.max_tokens)?,
                overlap_tokens: narrow("worlds", row.overlap_tokens)?,
            },
            hybrid: row.hybrid,
            active_run: RunId(row.active_run_id),
            collection: row.collection,
            created_at: row.created_at,
            updated_at: row.updated_at,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct StatsRow {
    pub sources: i64,
    pub chunks: i64,
    pub embedded: i64,
    pub pending: i64,
    pub failed: i64,
}

#[derive(sqlx::FromRow)]
pub(super) struct SourceRow {
    id: Uuid,
    world_id: Uuid,
    book_number: i64,
    filename: String,
    content_type: String,
    sha256: String,
    chars: i64,
    created_at: DateTime<Utc>,
}

impl TryFrom<SourceRow> for Source {
    type Error = Error;

    fn try_from(row: SourceRow) -> Result<Source> {
        Ok(Source {
            id: SourceId(row.id),
            world_id: WorldId(row.world_id),
            book_number: narrow("sources", row.book_number)?,
            filename: row.filename,
            content_type: row.content_type,
            sha256: row.sha256,
            chars: narrow("sources", row.chars)?,
            created_at: row.created_at,
        })
    }
}

#[derive(sqlx::FromRow)]
pub(super) struct CountsRow {
    pub chunks: i64,
    pub embedded: i64,
    pub pending: i64,
    pub failed: i64,
}

#[derive(sqlx::FromRow)]
pub(super) struct JobRow {
    id: Uuid,
    world_id: Uuid,
    kind: String,
    status: String,
    run_id: Uuid,
    total: i64,
    embedded: i64,
    failed: i64,
    retries: i64,
    rate_limited: i64,
    reused: i64,
    created_at: DateTime<Utc>,
    started_at: Option<DateTime<Utc>>,
    finished_at: Option<DateTime<Utc>>,
}

#[derive(sqlx::FromRow)]
pub(super) struct JobErrorRow {
    book_number: i64,
    chunk_number: i64,
    last_error_code: Option<String>,
    last_error_message: Option<String>,
}

impl JobRow {
    pub(super) fn into_job(self, errors: Vec<JobErrorRow>) -> Result<Job> {
        let total: u64 = narrow("jobs", self.total)?;
        let embedded: u64 = narrow("jobs", self.embedded)?;
        let failed: u64 = narrow("jobs", self.failed)?;
        let errors = errors
            .into_iter()
            .map(|e| {
                Ok(JobError {
                    book_number: narrow("manifest_entries", e.book_number)?,
                    chunk_number: narrow("manifest_entries", e.chunk_number)?,
                    code: e.last_error_code.unwrap_or_else(|| "unknown".to_owned()),
                    message: e.last_error_message.unwrap_or_default(),
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Job {
            id: JobId(self.id),
            world_id: WorldId(self.world_id),
            kind: self.kind.parse().map_err(|reason| corrupt("jobs", reason))?,
            status: self.status.parse().map_err(|reason| corrupt("jobs", reason))?,
            run_id: RunId(self.run_id),
            counts: JobCounts {
                total,
                embedded,
                pending: total.saturating_sub(embedded + failed),
                failed,
                retries: narrow("jobs", self.retries)?,
                rate_limited: narrow("jobs", self.rate_limited)?,
                reused: narrow("jobs", self.reused)?,
            },
            errors,
            created_at: self.created_at,
            started_at: self.started_at,
            finished_at: self.finished_at,
        })
    }
}

pub(super) fn corrupt(table: &'static str, reason: String) -> Error {
    Error::Corrupt { table, reason }
}

/// Converts a stored integer into the domain's unsigned type; out of range is corruption.
pub(super) fn narrow<T: TryFrom<i64>>(table: &'static str, value: i64) -> Result<T> {
    T::try_from(value).map_err(|_| corrupt(table, format!("integer {value} out of range")))
}

/// Widens a domain integer for binding (every column is 64-bit).
pub(super) fn wide<T: Into<u64>>(value: T) -> i64 {
    i64::try_from(value.into()).unwrap_or(i64::MAX)
}

/// Expands the store traits for a backend struct with a `pool` field.
macro_rules! impl_store {
    ($store:ty, $kind:literal) => {
        #[async_trait::async_trait]
        impl $crate::store::WorldStore for $store {
            async fn create_world(&self, w: $crate::domain::NewWorld) -> $crate::store::Result<$crate::domain::World> {
                use $crate::store::sql::*;
                let collection = w.embedding.collection_name();
                let mut tx = self.pool.begin().await?;
                sqlx::query(INSERT_WORLD)
                    .bind(w.id.0)
                    .bind(&w.name)
                    .bind(w.embedding.provider.as_str())
                    .bind(&w.embedding.model)
                    .bind(wide(w.embedding.dimensions))
                    .bind(wide(w.chunking.max_tokens))
                    .bind(wide(w.chunking.overlap_tokens))
                    .bind(w.hybrid)
                    .bind(w.run.0)
                    .bind(&collection)
                    .bind(w.now)
                    .execute(&mut *tx)
                    .await?;
                sqlx::query(INSERT_RUN)
                    .bind(w.run.0)
                    .bind(w.id.0)
                    .bind(w.embedding.provider.as_str())
                    .bind(&w.embedding.model)
                    .bind(wide(w.embedding.dimensions))
                    .bind(wide(w.chunking.max_tokens))
                    .bind(wide(w.chunking.overlap_tokens))
                    .bind(&collection)
                    .bind("active")
                    .bind(w.now)
                    .execute(&mut *tx)
                    .await?;
                let row: WorldRow = sqlx::query_as(SELECT_WORLD)
                    .bind(w.id.0)
                    .fetch_one(&mut *tx)
                    .await?;
                tx.commit().await?;
                row.try_into()
            }

            async fn get_world(
                &self,
                id: $crate::domain::WorldId,
            ) -> $crate::store::Result<Option<$crate::domain::World>> {
                use $crate::store::sql::*;
                let row: Option<WorldRow> = sqlx::query_as(SELECT_WORLD)
                    .bind(id.0)
                    .fetch_optional(&self.pool)
                    .await?;
                row.map(TryInto::try_into).transpose()
            }

            async fn list_worlds(&self) -> $crate::store::Result<Vec<$crate::domain::World>> {
                use $crate::store::sql::*;
                let rows: Vec<WorldRow> = sqlx::query_as(LIST_WORLDS).fetch_all(&self.pool).await?;
                rows.into_iter().map(TryInto::try_into).collect()
            }

            async fn world_stats(
                &self,
                id: $crate::domain::WorldId,
            ) -> $crate::store::Result<$crate::domain::WorldStats> {
                use $crate::store::sql::*;
                let row: Option<StatsRow> = sqlx::query_as(WORLD_STATS)
                    .bind(id.0)
                    .fetch_optional(&self.pool)
                    .await?;
                let Some(row) = row else {
                    return Ok($crate::domain::WorldStats::default());
                };
                Ok($crate::domain::WorldStats {
                    sources: narrow("sources", row.sources)?,
                    chunks: narrow("chunks", row.chunks)?,
                    embedded: narrow("manifest_entries", row.embedded)?,
                    pending: narrow("manifest_entries", row.pending)?,
                    failed: narrow("manifest_entries", row.failed)?,
                })
            }

            async fn rename_world(
                &self,
                id: $crate::domain::WorldId,
                name: &str,
                now: chrono::DateTime<chrono::Utc>,
            ) -> $crate::store::Result<Option<$crate::domain::World>> {
                use $crate::store::sql::*;
                let row: Option<WorldRow> = sqlx::query_as(RENAME_WORLD)
                    .bind(id.0)
                    .bind(name)
                    .bind(now)
                    .fetch_optional(&self.pool)
                    .await?;
                row.map(TryInto::try_into).transpose()
            }

            async fn delete_world(&self, id: $crate::domain::WorldId) -> $crate::store::Result<bool> {
                use $crate::store::sql::*;
                let done = sqlx::query(DELETE_WORLD).bind(id.0).execute(&self.pool).await?;
                Ok(done.rows_affected() > 0)
            }

            async fn world_collections(&self, id: $crate::domain::WorldId) -> $crate::store::Result<Vec<String>> {
                use $crate::store::sql::*;
                Ok(sqlx::query_scalar(WORLD_COLLECTIONS)
                    .bind(id.0)
                    .fetch_all(&self.pool)
                    .await?)
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::SourceStore for $store {
            async fn add_source(
                &self,
                source: $crate::domain::NewSource,
                chunks: Vec<$crate::domain::NewChunk>,
                job: $crate::domain::JobId,
            ) -> $crate::store::Result<($crate::domain::Source, $crate::domain::Job)> {
                use sha2::Digest as _;
                use $crate::store::sql::*;
                let mut tx = self.pool.begin().await?;
                let (book_number, run_id): (i64, uuid::Uuid) = sqlx::query_as(NEXT_BOOK)
                    .bind(source.world_id.0)
                    .fetch_one(&mut *tx)
                    .await?;
                let run = $crate::domain::RunId(run_id);
                let sha256 = hex::encode(sha2::Sha256::digest(source.text.as_bytes()));
                let chars = source.text.chars().count() as u64;
                sqlx::query(INSERT_SOURCE)
                    .bind(source.id.0)
                    .bind(source.world_id.0)
                    .bind(book_number)
                    .bind(&source.filename)
                    .bind(&source.content_type)
                    .bind(&source.text)
                    .bind(&sha256)
                    .bind(wide(chars))
                    .bind(source.now)
                    .execute(&mut *tx)
                    .await?;
                for chunk in &chunks {
                    let chunk_id = uuid::Uuid::new_v4();
                    let text_sha = hex::encode(sha2::Sha256::digest(chunk.chunk_text.as_bytes()));
                    sqlx::query(INSERT_CHUNK)
                        .bind(chunk_id)
                        .bind(source.world_id.0)
                        .bind(run_id)
                        .bind(source.id.0)
                        .bind(book_number)
                        .bind(wide(chunk.chunk_number))
                        .bind(wide(chunk.char_start))
                        .bind(wide(chunk.char_end))
                        .bind(wide(chunk.token_count))
                        .bind(&chunk.chunk_text)
                        .bind(&chunk.overlap_text)
                        .bind(&text_sha)
                        .execute(&mut *tx)
                        .await?;
                    let point = $crate::domain::point_id(source.world_id, run, source.id, chunk.chunk_number);
                    sqlx::query(INSERT_MANIFEST)
                        .bind(chunk_id)
                        .bind(source.world_id.0)
                        .bind(run_id)
                        .bind(source.id.0)
                        .bind(job.0)
                        .bind(point)
                        .bind(source.now)
                        .execute(&mut *tx)
                        .await?;
                }
                sqlx::query(INSERT_JOB)
                    .bind(job.0)
                    .bind(source.world_id.0)
                    .bind($crate::domain::JobKind::Ingest.as_str())
                    .bind($crate::domain::JobStatus::Running.as_str())
                    .bind(run_id)
                    .bind(wide(chunks.len() as u64))
                    .bind(source.now)
                    .bind(source.now)
                    .execute(&mut *tx)
                    .await?;
                let source_row: SourceRow = sqlx::query_as(SELECT_SOURCE)
                    .bind(source.world_id.0)
                    .bind(source.id.0)
                    .fetch_one(&mut *tx)
                    .await?;
                let job_row: JobRow = sqlx::query_as(SELECT_JOB).bind(job.0).fetch_one(&mut *tx).await?;
                tx.commit().await?;
                Ok((source_row.try_into()?, job_row.into_job(Vec::new())?))
            }

            async fn get_source(
                &self,
                world: $crate::domain::WorldId,
                id: $crate::domain::SourceId,
            ) -> $crate::store::Result<Option<$crate::domain::Source>> {
                use $crate::store::sql::*;
                let row: Option<SourceRow> = sqlx::query_as(SELECT_SOURCE)
                    .bind(world.0)
                    .bind(id.0)
                    .fetch_optional(&self.pool)
                    .await?;
                row.map(TryInto::try_into).transpose()
            }

            async fn list_sources(
                &self,
                world: $crate::domain::WorldId,
            ) -> $crate::store::Result<Vec<$crate::domain::Source>> {
                use $crate::store::sql::*;
                let rows: Vec<SourceRow> = sqlx::query_as(LIST_SOURCES)
                    .bind(world.0)
                    .fetch_all(&self.pool)
                    .await?;
                rows.into_iter().map(TryInto::try_into).collect()
            }

            async fn source_counts(
                &self,
                world: $crate::domain::WorldId,
                id: $crate::domain::SourceId,
            ) -> $crate::store::Result<$crate::domain::SourceCounts> {
                use $crate::store::sql::*;
                let row: CountsRow = sqlx::query_as(SOURCE_COUNTS)
                    .bind(world.0)
                    .bind(id.0)
                    .fetch_one(&self.pool)
                    .await?;
                Ok($crate::domain::SourceCounts {
                    chunks: narrow("manifest_entries", row.chunks)?,
                    embedded: narrow("manifest_entries", row.embedded)?,
                    pending: narrow("manifest_entries", row.pending)?,
                    failed: narrow("manifest_entries", row.failed)?,
                })
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::JobStore for $store {
            async fn get_job(&self, id: $crate::domain::JobId) -> $crate::store::Result<Option<$crate::domain::Job>> {
                use $crate::store::sql::*;
                let row: Option<JobRow> = sqlx::query_as(SELECT_JOB)
                    .bind(id.0)
                    .fetch_optional(&self.pool)
                    .await?;
                let Some(row) = row else { return Ok(None) };
                let errors: Vec<JobErrorRow> = sqlx::query_as(JOB_ERRORS)
                    .bind(id.0)
                    .fetch_all(&self.pool)
                    .await?;
                row.into_job(errors).map(Some)
            }

            async fn list_jobs(
                &self,
                world: $crate::domain::WorldId,
            ) -> $crate::store::Result<Vec<$crate::domain::Job>> {
                use $crate::store::sql::*;
                let rows: Vec<JobRow> = sqlx::query_as(LIST_JOBS)
                    .bind(world.0)
                    .fetch_all(&self.pool)
                    .await?;
                let mut jobs = Vec::with_capacity(rows.len());
                for row in rows {
                    let errors: Vec<JobErrorRow> = sqlx::query_as(JOB_ERRORS)
                        .bind(row.id_uuid())
                        .fetch_all(&self.pool)
                        .await?;
                    jobs.push(row.into_job(errors)?);
                }
                Ok(jobs)
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::KeyStore for $store {
            async fn count_eligible_keys(&self, provider: $crate::domain::ProviderKind) -> $crate::store::Result<u64> {
                use $crate::store::sql::*;
                let n: i64 = sqlx::query_scalar(COUNT_ELIGIBLE_KEYS)
                    .bind(provider.as_str())
                    .fetch_one(&self.pool)
                    .await?;
                narrow("provider_keys", n)
            }
        }

        #[async_trait::async_trait]
        impl $crate::store::Store for $store {
            fn kind(&self) -> &'static str {
                $kind
            }

            async fn ping(&self) -> $crate::store::Result<()> {
                sqlx::query("SELECT 1").execute(&self.pool).await?;
                Ok(())
            }

            async fn close(&self) {
                self.pool.close().await;
            }
        }
    };
}

pub(crate) use impl_store;

impl JobRow {
    pub(super) fn id_uuid(&self) -> Uuid {
        self.id
    }
}
