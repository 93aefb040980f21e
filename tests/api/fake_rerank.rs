//! A fake reranking server (`POST /rerank`, the common wire format): it scores each document
//! by the share of the query's words it contains, and records every call. It can be told to
//! fail or to be slow, and to require a bearer key.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::post;
use axum::{Json, Router};
use serde_json::{Value, json};

#[derive(Clone, Debug, Default)]
pub struct RerankCall {
    pub query: String,
    pub documents: Vec<String>,
    pub top_n: Option<u64>,
    pub model: Option<String>,
    pub authorization: Option<String>,
}

#[derive(Default)]
struct Inner {
    calls: Vec<RerankCall>,
    key: Option<String>,
    fail: Option<StatusCode>,
    latency: Duration,
}

#[derive(Clone, Default)]
struct Shared(Arc<Mutex<Inner>>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

pub struct FakeRerank {
    shared: Shared,
    base_url: String,
}

fn words(text: &str) -> HashSet<String> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect()
}

/// The share of the query's words found in `document`.
pub fn overlap(query: &str, document: &str) -> f32 {
    let query = words(query);
    let document = words(document);
    if query.is_empty() {
        return 0.0;
    }
    query.intersection(&document).count() as f32 / query.len() as f32
}

async fn rerank(
    State(shared): State<Shared>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> (StatusCode, Json<Value>) {
    let call = RerankCall {
        query: body["query"].as_str().unwrap_or_default().to_owned(),
        documents: body["documents"]
            .as_array()
            .map(|d| d.iter().filter_map(|t| t.as_str().map(str::to_owned)).collect())
            .unwrap_or_default(),
        top_n: body["top_n"].as_u64(),
        model: body["model"].as_str().map(str::to_owned),
        authorization: headers
            .get("authorization")
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned),
    };
    let (latency, fail, key) = {
        let mut inner = shared.lock();
        inner.calls.push(call.clone());
        (inner.latency, inner.fail, inner.key.clone())
    };
    tokio::time::sleep(latency).await;
    if let Some(status) = fail {
        return (status, Json(json!({"message": "the reranker is overloaded"})));
    }
    if let Some(key) = key
        && call.authorization.as_deref() != Some(&format!("Bearer {key}"))
    {
        return (StatusCode::UNAUTHORIZED, Json(json!({"message": "invalid api key"})));
    }
    let mut scored: Vec<(usize, f32)> = call
        .documents
        .iter()
        .enumerate()
        .map(|(i, d)| (i, overlap(&call.query, d)))
        .collect();
    scored.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    scored.truncate(call.top_n.map_or(usize::MAX, |n| n as usize));
    let results: Vec<Value> = scored
        .into_iter()
        .map(|(index, score)| json!({"index": index, "relevance_score": score}))
        .collect();
    (StatusCode::OK, Json(json!({"results": results})))
}

impl FakeRerank {
    pub async fn start() -> Self {
        let shared = Shared::default();
        let router = Router::new().route("/rerank", post(rerank)).with_state(shared.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move {
            let _ = axum::serve(listener, router).await;
        });
        Self {
            shared,
            base_url: format!("http://{addr}"),
        }
    }

    pub fn base_url(&self) -> String {
        self.base_url.clone()
    }

    pub fn require_key(&self, key: &str) {
        self.shared.lock().key = Some(key.to_owned());
    }

    pub fn fail_with(&self, status: Option<StatusCode>) {
        self.shared.lock().fail = status;
    }

    pub fn set_latency(&self, latency: Duration) {
        self.shared.lock().latency = latency;
    }

    pub fn calls(&self) -> Vec<RerankCall> {
        self.shared.lock().calls.clone()
    }
}
