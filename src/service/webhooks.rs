//! Webhook subscriptions through the API: create (the signing secret generated or given, and
//! sealed with the master key), list, read, delete, and a subscription's delivery log. The
//! deliveries themselves are written by the store when a job ends or starts waiting, and sent by
//! `workers::webhooks`.

use std::sync::Arc;

use base64::Engine as _;
use secrecy::{ExposeSecret, SecretString};

use super::{Conflict, Invalid, Missing, ServiceError, ServiceResult, optional_text};
use crate::crypto::SecretCipher;
use crate::domain::{Delivery, Webhook, WebhookEvent, WebhookId, Window, WorldId};
use crate::store::Store;

/// How many subscriptions quarry keeps: every job event is written once per subscription that
/// wants it, so their number bounds the work one event costs.
pub const MAX_WEBHOOKS: u64 = 100;

/// Longest receiver URL.
pub const MAX_URL_CHARS: usize = crate::domain::SourceUrl::MAX_CHARS;

/// The prefix of a signing secret (the Standard Webhooks format: `whsec_` and base64).
pub const SECRET_PREFIX: &str = "whsec_";

/// Bytes of a secret quarry generates; a secret given must have 24 to 64.
const SECRET_BYTES: usize = 32;

/// A subscription request, as sent.
pub struct CreateWebhook {
    pub url: String,
    pub world_id: Option<WorldId>,
    /// `None`: every event.
    pub events: Option<Vec<String>>,
    pub description: Option<String>,
    /// `None`: quarry generates one.
    pub secret: Option<SecretString>,
}

/// A new subscription and its signing secret (shown this once).
pub struct CreatedWebhook {
    pub webhook: Webhook,
    pub secret: SecretString,
}

pub struct WebhookService {
    store: Arc<dyn Store>,
    cipher: Option<SecretCipher>,
    /// Where receivers may be (`webhooks.allowed_networks` opts internal networks in).
    destinations: crate::outbound::Destinations,
}

fn invalid(field: &str, message: impl Into<String>) -> ServiceError {
    ServiceError::invalid(Invalid::Request, field, message)
}

/// A receiver URL: the rule (and OpenAPI pattern) of a source's `url` — absolute `http` or
/// `https`, a host name or IP address, no user information, at most [`MAX_URL_CHARS`].
fn receiver_url(raw: &str) -> ServiceResult<String> {
    crate::domain::SourceUrl::parse(raw)
        .map(crate::domain::SourceUrl::into_inner)
        .map_err(|message| invalid("url", message))
}

/// The events asked for, each known, none twice; `None` is every event.
fn events(raw: Option<Vec<String>>) -> ServiceResult<Vec<WebhookEvent>> {
    let Some(raw) = raw else {
        return Ok(WebhookEvent::ALL.to_vec());
    };
    if raw.is_empty() {
        return Err(invalid(
            "events",
            "events must name at least one event (or be left out for all)",
        ));
    }
    if raw.len() > WebhookEvent::ALL.len() * 4 {
        return Err(invalid("events", "events lists too many entries"));
    }
    let mut events = Vec::with_capacity(raw.len());
    for name in &raw {
        events.push(name.parse::<WebhookEvent>().map_err(|m| invalid("events", m))?);
    }
    events.sort();
    events.dedup();
    Ok(events)
}

/// The secrets taken: `whsec_` and the standard base64 (padded) of 24 to 64 bytes. The OpenAPI
/// document states this pattern, and the server matches it before decoding.
pub const SECRET_PATTERN: &str = concat!(
    r"^whsec_(?:(?:[A-Za-z0-9+/]{4}){8,20}(?:[A-Za-z0-9+/]{3}=|[A-Za-z0-9+/]{2}==)?",
    r"|(?:[A-Za-z0-9+/]{4}){21}(?:[A-Za-z0-9+/]{2}==)?)$"
);

/// The key bytes of a secret given (see [`SECRET_PATTERN`]). Unused low bits of the last
/// character are ignored, as most base64 decoders do, so that every string the pattern admits
/// is taken.
fn given_secret(secret: &SecretString) -> ServiceResult<Vec<u8>> {
    static RULE: std::sync::LazyLock<regex::Regex> =
        std::sync::LazyLock::new(|| regex::Regex::new(SECRET_PATTERN).expect("SECRET_PATTERN compiles"));
    const LENIENT: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        base64::engine::GeneralPurposeConfig::new().with_decode_allow_trailing_bits(true),
    );
    let text = secret.expose_secret();
    let bad = || {
        invalid(
            "secret",
            format!("secret must be `{SECRET_PREFIX}` followed by the padded base64 of 24 to 64 random bytes"),
        )
    };
    if text.len() > 200 || !RULE.is_match(text) {
        return Err(bad());
    }
    LENIENT.decode(&text[SECRET_PREFIX.len()..]).map_err(|_| bad())
}

/// A fresh secret: its text (shown once) and its key bytes.
fn generated_secret() -> (SecretString, Vec<u8>) {
    let bytes: [u8; SECRET_BYTES] = rand::random();
    let text = format!(
        "{SECRET_PREFIX}{}",
        base64::engine::general_purpose::STANDARD.encode(bytes)
    );
    (SecretString::from(text), bytes.to_vec())
}

impl WebhookService {
    pub fn new(deps: &crate::deps::Deps, destinations: crate::outbound::Destinations) -> Self {
        Self {
            store: deps.store.clone(),
            cipher: deps.cipher.clone(),
            destinations,
        }
    }

