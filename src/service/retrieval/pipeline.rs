//! One retrieval as named stages: [`RetrievalService::retrieve_once`] reads as the list —
//! read the world → scope (filter) → choose the search (or the whole corpus) → size → search →
//! verify → rank → rerank → explain → fit the context. Each stage takes and gives typed values;
//! a stage that answers early (nothing to search, the whole corpus fits) says so by its type.

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::time::Instant;

use tracing::Instrument as _;

use super::{
    CorpusStats, Found, Hit, Invalid, Missing, Mode, Quality, Retrieval, RetrievalService, ServiceError, ServiceResult,
    Settings, Warning, WarningCode, explain, ms, same_target,
};
use crate::domain::{RunId, SourceId, SourceSize, World, WorldId};

/// The world as read for one retrieval, checked; with the search a head start ran meanwhile.
struct Read {
    world: World,
    /// Embedded chunks of its active run, counted up to what the request needs.
    embedded: u64,
    ahead: Option<ServiceResult<Found>>,
}

/// How many results the answer keeps, and how many candidates the search fetches for them.
#[derive(Clone, Copy)]
struct Sizes {
    limit: u64,
    search_limit: u64,
}

impl RetrievalService {
    /// One retrieval on the world as read now; also the run searched, when one was.
    pub(super) async fn retrieve_once(
        &self,
        world_id: WorldId,
        query: &str,
        settings: &Settings,
        started: Instant,
    ) -> ServiceResult<(Retrieval, Option<RunId>)> {
        let query = query.trim();
        let Read { world, embedded, ahead } = self.read_world(world_id, query, settings).await?;
        let mut answer = Retrieval {
            requested_top_k: settings.top_k,
            ..Retrieval::default()
        };
        let finish = |mut answer: Retrieval, run: Option<RunId>| {
            answer.timing.total_ms = ms(started.elapsed());
            Ok((answer, run))
        };
        let Some(sources) = self.scope(&world, settings, &mut answer).await? else {
            return finish(answer, None);
        };
        let budget = settings.max_context_tokens.unwrap_or(self.limits.max_context_tokens);
        let Some(mode) = self
            .choose_search(&world, settings, sources.as_deref(), budget, &mut answer)
            .await?
        else {
            return finish(answer, Some(world.active_run));
        };
        let Some(sizes) = sizes(settings, embedded, &mut answer) else {
            return finish(answer, None);
        };
        let found = match ahead {
            Some(found) => found?,
            None => {
                self.embed_and_search(&world, query, sizes.search_limit, mode, settings, sources.as_deref())
                    .await?
            }
        };
        answer.timing.embed_ms = found.embed_ms;
        answer.timing.search_ms = found.search_ms;
        let phase = Instant::now();
        let found = self.verify_all(&world, query, found, sizes, &mut answer).await?;
        rank(&mut answer);
        answer.timing.verify_ms = ms(phase.elapsed());
        if settings.rerank.is_some() {
            self.rerank(query, sizes.limit as usize, &mut answer)
                .instrument(tracing::info_span!("retrieval.rerank"))
                .await;
        }
        let phase = Instant::now();
        answer.results.truncate(sizes.limit as usize);
        answer.quality = Quality::judge(&answer.results, found.used);
        answer.search_used = Some(found.used);
        if settings.explain {
            let ran = explain::Ran {
                world: &world,
                query,
                vector: found.vector,
                used: found.used,
                min_score: settings.min_score,
                sources: sources.as_deref(),
                limit: sizes.search_limit as usize,
            };
            answer.explain = Some(self.explain(ran, &answer).await?);
        }
        self.fit(&world, settings, budget, &mut answer).await?;
        answer.timing.verify_ms += ms(phase.elapsed());
        finish(answer, Some(world.active_run))
    }

