//! Building parents (small-to-large retrieval) for sources that have none: sources chunked
//! before parents existed, or whose parents were not written (a store outage right after the
//! upload). From the stored text and chunks only: no provider call. Run once at startup over
//! every live run, and by retrieval for the sources of its hits when it finds them without.

use crate::chunking::{ChunkSpan, parents};
use crate::domain::{RunId, SourceFormat, SourceId, WorldId};
use crate::store::{Result, Store};

/// Builds and stores the parents of `source` in `run` from its stored chunks; `false` when
/// there is nothing to build (no such source or chunks, or parents already there).
pub async fn build_from_store(
    store: &dyn Store,
    world: WorldId,
    run: RunId,
    source: SourceId,
    parent_max_tokens: u32,
) -> Result<bool> {
    let Some(text) = store.source_text(world, source).await? else {
        return Ok(false);
    };
    let format = (store.get_source(world, source).await?)
        .and_then(|s| SourceFormat::of(&s.content_type))
        .unwrap_or(SourceFormat::Plain);
    let chunks = store.chunk_windows(world, run, &[(source, 0, u32::MAX)]).await?;
    if chunks.is_empty() {
        return Ok(false);
    }
    let spans: Vec<ChunkSpan> = chunks
        .iter()
        .map(|v| ChunkSpan {
            number: v.chunk.chunk_number,
            char_start: v.chunk.char_start,
            char_end: v.chunk.char_end,
            tokens: v.chunk.token_count,
        })
        .collect();
    // Linear in the text, but a long text is still milliseconds of CPU: off the runtime.
    let built = tokio::task::spawn_blocking(move || parents(&text, format, &spans, parent_max_tokens))
        .await
        .map_err(|e| crate::store::Error::Internal(format!("building parents failed: {e}")))?;
    store.add_parents(world, run, source, &built).await
}

/// The startup pass: parents for every source of a live run that has none. Returns how many
/// sources got theirs; a source that fails is logged and left for retrieval to build.
pub async fn backfill(store: &dyn Store) -> Result<u64> {
    let mut built = 0;
    for (world, run, source, max) in store.sources_without_parents().await? {
        match build_from_store(store, world, run, source, max).await {
            Ok(true) => built += 1,
            Ok(false) => {}
            Err(err) => tracing::warn!(
                %world, %source, error = %crate::telemetry::error_chain(&err),
                "building a source's parents failed; retrieval will build them when it needs them"
            ),
        }
    }
    if built > 0 {
        tracing::info!(
            sources = built,
            "built the parents of sources chunked before parents existed"
        );
    }
    Ok(built)
}
