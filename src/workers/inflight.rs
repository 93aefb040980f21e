//! Texts being embedded in this process right now, so that a text two claims hold at once (two
//! worlds uploading the same pages, a replace racing an upload) is sent to the provider once.
//!
//! A claim registers each text it is about to send as its *lead*, keyed by the collection (so
//! the profile), the reuse scope (the world, unless `embedding.reuse = "global"`) and the text's
//! sha256. A claim that finds a text already led *follows* it: it sends the rest of its items,
//! then waits for the leader's vector and writes that on its own point, counted as reused. A
//! leader publishes each vector once its entry is marked embedded (so the store's reuse finds
//! it from then on) and lets go of every lead when its own sending ends, published or not; a
//! follower whose leader let go without a vector looks for it in the store and otherwise sends
//! the text itself. Waiting only ever happens after a claim's own sending, so two claims that
//! follow each other cannot wait on each other.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

use crate::domain::{WorkItem, WorldId};

/// One text in one reuse scope.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Text {
    collection: String,
    /// The world, when reuse stays within one.
    world: Option<WorldId>,
    sha256: String,
}

/// A leader's vector, once it has one.
type Vector = Option<Arc<Vec<f32>>>;

/// The texts being sent by claims of this process.
#[derive(Default)]
pub struct InFlight {
    texts: Mutex<HashMap<Text, watch::Receiver<Vector>>>,
}

/// A text this claim follows: the leader's channel.
pub struct Follow {
    pub item: WorkItem,
    vector: watch::Receiver<Vector>,
}

impl Follow {
    /// The leader's vector, once published; `None` when the leader let go without one or
    /// `patience` ran out.
    pub async fn vector(mut self, patience: std::time::Duration) -> (WorkItem, Option<Vec<f32>>) {
        let published = tokio::time::timeout(patience, self.vector.wait_for(Option::is_some)).await;
        let vector = match published {
            Ok(Ok(vector)) => vector.as_ref().map(|v| v.as_ref().clone()),
            _ => None,
        };
        (self.item, vector)
    }
}

/// The texts one claim leads; dropping it lets go of every one of them.
pub struct Leads {
    registry: Arc<InFlight>,
    senders: HashMap<Text, watch::Sender<Vector>>,
    scope_world: bool,
}

impl InFlight {
    /// Splits a claim's `items` into those it sends (registered as its leads) and those another
    /// claim of this process is sending already. `scope_world`: reuse stays within the world.
    pub fn split(self: &Arc<Self>, items: Vec<WorkItem>, scope_world: bool) -> (Vec<WorkItem>, Vec<Follow>, Leads) {
        let mut leads = Leads {
            registry: self.clone(),
            senders: HashMap::new(),
            scope_world,
        };
        let (mut sending, mut following) = (Vec::new(), Vec::new());
        let mut texts = self.texts.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        for item in items {
            let text = leads.text_of(&item);
            match texts.get(&text) {
                Some(vector) => following.push(Follow {
                    vector: vector.clone(),
                    item,
                }),
                None => {
                    let (sender, receiver) = watch::channel(None);
                    texts.insert(text.clone(), receiver);
                    leads.senders.insert(text, sender);
                    sending.push(item);
                }
            }
        }
        (sending, following, leads)
    }
}

impl Leads {
    fn text_of(&self, item: &WorkItem) -> Text {
        Text {
            collection: item.collection.clone(),
            world: self.scope_world.then_some(item.world_id),
            sha256: item.text_sha256.clone(),
        }
    }

    /// Hands `vector`, the embedding of `item`'s text, to every claim following it.
    pub fn publish(&self, item: &WorkItem, vector: &[f32]) {
        if let Some(sender) = self.senders.get(&self.text_of(item)) {
            sender.send_replace(Some(Arc::new(vector.to_vec())));
        }
    }
}

impl Drop for Leads {
    fn drop(&mut self) {
        let mut texts = self
            .registry
            .texts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (text, sender) in self.senders.drain() {
            if texts.get(&text).is_some_and(|r| r.same_channel(&sender.subscribe())) {
                texts.remove(&text);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(world: WorldId, sha: &str) -> WorkItem {
        use crate::domain::{ChunkId, EmbeddingProfile, JobId, ProviderKind, RunId, SourceId};
        WorkItem {
            chunk_id: ChunkId::new(),
            point_id: uuid::Uuid::new_v4(),
            job_id: JobId::new(),
            run_id: RunId::new(),
            world_id: world,
            source_id: SourceId::new(),
            book_number: 1,
            chunk_number: 0,
            token_count: 3,
            chunk_text: sha.to_owned(),
            text_sha256: sha.to_owned(),
            attempts: 0,
            profile: EmbeddingProfile {
                provider: ProviderKind::Google,
                model: "m".into(),
                dimensions: 2,
            },
            collection: "c".into(),
            hybrid: false,
            staged: false,
        }
    }

    #[tokio::test]
    async fn a_text_led_once_is_followed_and_gets_the_leaders_vector() {
        let registry = Arc::new(InFlight::default());
        let (a, b) = (WorldId::new(), WorldId::new());
        let (sending, following, leads) = registry.split(vec![item(a, "x"), item(a, "y")], false);
        assert_eq!((sending.len(), following.len()), (2, 0));
        // Another world's claim, reuse global: both texts are followed.
        let (sending2, following2, _leads2) = registry.split(vec![item(b, "x"), item(b, "z")], false);
        assert_eq!(sending2.len(), 1);
        assert_eq!(following2.len(), 1);
        // Reuse within a world: another world's claim leads its own.
        let (sending3, _, _leads3) = registry.split(vec![item(b, "x")], true);
        assert_eq!(sending3.len(), 1);
        leads.publish(&sending[0], &[1.0, 2.0]);
        let follow = following2.into_iter().next().unwrap();
        let (_, vector) = follow.vector(std::time::Duration::from_secs(1)).await;
        assert_eq!(vector, Some(vec![1.0, 2.0]));
    }

    #[tokio::test]
    async fn a_leader_that_lets_go_without_a_vector_releases_its_followers_and_the_text() {
        let registry = Arc::new(InFlight::default());
        let w = WorldId::new();
        let (_, _, leads) = registry.split(vec![item(w, "x")], true);
        let (_, following, _other) = registry.split(vec![item(w, "x")], true);
        drop(leads);
        let (_, vector) = following
            .into_iter()
            .next()
            .unwrap()
            .vector(std::time::Duration::from_secs(5))
            .await;
        assert_eq!(vector, None);
        let (sending, following, _) = registry.split(vec![item(w, "x")], true);
        assert_eq!((sending.len(), following.len()), (1, 0), "the text is free again");
    }
}