    /// Reads the world and its embedded count in one store round trip — with a remembered
    /// world, the query is embedded and searched meanwhile (a head start, kept only when the
    /// store confirms the world it was made for) — then checks, on the world as read: it exists,
    /// the query is not blank, `hybrid` is asked of a hybrid world.
    async fn read_world(&self, world_id: WorldId, query: &str, settings: &Settings) -> ServiceResult<Read> {
        let count_to = settings
            .top_k
            .max(settings.rerank.map_or(0, |r| r.candidates.max(r.top_n.unwrap_or(0))))
            .max(1);
        if let Some(run) = settings.on_run {
            // A run named (an evaluation's): read as it is, no hint made or used.
            let read = self.store.run_for_retrieval(world_id, run, count_to).await?;
            let (world, embedded) = read.ok_or_else(|| {
                ServiceError::conflict(
                    crate::service::Conflict::EvalRunState,
                    "the index measured is neither served nor being built any more (its re-ingest ended)",
                )
            })?;
            check_read(&world, query, settings)?;
            return Ok(Read {
                world,
                embedded,
                ahead: None,
            });
        }
        // A head start only where the checks below would pass on the remembered world.
        let hint = self
            .hints()
            .get(&world_id)
            .filter(|h| {
                !query.is_empty()
                    && settings.filter.is_none()
                    && settings.rerank.is_none()
                    && !settings.explain
                    && settings.top_k > 0
                    && h.embedded > 0
                    && (settings.mode == Mode::Dense || (settings.mode == Mode::Hybrid && h.world.hybrid))
            })
            .cloned();
        // The embedded chunks are counted up to `top_k` (and at least one, so that the hint
        // knows whether there are any); the count is only looked at after the checks below.
        // With a hint, the search is unclamped: the count may have grown.
        let (read, ahead) = match hint {
            Some(hint) => {
                let (read, found) = tokio::join!(
                    self.store.world_for_retrieval(world_id, count_to),
                    self.embed_and_search(&hint.world, query, settings.top_k, settings.mode, settings, None)
                );
                (read, Some((hint.world, found)))
            }
            None => (self.store.world_for_retrieval(world_id, count_to).await, None),
        };
        let read = read?;
        self.remember(world_id, read.as_ref());
        // What was done ahead stands only if the store confirms the world it was done for;
        // every check below then still runs on the confirmed world.
        let ahead = ahead.and_then(|(guess, found)| {
            let confirmed = read
                .as_ref()
                .is_some_and(|(world, embedded)| *embedded > 0 && same_target(&guess, world));
            let counter = match confirmed {
                true => &self.head_starts.used,
                false => &self.head_starts.discarded,
            };
            counter.fetch_add(1, Ordering::Relaxed);
            confirmed.then_some(found)
        });
        let (world, embedded) = read.ok_or(ServiceError::NotFound(Missing::World))?;
        check_read(&world, query, settings)?;
        Ok(Read { world, embedded, ahead })
    }

    /// The sources a filter keeps (`Some(None)`: no filter, the whole world); `None` when it
    /// keeps none, the answer then warned.
    async fn scope(
        &self,
        world: &World,
        settings: &Settings,
        answer: &mut Retrieval,
    ) -> ServiceResult<Option<Option<Vec<SourceId>>>> {
        let Some(filter) = &settings.filter else {
            return Ok(Some(None));
        };
        let sources: Vec<SourceId> = (self
            .store
            .list_sources(world.id, crate::domain::Window::ALL)
            .await?
            .iter())
        .filter(|s| filter.matches(s))
        .map(|s| s.id)
        .collect();
        if sources.is_empty() {
            answer.warnings.push(Warning {
                code: WarningCode::FilterMatchedNothing,
                message: "no source of the world matches the filter; nothing was searched".into(),
            });
            return Ok(None);
        }
        Ok(Some(Some(sources)))
    }

