//! Worlds and their locked profiles.

use std::fmt;
use std::str::FromStr;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use super::ids::{RunId, WorldId};

/// Which family of API a profile (or a key) talks to: the embedding providers, and the
/// reranker (`rerank`: keys only, no embedding models).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ProviderKind {
    /// Google AI Studio (Gemini API).
    Google,
    /// OpenAI and OpenAI-compatible servers.
    #[serde(rename = "openai")]
    OpenAi,
    /// The built-in local model.
    Local,
    /// A reranking server speaking the common `/rerank` wire format.
    Rerank,
}

impl ProviderKind {
    pub const ALL: [ProviderKind; 3] = [ProviderKind::Google, ProviderKind::OpenAi, ProviderKind::Local];

    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Google => "google",
            ProviderKind::OpenAi => "openai",
            ProviderKind::Local => "local",
            ProviderKind::Rerank => "rerank",
        }
    }

    /// Whether embedding through this provider needs an API key.
    pub fn needs_key(self) -> bool {
        match self {
            ProviderKind::Google | ProviderKind::OpenAi | ProviderKind::Rerank => true,
            ProviderKind::Local => false,
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ProviderKind {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "google" => Ok(ProviderKind::Google),
            "openai" => Ok(ProviderKind::OpenAi),
            "local" => Ok(ProviderKind::Local),
            "rerank" => Ok(ProviderKind::Rerank),
            other => Err(format!(
                "unknown provider `{other}` (expected google, openai, local or rerank)"
            )),
        }
    }
}

/// The embedding profile a world is locked to. Distance is always cosine.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EmbeddingProfile {
    pub provider: ProviderKind,
    pub model: String,
    pub dimensions: u32,
}

impl EmbeddingProfile {
    /// Name of the Qdrant collection holding this profile's chunk vectors.
    ///
    /// Every world with the same profile shares the collection (filtered by `world_id`, a
    /// tenant index). The `chunks_` namespace leaves `nodes_` free for graph-node vectors.
    pub fn collection_name(&self) -> String {
        let model: String = self
            .model
            .chars()
            .map(|c| match c {
                'a'..='z' | '0'..='9' | '-' => c,
                'A'..='Z' => c.to_ascii_lowercase(),
                _ => '_',
            })
            .collect();
        format!("chunks_{}_{}_{}", self.provider.as_str(), model, self.dimensions)
    }
}

/// How a world's sources are split into chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ChunkingProfile {
    pub max_tokens: u32,
    pub overlap_tokens: u32,
    /// The most tokens a parent (a run of consecutive chunks, for small-to-large retrieval)
    /// holds; at least `max_tokens`. Parents are not embedded: this does not touch vectors.
    pub parent_max_tokens: u32,
    /// Whether each chunk is embedded with its source's title and section path before its
    /// text (the stored text is unchanged). Changes every vector: part of the locked profile.
    pub context_prefix: bool,
}

impl ChunkingProfile {
    /// Smallest chunk size accepted: below this, chunks stop carrying a sentence.
    pub const MIN_MAX_TOKENS: u32 = 16;

    /// The most tokens a context prefix takes; a world with prefixes keeps its chunks this
    /// much under the model's limit.
    pub const CONTEXT_PREFIX_MAX_TOKENS: u32 = 48;

    /// `parent_max_tokens` when none is given: four chunks' worth.
    #[must_use]
    pub fn default_parent_max_tokens(max_tokens: u32) -> u32 {
        max_tokens.saturating_mul(4)
    }
}

/// A world as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct World {
    pub id: WorldId,
    pub name: String,
    pub embedding: EmbeddingProfile,
    pub chunking: ChunkingProfile,
    pub hybrid: bool,
    /// The run retrieval serves. Ingestion into the world appends to it; a re-ingest builds a
    /// new run and switches this id when it completes.
    pub active_run: RunId,
    pub collection: String,
    pub created_at: DateTime<Utc>,
    pub updated_at: DateTime<Utc>,
}

/// What `create_world` needs; ids and timestamps are assigned by the caller so they are known
/// before anything is written.
#[derive(Clone, Debug)]
pub struct NewWorld {
    pub id: WorldId,
    pub name: String,
    pub embedding: EmbeddingProfile,
    pub chunking: ChunkingProfile,
    pub hybrid: bool,
    pub run: RunId,
    pub now: DateTime<Utc>,
}

/// Counts shown with a world.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WorldStats {
    pub sources: u64,
    pub chunks: u64,
    pub embedded: u64,
    pub pending: u64,
    pub failed: u64,
}

/// A validated world name: 1..=200 chars as sent, not only whitespace, no control characters;
/// kept trimmed. The limits apply to the value as sent, which is what the OpenAPI document's
/// `maxLength` and `pattern` describe.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorldName(String);

impl WorldName {
    pub const MAX_CHARS: usize = 200;

    pub fn parse(raw: &str) -> Result<Self, String> {
        if raw.trim().is_empty() {
            return Err("name must not be blank".into());
        }
        if raw.chars().count() > Self::MAX_CHARS {
            return Err(format!("name must be at most {} characters", Self::MAX_CHARS));
        }
        if raw.chars().any(char::is_control) {
            return Err("name must not contain control characters".into());
        }
        Ok(Self(raw.trim().to_owned()))
    }

    pub fn into_inner(self) -> String {
        self.0
    }
}

/// The OpenAI models quarry knows without configuration, by name (the model registry holds
/// their limits). Configuration checks its own models against these names.
pub const BUILTIN_OPENAI_MODELS: [&str; 2] = ["text-embedding-3-small", "text-embedding-3-large"];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn collection_names_are_safe_and_profile_specific() {
        let p = EmbeddingProfile {
            provider: ProviderKind::Local,
            model: "all-MiniLM-L6-v2".into(),
            dimensions: 384,
        };
        assert_eq!(p.collection_name(), "chunks_local_all-minilm-l6-v2_384");
        let q = EmbeddingProfile {
            provider: ProviderKind::OpenAi,
            model: "org/model.v1".into(),
            dimensions: 8,
        };
        assert_eq!(q.collection_name(), "chunks_openai_org_model_v1_8");
    }

    #[test]
    fn world_names_are_trimmed_and_bounded() {
        assert_eq!(
            WorldName::parse("  Aerth ").map(WorldName::into_inner),
            Ok("Aerth".to_owned())
        );
        assert!(WorldName::parse("   ").is_err());
        assert!(WorldName::parse(&"x".repeat(201)).is_err());
        assert!(WorldName::parse("a\u{0}b").is_err());
    }
}