    pub async fn create(&self, req: CreateWebhook) -> ServiceResult<CreatedWebhook> {
        let url = receiver_url(&req.url)?;
        // An internal address is refused now; a name is checked on what it resolves to, at
        // every connection.
        let parsed = url::Url::parse(&url).map_err(|err| invalid("url", err.to_string()))?;
        self.destinations
            .check_url(&parsed)
            .map_err(|refused| ServiceError::Unprocessable {
                kind: super::Unprocessable::DestinationNotAllowed,
                message: refused.to_string(),
            })?;
        let events = events(req.events)?;
        let description = optional_text("description", req.description.as_deref())?;
        let given = req.secret.as_ref().map(given_secret).transpose()?;
        let Some(cipher) = &self.cipher else {
            return Err(ServiceError::conflict(
                Conflict::MasterKeyMissing,
                "security.master_key is not configured, so signing secrets cannot be stored encrypted; \
                 set it (32 bytes, base64)",
            ));
        };
        if let Some(world) = req.world_id
            && self.store.get_world(world).await?.is_none()
        {
            return Err(ServiceError::NotFound(Missing::World));
        }
        if self.store.count_webhooks().await? >= MAX_WEBHOOKS {
            return Err(ServiceError::conflict(
                Conflict::WebhookLimit,
                format!("{MAX_WEBHOOKS} webhook subscriptions exist already; delete one first"),
            ));
        }
        let (secret, key) = match (req.secret, given) {
            (Some(secret), Some(key)) => (secret, key),
            _ => generated_secret(),
        };
        let id = WebhookId::new();
        let sealed = cipher
            .seal_bytes(id.0.as_bytes(), &key)
            .map_err(|err| ServiceError::Internal { source: err.into() })?;
        let webhook = Webhook {
            id,
            world_id: req.world_id,
            url,
            events,
            description,
            secret_ciphertext: sealed.ciphertext,
            secret_nonce: sealed.nonce,
            created_at: crate::domain::now(),
        };
        self.store.insert_webhook(&webhook).await.map_err(|err| match err {
            // The world was deleted between the check and the insert.
            crate::store::Error::Query(_) if req.world_id.is_some() => ServiceError::NotFound(Missing::World),
            other => other.into(),
        })?;
        Ok(CreatedWebhook { webhook, secret })
    }

    pub async fn list(&self, window: Window) -> ServiceResult<Vec<Webhook>> {
        Ok(self.store.list_webhooks(window).await?)
    }

    pub async fn get(&self, id: WebhookId) -> ServiceResult<Webhook> {
        (self.store.get_webhook(id).await?).ok_or(ServiceError::NotFound(Missing::Webhook))
    }

    pub async fn delete(&self, id: WebhookId) -> ServiceResult<()> {
        if self.store.delete_webhook(id).await? {
            Ok(())
        } else {
            Err(ServiceError::NotFound(Missing::Webhook))
        }
    }

    /// A subscription's deliveries, newest first.
    pub async fn deliveries(&self, id: WebhookId, window: Window) -> ServiceResult<Vec<Delivery>> {
        self.get(id).await?;
        Ok(self.store.list_deliveries(id, window).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn receiver_urls_are_absolute_http_with_a_host() {
        assert_eq!(
            receiver_url("https://example.test/hooks?x=1").unwrap(),
            "https://example.test/hooks?x=1"
        );
        for bad in [
            "",
            "example.test/hooks",
            "ftp://example.test/",
            "file:///etc/passwd",
            "http://",
            "https://u:p@h.test/",
        ] {
            assert!(receiver_url(bad).is_err(), "{bad}");
        }
        assert!(receiver_url(&format!("https://example.test/{}", "a".repeat(MAX_URL_CHARS))).is_err());
    }

    #[test]
    fn events_default_to_all_and_unknown_ones_are_named() {
        assert_eq!(events(None).unwrap(), WebhookEvent::ALL.to_vec());
        assert_eq!(
            events(Some(vec![
                "job.failed".into(),
                "job.completed".into(),
                "job.failed".into()
            ]))
            .unwrap(),
            vec![WebhookEvent::JobCompleted, WebhookEvent::JobFailed]
        );
        assert!(events(Some(vec![])).is_err());
        let err = events(Some(vec!["job.started".into()])).unwrap_err().to_string();
        assert!(err.contains("job.started") && err.contains("job.waiting"), "{err}");
    }

    #[test]
    fn secrets_given_are_whsec_base64_of_24_to_64_bytes_and_generated_ones_are_too() {
        use base64::engine::general_purpose::STANDARD;
        let take = |s: &str| given_secret(&SecretString::from(s.to_owned()));
        for n in 0..80usize {
            let text = format!("whsec_{}", STANDARD.encode(vec![7u8; n]));
            let taken = take(&text);
            assert_eq!(taken.is_ok(), (24..=64).contains(&n), "{n} bytes");
            if let Ok(key) = taken {
                assert_eq!(key, vec![7u8; n]);
            }
        }
        // Low bits a canonical encoder leaves zero are ignored, as the pattern does not see them.
        assert_eq!(take(&format!("whsec_{}AB==", "A".repeat(32))).unwrap().len(), 25);
        assert!(take(&STANDARD.encode([1u8; 32])).is_err());
        assert!(take("whsec_not base64!").is_err());
        let (text, key) = generated_secret();
        assert_eq!(take(text.expose_secret()).unwrap(), key);
    }
}