    /// The search to run (`dense` or `hybrid`); `None` when the whole corpus is the answer
    /// (`full`, or `auto` on a corpus that fits the threshold and the budget), put in `answer`.
    async fn choose_search(
        &self,
        world: &World,
        settings: &Settings,
        sources: Option<&[SourceId]>,
        budget: u32,
        answer: &mut Retrieval,
    ) -> ServiceResult<Option<Mode>> {
        if matches!(settings.mode, Mode::Dense | Mode::Hybrid) {
            return Ok(Some(settings.mode));
        }
        let sizes = self.store.source_sizes(world.id, world.active_run).await?;
        let kept: Vec<SourceSize> = sizes
            .into_iter()
            .filter(|size| sources.is_none_or(|s| s.contains(&size.source_id)))
            .collect();
        let corpus = CorpusStats {
            sources: kept.len() as u64,
            chunks: kept.iter().map(|s| s.chunks).sum(),
            tokens: kept.iter().map(|s| s.tokens).sum(),
        };
        answer.corpus = Some(corpus);
        let threshold = self.limits.full_context_threshold.min(budget);
        if settings.mode == Mode::Full || corpus.tokens <= u64::from(threshold) {
            self.full_context(world, &kept, budget, answer).await?;
            return Ok(None);
        }
        Ok(Some(if world.hybrid { Mode::Hybrid } else { Mode::Dense }))
    }

    /// Verifies the search's hits against the store. Hits verification dropped (a version
    /// switching in, a source deleted, this instant) would leave the answer short, or without
    /// the source at all: one deeper search takes their place, its hits verified all over again
    /// in one read, so that the answer is one snapshot of the store (never a hit of a version
    /// and one of the next). Returns what was searched.
    async fn verify_all(
        &self,
        world: &World,
        query: &str,
        mut found: Found,
        sizes: Sizes,
        answer: &mut Retrieval,
    ) -> ServiceResult<Found> {
        let searched = found.hits.len();
        self.verify(world, std::mem::take(&mut found.hits), answer)
            .instrument(tracing::info_span!("retrieval.verify"))
            .await?;
        if answer.results.len() < searched && answer.results.len() < sizes.limit as usize {
            let deeper = self.search_deeper(world, query, &found).await?;
            answer.results.clear();
            let warned = answer.warnings.len();
            self.verify(world, deeper, answer).await?;
            // A drop said again by the second reading is said once.
            let again: Vec<WarningCode> = answer.warnings[warned..].iter().map(|w| w.code).collect();
            let mut index = 0;
            answer.warnings.retain(|w| {
                index += 1;
                index > warned || !again.contains(&w.code)
            });
        }
        Ok(found)
    }

    /// Fits the results, widened as `settings.expand` says, into `budget` tokens: the context,
    /// its text and citations, and a warning for what was cut or left out.
    async fn fit(&self, world: &World, settings: &Settings, budget: u32, answer: &mut Retrieval) -> ServiceResult<()> {
        let counter = self
            .providers
            .chunk_counter(world.embedding.provider)
            .await
            .map_err(|err| ServiceError::Provider {
                message: format!("the world's tokenizer is not available: {err}"),
            })?;
        let fitted = self
            .context(world, settings.expand, budget, counter.as_ref(), answer)
            .instrument(tracing::info_span!("retrieval.context"))
            .await?;
        if fitted.cut {
            answer.warnings.push(Warning {
                code: WarningCode::ContextCut,
                message: format!(
                    "the best hit is larger than the context budget of {budget} tokens (max_context_tokens); \
                     the context holds its beginning, up to a sentence boundary"
                ),
            });
        }
        if fitted.left_out > 0 {
            answer.warnings.push(Warning {
                code: WarningCode::ContextTruncated,
                message: format!(
                    "{} chunk(s) were left out of the context to keep it within {budget} tokens \
                     (max_context_tokens); the results are complete",
                    fitted.left_out
                ),
            });
        }
        answer.context = fitted.chunks;
        answer.context_text = fitted.text;
        answer.citations = fitted.citations;
        Ok(())
    }
}

