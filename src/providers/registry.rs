//! The model registry: which embedding models quarry knows, their dimensions and limits.
//! World creation validates profiles against it and `GET /v1/models` lists it. The registry
//! knows nothing of configuration: `config` turns each model it declares into a [`ModelSpec`].

use super::local::{self, LocalModel};
use crate::domain::{BUILTIN_OPENAI_MODELS, ProviderKind};

/// One embedding model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelSpec {
    pub provider: ProviderKind,
    pub model: String,
    pub default_dimensions: u32,
    /// Inclusive range of output sizes the model can produce.
    pub min_dimensions: u32,
    pub max_dimensions: u32,
    /// Exact limit per input text, in the provider's own tokens.
    pub max_input_tokens: u32,
    /// How the provider is told an input is a query / a document (`None`: symmetric model).
    pub query_mode: Option<&'static str>,
    pub document_mode: Option<&'static str>,
}

impl ModelSpec {
    /// A model served by an OpenAI-compatible server: `dimensions` its native output size,
    /// any smaller size too when `dimensions_adjustable` (the server takes the `dimensions`
    /// request field).
    pub fn openai_compatible(name: &str, dimensions: u32, max_input_tokens: u32, dimensions_adjustable: bool) -> Self {
        ModelSpec {
            provider: ProviderKind::OpenAi,
            model: name.to_owned(),
            default_dimensions: dimensions,
            min_dimensions: if dimensions_adjustable { 1 } else { dimensions },
            max_dimensions: dimensions,
            max_input_tokens,
            query_mode: None,
            document_mode: None,
        }
    }

    pub fn allows_dimensions(&self, dimensions: u32) -> bool {
        (self.min_dimensions..=self.max_dimensions).contains(&dimensions)
    }

    /// Most tokens a chunk may have as the splitter counts them. The local model's limit
    /// includes the `[CLS]` and `[SEP]` it adds, which its chunks are counted without; every
    /// other count is of the text alone.
    pub fn max_chunk_tokens(&self) -> u32 {
        match self.provider {
            ProviderKind::Local => self.max_input_tokens.min(local::MAX_CHUNK_TOKENS),
            _ => self.max_input_tokens,
        }
    }
}

/// Built-in models plus the OpenAI-compatible ones declared in configuration.
#[derive(Clone, Debug)]
pub struct ModelRegistry {
    models: Vec<ModelSpec>,
}

impl ModelRegistry {
    /// The built-in models alone.
    pub fn builtin() -> Self {
        Self::new([])
    }

    /// The built-in models plus `extra` ones (a model already known by the same provider and
    /// name is not added twice).
    pub fn new(extra: impl IntoIterator<Item = ModelSpec>) -> Self {
        let mut models = vec![
            ModelSpec {
                provider: ProviderKind::Google,
                model: "gemini-embedding-001".into(),
                default_dimensions: 3072,
                min_dimensions: 128,
                max_dimensions: 3072,
                max_input_tokens: 2048,
                query_mode: Some("RETRIEVAL_QUERY"),
                document_mode: Some("RETRIEVAL_DOCUMENT"),
            },
            ModelSpec {
                provider: ProviderKind::OpenAi,
                model: BUILTIN_OPENAI_MODELS[0].into(),
                default_dimensions: 1536,
                min_dimensions: 1,
                max_dimensions: 1536,
                max_input_tokens: 8192,
                query_mode: None,
                document_mode: None,
            },
            ModelSpec {
                provider: ProviderKind::OpenAi,
                model: BUILTIN_OPENAI_MODELS[1].into(),
                default_dimensions: 3072,
                min_dimensions: 1,
                max_dimensions: 3072,
                max_input_tokens: 8192,
                query_mode: None,
                document_mode: None,
            },
        ];
        // The local provider's two models: all-MiniLM-L6-v2 and the same graph with int8 weights.
        // Both read 256 tokens and give 384 dimensions; their vectors differ, so a world's
        // profile names one or the other.
        models.extend(LocalModel::ALL.into_iter().map(|local| ModelSpec {
            provider: ProviderKind::Local,
            model: local.name().into(),
            default_dimensions: local::DIMENSIONS,
            min_dimensions: local::DIMENSIONS,
            max_dimensions: local::DIMENSIONS,
            max_input_tokens: local::MAX_INPUT_TOKENS,
            query_mode: None,
            document_mode: None,
        }));
        for spec in extra {
            if !models
                .iter()
                .any(|m| m.provider == spec.provider && m.model == spec.model)
            {
                models.push(spec);
            }
        }
        Self { models }
    }

    pub fn all(&self) -> &[ModelSpec] {
        &self.models
    }

    pub fn find(&self, provider: ProviderKind, model: &str) -> Option<&ModelSpec> {
        self.models.iter().find(|m| m.provider == provider && m.model == model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_models_have_the_documented_limits() {
        let r = ModelRegistry::builtin();
        let g = r.find(ProviderKind::Google, "gemini-embedding-001").unwrap();
        assert_eq!((g.default_dimensions, g.max_input_tokens), (3072, 2048));
        assert!(g.allows_dimensions(128) && g.allows_dimensions(768) && !g.allows_dimensions(127));
        assert_eq!(
            r.find(ProviderKind::OpenAi, "text-embedding-3-large")
                .unwrap()
                .default_dimensions,
            3072
        );
        for name in ["all-MiniLM-L6-v2", "all-MiniLM-L6-v2-int8"] {
            let l = r.find(ProviderKind::Local, name).unwrap();
            assert_eq!((l.default_dimensions, l.max_input_tokens), (384, 256));
            assert!(!l.allows_dimensions(128));
        }
    }

    #[test]
    fn extra_models_come_from_configuration() {
        let extra = ModelSpec::openai_compatible("nomic-embed-text", 768, 2048, false);
        let r = ModelRegistry::new([extra]);
        let m = r.find(ProviderKind::OpenAi, "nomic-embed-text").unwrap();
        assert!(m.allows_dimensions(768) && !m.allows_dimensions(512));
    }
}
