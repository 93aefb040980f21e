//! Embedding the query (through the key scheduler's query lane) and searching the vector store.

use tracing::Instrument as _;

use super::*;

impl RetrievalService {
    /// Embeds the query and searches the world for `limit` hits.
    pub(super) async fn embed_and_search(
        &self,
        world: &World,
        query: &str,
        limit: u64,
        mode: Mode,
        settings: &Settings,
        sources: Option<&[SourceId]>,
    ) -> ServiceResult<Found> {
        let phase = Instant::now();
        let budget = self.limits.query_budget;
        let lane = if settings.background {
            Lane::Ingest(world.id)
        } else {
            Lane::Query
        };
        let embed = self.embed_query(world, query, lane).instrument(tracing::info_span!(
            "retrieval.embed",
            provider = world.embedding.provider.as_str(),
            model = world.embedding.model.as_str()
        ));
        let vector = tokio::time::timeout(budget, embed)
            .await
            .map_err(|_| ServiceError::Provider {
                message: format!(
                    "the query was not embedded within {:.1} s (the part of server.request_timeout_s \
                     left for it): the provider is slow or unreachable, or every key is busy",
                    budget.as_secs_f64()
                ),
            })??;
        let embed_ms = ms(phase.elapsed());
        let phase = Instant::now();
        let used = match (mode, settings.fusion) {
            (Mode::Dense | Mode::Auto | Mode::Full, _) => SearchUsed::Dense,
            (Mode::Hybrid, FusionChoice::Given(fusion)) => SearchUsed::Hybrid(fusion),
            // Fusion that knows its query: BM25 pays for identifiers and rare literal terms (and
            // DBSF fuses them best on the real FAQs of `make bench-quality`); for a question in
            // plain words the dense ranking alone puts the most answer text in the context.
            (Mode::Hybrid, FusionChoice::Auto) if has_literal_terms(query) => SearchUsed::Hybrid(Fusion::Dbsf),
            (Mode::Hybrid, FusionChoice::Auto) => SearchUsed::Dense,
        };
        let plan = SearchPlan {
            used,
            limit: limit as usize,
            min_score: settings.min_score,
            sources: sources.map(<[SourceId]>::to_vec),
            hnsw_ef: settings.hnsw_ef,
        };
        let hits = self
            .search(world, query, vector.clone(), plan.clone())
            .instrument(tracing::info_span!("retrieval.search", mode = ?used))
            .await?;
        Ok(Found {
            hits,
            used,
            vector,
            plan,
            embed_ms,
            search_ms: ms(phase.elapsed()),
        })
    }

    /// `found`'s search, twice as deep: hits to stand in for those verification dropped (a
    /// source switching to a new version, or deleted, between the search and the read: its
    /// points staged or gone). Within one switch a source has at most two versions' points,
    /// so twice as deep finds every served one again.
    pub(super) async fn search_deeper(
        &self,
        world: &World,
        query: &str,
        found: &Found,
    ) -> ServiceResult<Vec<ScoredPoint>> {
        let plan = SearchPlan {
            limit: found.plan.limit.saturating_mul(2),
            ..found.plan.clone()
        };
        self.search(world, query, found.vector.clone(), plan).await
    }