/// How many results to keep (`top_k`, or rerank's `top_n`, clamped to the embedded chunks) and
/// fetch (a rerank is handed more candidates than it keeps); `None` when nothing is searched —
/// `top_k` 0, or nothing embedded (warned).
fn sizes(settings: &Settings, embedded: u64, answer: &mut Retrieval) -> Option<Sizes> {
    if settings.top_k == 0 {
        return None;
    }
    if embedded == 0 {
        answer.warnings.push(Warning {
            code: WarningCode::NoEmbeddedChunks,
            message: "the world has no embedded chunks yet; nothing was searched".into(),
        });
        return None;
    }
    let top_k = settings.rerank.and_then(|r| r.top_n).unwrap_or(settings.top_k);
    let limit = top_k.min(embedded);
    answer.effective_top_k = limit;
    let search_limit = match settings.rerank {
        Some(rerank) => rerank.candidates.max(limit).min(embedded),
        None => limit,
    };
    Some(Sizes { limit, search_limit })
}

/// Orders the verified results best first (then by book and chunk number) and folds hits with
/// the same text (the same sentence in two sources, say) into the best-scored one, which lists
/// the others' chunks. The text, not the hash: in a world with context prefixes the same text
/// under two headings has two hashes.
fn rank(answer: &mut Retrieval) {
    let mut results = std::mem::take(&mut answer.results);
    results.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then(a.chunk.chunk.book_number.cmp(&b.chunk.chunk.book_number))
            .then(a.chunk.chunk.chunk_number.cmp(&b.chunk.chunk.chunk_number))
    });
    let mut kept: Vec<Hit> = Vec::with_capacity(results.len());
    let mut by_text: HashMap<String, usize> = HashMap::new();
    for hit in results {
        match by_text.get(&hit.chunk.chunk.chunk_text) {
            Some(&i) => kept[i].duplicates.push(hit.chunk.chunk.id),
            None => {
                by_text.insert(hit.chunk.chunk.chunk_text.clone(), kept.len());
                kept.push(hit);
            }
        }
    }
    answer.results = kept;
}

/// The checks of a query on the world as read: the query is not blank, `hybrid` is asked of a
/// hybrid world.
fn check_read(world: &World, query: &str, settings: &Settings) -> ServiceResult<()> {
    if query.is_empty() {
        return Err(ServiceError::invalid(
            Invalid::EmptyQuery,
            "query",
            "query must contain non-whitespace text",
        ));
    }
    if settings.mode == Mode::Hybrid && !world.hybrid {
        return Err(ServiceError::invalid(
            Invalid::RetrievalSettings,
            "mode",
            "mode `hybrid` needs a world created with `hybrid: true`; this world stores dense vectors only",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::service::retrieval::Rerank;

    fn settings(top_k: u64, rerank: Option<Rerank>) -> Settings {
        Settings {
            top_k,
            min_score: 0.0,
            mode: Mode::Dense,
            expand: super::super::Expand::None,
            max_context_tokens: None,
            filter: None,
            fusion: super::super::FusionChoice::Auto,
            rerank,
            explain: false,
            hnsw_ef: None,
            background: false,
            on_run: None,
        }
    }

    #[test]
    fn sizes_clamp_to_what_is_embedded_and_fetch_more_for_a_rerank() {
        let mut answer = Retrieval::default();
        assert!(sizes(&settings(0, None), 10, &mut answer).is_none());
        assert!(answer.warnings.is_empty(), "top_k 0 is no warning");
        assert!(sizes(&settings(8, None), 0, &mut answer).is_none());
        assert_eq!(answer.warnings[0].code, WarningCode::NoEmbeddedChunks);
        let mut answer = Retrieval::default();
        let s = sizes(&settings(8, None), 5, &mut answer).unwrap();
        assert_eq!((s.limit, s.search_limit, answer.effective_top_k), (5, 5, 5));
        let rerank = Rerank {
            candidates: 50,
            top_n: Some(3),
        };
        let s = sizes(&settings(8, Some(rerank)), 20, &mut answer).unwrap();
        assert_eq!((s.limit, s.search_limit), (3, 20));
    }
}