    /// Embeds the query with the world's profile in query mode, in `lane` of the scheduler (the
    /// priority lane for a caller; the world's ingestion lane for background work). A key that fails (rate limit, rejection, fault) is reported to the scheduler and
    /// the next usable key is tried, a few times at most.
    async fn embed_query(&self, world: &World, query: &str, lane: Lane) -> ServiceResult<Vec<f32>> {
        let profile = &world.embedding;
        let provider = self
            .providers
            .get(profile.provider)
            .ok_or_else(|| ServiceError::Provider {
                message: format!("no {} adapter is configured in this process", profile.provider),
            })?;
        let spec = self
            .registry
            .find(profile.provider, &profile.model)
            .ok_or_else(|| ServiceError::Provider {
                message: format!(
                    "the world's model `{}` is no longer configured for {}",
                    profile.model, profile.provider
                ),
            })?;
        let limits = provider.limits(spec);
        if query.len() > MAX_QUERY_BYTES {
            return Err(ServiceError::Unprocessable {
                kind: Unprocessable::InputTooLarge,
                message: format!(
                    "the query is {} bytes long; queries of at most {MAX_QUERY_BYTES} bytes are taken",
                    query.len()
                ),
            });
        }
        let texts = vec![query.to_owned()];
        // For the scheduler's token budgets only, and never above what the model takes (a
        // query over it is refused below and must not leave the key's budget in debt).
        let estimate = u32::try_from(query.len().div_ceil(4))
            .unwrap_or(u32::MAX)
            .clamp(1, limits.max_input_tokens.max(1));
        let mut last = None;
        for _ in 0..EMBED_ATTEMPTS {
            let lease = self
                .scheduler
                .acquire(profile.provider, lane, estimate)
                .await
                .map_err(|err| match err {
                    AcquireError::RateLimited { retry_after, .. } => ServiceError::RateLimited { retry_after },
                    AcquireError::NoEligibleKey(provider) => ServiceError::conflict(
                        Conflict::NoEligibleProviderKey,
                        format!("no enabled {provider} key is available to embed the query"),
                    ),
                })?;
            let lease = if fits_uncounted(query, limits.max_input_tokens) {
                lease
            } else {
                let (lease, tokens) = match lease.count_tokens(provider.as_ref(), &profile.model, &texts).await {
                    Ok((lease, counts)) => (lease, counts[0]),
                    Err(CountFailure::WrongLength) => {
                        return Err(ServiceError::Unprocessable {
                            kind: Unprocessable::TokenCountFailed,
                            message: "the provider returned the wrong number of token counts".into(),
                        });
                    }
                    Err(CountFailure::Provider(err)) => {
                        last = Some(query_error(err)?);
                        continue;
                    }
                };
                if tokens > limits.max_input_tokens {
                    lease.finish(Outcome::Unused).await;
                    return Err(ServiceError::Unprocessable {
                        kind: Unprocessable::InputTooLarge,
                        message: format!(
                            "the query has {tokens} tokens, over the model's limit of {}",
                            limits.max_input_tokens
                        ),
                    });
                }
                lease
            };
            let request = EmbedRequest {
                model: &profile.model,
                dimensions: profile.dimensions,
                mode: EmbedMode::Query,
                texts: &texts,
                token_counts: None,
            };
            match lease.embed(provider.as_ref(), request).await {
                Ok(mut vectors) if vectors.len() == 1 && vectors[0].len() == profile.dimensions as usize => {
                    return Ok(vectors.remove(0));
                }
                Ok(_) => {
                    return Err(ServiceError::Provider {
                        message: "the provider returned a query vector of the wrong shape".into(),
                    });
                }
                Err(err) => last = Some(query_error(err)?),
            }
        }
        Err(last.unwrap_or(ServiceError::Provider {
            message: "the query could not be embedded".into(),
        }))
    }

    async fn search(
        &self,
        world: &World,
        query: &str,
        vector: Vec<f32>,
        plan: SearchPlan,
    ) -> ServiceResult<Vec<ScoredPoint>> {
        let SearchPlan {
            used,
            limit,
            min_score,
            sources,
            hnsw_ef,
        } = plan;
        let filter = PointFilter::world(world.id).run(world.active_run);
        // Always sent, 0.0 included: with cosine a hit can score below zero, and the default
        // `min_score` of 0.0 keeps such hits out. Qdrant keeps scores strictly above its
        // threshold; `min_score` keeps a score equal to it, so the threshold is the float just
        // below.
        let threshold = Some(min_score.next_down());
        let hits = match used {
            SearchUsed::Dense | SearchUsed::FullContext => {
                self.vectors
                    .search(
                        &world.collection,
                        DenseSearch {
                            hnsw_ef,
                            vector,
                            filter,
                            sources,
                            limit,
                            score_threshold: threshold,
                        },
                    )
                    .await?
            }
            SearchUsed::Hybrid(fusion) => {
                self.vectors
                    .hybrid_search(
                        &world.collection,
                        HybridSearch {
                            hnsw_ef,
                            dense: vector,
                            sparse: crate::sparse::query(query),
                            filter,
                            sources,
                            limit,
                            prefetch_limit: (limit * 2).max(MIN_PREFETCH),
                            dense_score_threshold: threshold,
                            fusion,
                        },
                    )
                    .await?
            }
        };
        Ok(hits)
    }
}

/// What one search runs: the search, how many hits, the lowest score, the sources kept.
#[derive(Clone, Debug)]
pub(super) struct SearchPlan {
    used: SearchUsed,
    limit: usize,
    min_score: f32,
    sources: Option<Vec<SourceId>>,
    hnsw_ef: Option<u32>,
}

/// Whether `query` carries literal terms a lexical match finds better than an embedding: an
/// identifier (`snake_case`, `camelCase`, `os.path`, `--flag`, `x::y`), a path (`/etc/fstab`,
/// `src/main.rs`), a token mixing letters and digits (`v2`, `rfc7231`, `0x1f`) or a quoted
/// string. Prose that only looks technical is not: acronyms (`FAQ`, `GNU`), words joined by a
/// slash (`GNU/Linux`, `stable/testing`) and capitalised compounds (`CD-ROMs`, `non-English`),
/// which the real FAQs of `make bench-quality` ask about in plain questions.
pub fn has_literal_terms(query: &str) -> bool {
    if query.contains('`') || query.matches('"').count() >= 2 {
        return true;
    }
    query.split_whitespace().any(|raw| {
        let token = raw.trim_matches(|c: char| "'\"()[]{},;:?!".contains(c));
        let token = token.trim_end_matches('.');
        if token.chars().count() < 2 {
            return false;
        }
        let letters = token.chars().filter(|c| c.is_alphabetic()).count();
        let digits = token.chars().filter(|c| c.is_ascii_digit()).count();
        let inner = |c: char| {
            token
                .char_indices()
                .any(|(i, x)| x == c && i > 0 && i + c.len_utf8() < token.len())
        };
        // A lower-case letter straight before an upper-case one: `camelCase`, `QdrantClient`.
        let chars: Vec<char> = token.chars().collect();
        let camel = !token.contains('-') && chars.windows(2).any(|w| w[0].is_lowercase() && w[1].is_uppercase());
        let path = token.starts_with('/')
            || token.starts_with("~/")
            || token.starts_with("./")
            || (token.contains('/') && token.rsplit('/').next().is_some_and(|last| last.contains('.')));
        (letters > 0 && digits > 0)
            || token.starts_with('-')
            || path
            || ["_", "::", "\\", "=", "#", "@", "$", "<", ">"].iter().any(|m| token.contains(m))
            // `os.path`, `v1.2`; not an abbreviation such as `e.g` or `U.S`.
            || (inner('.') && token.split('.').any(|part| part.chars().count() > 1))
            || camel
    })
}

/// What a failed query embedding means for the caller: `Ok` carries an error worth trying
/// another key for (the caller keeps the last one), `Err` one to return at once.
fn query_error(err: ProviderError) -> ServiceResult<ServiceError> {
    match err {
        ProviderError::RateLimited { retry_after, .. } => Ok(ServiceError::RateLimited {
            retry_after: retry_after.unwrap_or(Duration::from_secs(1)),
        }),
        ProviderError::KeyRejected { message } | ProviderError::QuotaExhausted { message } => {
            Ok(ServiceError::Provider { message })
        }
        ProviderError::Transient { message } => Ok(ServiceError::Provider { message }),
        ProviderError::InputTooLarge { tokens, limit } => Err(ServiceError::Unprocessable {
            kind: Unprocessable::InputTooLarge,
            message: format!("the query has {tokens} tokens, over the model's limit of {limit}"),
        }),
        ProviderError::TokenCountFailed { message } => Err(ServiceError::Unprocessable {
            kind: Unprocessable::TokenCountFailed,
            message: format!("the query's tokens could not be counted exactly, so it was not sent: {message}"),
        }),
        ProviderError::Permanent { message }
        | ProviderError::Malformed { message }
        | ProviderError::Unavailable { message } => Err(ServiceError::Provider { message }),
    }
}

#[cfg(test)]
mod tests {
    use super::has_literal_terms;

    #[test]
    fn questions_in_plain_words_carry_no_literal_terms() {
        for query in [
            "who rules the northern isles?",
            "How do I install the package on a new machine?",
            "What's the difference between a list and a tuple?",
            "Is it safe to delete old logs, e.g. after a week?",
            "a",
            "",
            "Où se trouve la tour de sel ?",
            "What is the FAQ about GNU/Linux?",
            "How do I move between stable/testing/unstable?",
            "Can I use CD-ROMs or non-English keyboards?",
            "HTTP keep-alive",
        ] {
            assert!(!has_literal_terms(query), "{query}");
        }
    }

    #[test]
    fn identifiers_codes_acronyms_and_quotes_are_literal_terms() {
        for query in [
            "what does max_tokens do",
            "QdrantClient timeout",
            "os.path.join on windows",
            "the --no-cache flag",
            "std::fs::read",
            "error E0063",
            "ZX81",
            "rfc7231 caching",
            "what is `top_k`",
            "where is /etc/fstab",
            "the phrase \"salt tower\"",
            "a/b testing in src/main.rs",
            "@decorator usage",
        ] {
            assert!(has_literal_terms(query), "{query}");
        }
    }
}
