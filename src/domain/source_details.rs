//! What a source says about itself beyond its file: a title, the URL it came from and flat
//! string metadata. Given at upload, shown on the source and on every retrieval hit of it, and
//! matched by retrieval's `filter.metadata`. The parsers here hold the API's limits, so a value
//! that gets past them is one the store and the answers can take as it is.

use std::collections::BTreeMap;

use serde_json::Value;

/// A source's title, URL and metadata as stored: no title, no URL and `{}` for a source given
/// none (every source stored before they existed among them).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SourceDetails {
    pub title: Option<String>,
    pub url: Option<String>,
    pub metadata: Metadata,
}

/// An input value refused: the field it sits in, as a path (`metadata.lang`), and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub message: String,
}

/// A validated source title: 1..=1000 chars as sent, not only whitespace, no control characters
/// (it is one line); kept trimmed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceTitle(String);

impl SourceTitle {
    pub const MAX_CHARS: usize = 1000;

    pub fn parse(raw: &str) -> Result<Self, String> {
        if raw.trim().is_empty() {
            return Err("title must not be blank".into());
        }
        if raw.chars().count() > Self::MAX_CHARS {
            return Err(format!("title must be at most {} characters", Self::MAX_CHARS));
        }
        if raw.chars().any(char::is_control) {
            return Err("title must not contain control characters".into());
        }
        Ok(Self(raw.trim().to_owned()))
    }

    pub fn into_inner(self) -> String {
        self.0
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// A validated source URL: an absolute `http` or `https` URL of at most 2048 chars, matching
/// [`SourceUrl::PATTERN`] as sent (the OpenAPI document states the same pattern), and kept as
/// sent rather than in the parser's normal form, so that it reads back as the client wrote it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceUrl(String);

impl SourceUrl {
    pub const MAX_CHARS: usize = 2048;

    /// The URLs taken: `http://` or `https://` (any case), a host — a DNS name of ASCII labels
    /// or labels of Latin-1 letters, kana and CJK ideographs, hyphens single and inside (its
    /// last label not starting with a digit), a dotted IPv4 address, or a bracketed IPv6 address without an embedded IPv4
    /// part — an optional port (0 to 65535), then optionally a path, query or fragment of
    /// any characters but whitespace and control characters. No user information. Every URL
    /// this matches is one the URL standard parses, so the document's pattern and the
    /// server's rule are one and the same.
    pub const PATTERN: &'static str = concat!(
        r"^[Hh][Tt][Tt][Pp][Ss]?://",
        r"(?:",
        // DNS name: labels of letters and digits with single inner hyphens (never two in a
        // row: `xn--…` would be read as punycode, which such a label seldom is); the last one
        // starts with a letter (a last label of digits would be read as an IPv4 address).
        r"(?:[0-9A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u00ff\u3041-\u3096\u30a1-\u30fa\u4e00-\u9fff](?:-?[0-9A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u00ff\u3041-\u3096\u30a1-\u30fa\u4e00-\u9fff]){0,62}\.)*",
        r"[A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u00ff\u3041-\u3096\u30a1-\u30fa\u4e00-\u9fff](?:-?[0-9A-Za-z\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u00ff\u3041-\u3096\u30a1-\u30fa\u4e00-\u9fff]){0,62}",
        // IPv4, dotted decimal.
        r"|(?:(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(?:25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])",
        // IPv6 in brackets.
        r"|\[(?:(?:[0-9A-Fa-f]{1,4}:){7}[0-9A-Fa-f]{1,4}",
        r"|(?:[0-9A-Fa-f]{1,4}:){1,7}:",
        r"|(?:[0-9A-Fa-f]{1,4}:){1,6}:[0-9A-Fa-f]{1,4}",
        r"|(?:[0-9A-Fa-f]{1,4}:){1,5}(?::[0-9A-Fa-f]{1,4}){1,2}",
        r"|(?:[0-9A-Fa-f]{1,4}:){1,4}(?::[0-9A-Fa-f]{1,4}){1,3}",
        r"|(?:[0-9A-Fa-f]{1,4}:){1,3}(?::[0-9A-Fa-f]{1,4}){1,4}",
        r"|(?:[0-9A-Fa-f]{1,4}:){1,2}(?::[0-9A-Fa-f]{1,4}){1,5}",
        r"|[0-9A-Fa-f]{1,4}:(?::[0-9A-Fa-f]{1,4}){1,6}",
        r"|:(?:(?::[0-9A-Fa-f]{1,4}){1,7}|:))\]",
        r")",
        // Port.
        r"(?::(?:[0-9]{1,4}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])?)?",
        // Path, query, fragment: no whitespace, no control characters.
        r"(?:[/?#][^\u0000-\u0020\u007f-\u00a0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]*)?$",
    );

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn parse(raw: &str) -> Result<Self, String> {
        static RULE: std::sync::LazyLock<regex::Regex> =
            std::sync::LazyLock::new(|| regex::Regex::new(SourceUrl::PATTERN).expect("SourceUrl::PATTERN compiles"));
        const WANTED: &str = "url must be an absolute http or https URL with a host name or IP address and no user \
                              information, spaces or control characters, e.g. `https://example.com/page`";
        if raw.trim().is_empty() {
            return Err("url must not be blank".into());
        }
        // Counted before matching, so the matcher never sees more than the limit.
        if raw.chars().count() > Self::MAX_CHARS {
            return Err(format!("url must be at most {} characters", Self::MAX_CHARS));
        }
        if !RULE.is_match(raw) {
            return Err(WANTED.into());
        }
        // The pattern admits only what the URL standard parses; checked all the same.
        url::Url::parse(raw).map_err(|err| format!("{WANTED} ({err})"))?;
        Ok(Self(raw.to_owned()))
    }

    pub fn into_inner(self) -> String {
        self.0
    }
}

/// Flat string metadata: at most 64 keys of 1 to 64 characters from `A–Z a–z 0–9 _ . -`, each
/// with a string value of at most 1024 characters. Keys are kept sorted.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(transparent)]
pub struct Metadata(BTreeMap<String, String>);

impl Metadata {
    pub const MAX_KEYS: usize = 64;
    pub const MAX_KEY_CHARS: usize = 64;
    pub const MAX_VALUE_CHARS: usize = 1024;

    /// `value` as metadata, or why not. `field` is where the value sits in the request
    /// (`metadata`, `filter.metadata`): a refusal names it, or `{field}.{key}` for a bad value
    /// of a well-formed key. Every limit is checked before anything is copied, so a refusal
    /// costs no more than reading the request did.
    pub fn parse(value: &Value, field: &str) -> Result<Self, FieldError> {
        let refuse = |field: String, message: String| FieldError { field, message };
        let Value::Object(map) = value else {
            return Err(refuse(
                field.into(),
                format!("{field} must be a JSON object of string values"),
            ));
        };
        if map.len() > Self::MAX_KEYS {
            return Err(refuse(
                field.into(),
                format!("{field} must have at most {} keys, not {}", Self::MAX_KEYS, map.len()),
            ));
        }
        for (key, value) in map {
            if !Self::is_key(key) {
                return Err(refuse(
                    field.into(),
                    format!(
                        "{field} keys must be 1 to {} characters of A-Z, a-z, 0-9, `_`, `.` and `-`; `{}` is not",
                        Self::MAX_KEY_CHARS,
                        shortened(key)
                    ),
                ));
            }
            let path = format!("{field}.{key}");
            let Value::String(text) = value else {
                return Err(refuse(path.clone(), format!("{path} must be a string")));
            };
            if text.chars().count() > Self::MAX_VALUE_CHARS {
                return Err(refuse(
                    path.clone(),
                    format!("{path} must be at most {} characters", Self::MAX_VALUE_CHARS),
                ));
            }
        }
        Ok(Self(
            map.iter()
                .map(|(key, value)| (key.clone(), value.as_str().unwrap_or_default().to_owned()))
                .collect(),
        ))
    }

    fn is_key(key: &str) -> bool {
        (1..=Self::MAX_KEY_CHARS).contains(&key.len())
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
    }

    pub fn get(&self, key: &str) -> Option<&str> {
        self.0.get(key).map(String::as_str)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.0.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Whether `other` has every key of this one, each with exactly the same value: this as a
    /// retrieval filter, `other` a source's metadata.
    pub fn is_within(&self, other: &Metadata) -> bool {
        self.iter().all(|(key, value)| other.get(key) == Some(value))
    }

    /// As the store keeps it: a JSON object, keys sorted.
    pub fn to_json(&self) -> String {
        serde_json::to_string(&self.0).unwrap_or_else(|_| "{}".into())
    }

    /// From the store's JSON text (written by [`Metadata::to_json`], so not checked against the
    /// limits again).
    pub fn from_json(text: &str) -> Result<Self, String> {
        serde_json::from_str(text)
            .map(Self)
            .map_err(|err| format!("metadata is not a JSON object of strings: {err}"))
    }

    pub fn into_map(self) -> BTreeMap<String, String> {
        self.0
    }
}

/// At most the first 64 characters of `text`, marked when cut: a refused key is quoted in the
/// message, and it may be long.
fn shortened(text: &str) -> String {
    match text.char_indices().nth(Metadata::MAX_KEY_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn titles_are_trimmed_and_bounded() {
        assert_eq!(
            SourceTitle::parse("  The Isles ").map(SourceTitle::into_inner),
            Ok("The Isles".to_owned())
        );
        assert!(SourceTitle::parse(" \t ").is_err());
        assert!(SourceTitle::parse(&"é".repeat(1000)).is_ok());
        assert!(SourceTitle::parse(&"é".repeat(1001)).is_err());
        assert!(SourceTitle::parse("a\nb").is_err());
        assert!(SourceTitle::parse("a\u{0}b").is_err());
    }

    #[test]
    fn urls_are_absolute_http_and_kept_as_sent() {
        for ok in [
            "https://example.com",
            "http://example.com:8080/a/b?c=d#e",
            "HTTPS://Example.COM/Path",
            "https://[::1]/x",
            "https://例え.jp/ページ",
            "http://127.0.0.1:0/",
            "https://a.b-c.d9/?q=ü#frag",
            "https://example.com:/",
        ] {
            assert_eq!(
                SourceUrl::parse(ok).map(SourceUrl::into_inner),
                Ok(ok.to_owned()),
                "{ok}"
            );
        }
        for bad in [
            // Checked as sent: surrounding whitespace is refused, not trimmed.
            " https://example.com/ ",
            "https://user:secret@example.com/",
            "https://1.2.3.999/",
            "https://example.com:65536/",
            "https://%zz/",
            "",
            "example.com",
            "/relative/path",
            "ftp://example.com/file",
            "mailto:someone@example.com",
            "file:///etc/passwd",
            "http:example.com",
            "https://",
            "https://exa mple.com",
            "https://example.com/a\tb",
            "javascript:alert(1)",
        ] {
            assert!(SourceUrl::parse(bad).is_err(), "{bad}");
        }
        let long = format!("https://example.com/{}", "a".repeat(SourceUrl::MAX_CHARS));
        assert!(SourceUrl::parse(&long[..SourceUrl::MAX_CHARS]).is_ok());
        assert!(SourceUrl::parse(&long[..SourceUrl::MAX_CHARS + 1]).is_err());
    }

    #[test]
    fn every_url_the_pattern_takes_parses() {
        use proptest::prelude::*;
        use proptest::string::string_regex;
        // The `regex` syntax without the anchors, which proptest's generator does not take.
        let pattern = SourceUrl::PATTERN.trim_start_matches('^').trim_end_matches('$');
        let urls = string_regex(pattern).unwrap();
        proptest!(ProptestConfig::with_cases(2000), |(url in urls)| {
            prop_assert!(url::Url::parse(&url).is_ok(), "{url:?}");
        });
    }

    #[test]
    fn metadata_is_a_flat_object_of_bounded_strings() {
        let parsed = Metadata::parse(
            &json!({"lang": "en", "a.b-c_D9": "", "z": "ü".repeat(1024)}),
            "metadata",
        )
        .unwrap();
        assert_eq!(parsed.len(), 3);
        assert_eq!(parsed.get("lang"), Some("en"));
        assert_eq!(Metadata::parse(&json!({}), "metadata"), Ok(Metadata::default()));

        let field = |value: Value| Metadata::parse(&value, "filter.metadata").unwrap_err().field;
        assert_eq!(field(json!(["en"])), "filter.metadata");
        assert_eq!(field(json!("en")), "filter.metadata");
        assert_eq!(field(json!({"lang": 1})), "filter.metadata.lang");
        assert_eq!(field(json!({"lang": null})), "filter.metadata.lang");
        assert_eq!(field(json!({"lang": {"x": "y"}})), "filter.metadata.lang");
        assert_eq!(field(json!({"lang": "x".repeat(1025)})), "filter.metadata.lang");
        let long_key = "k".repeat(65);
        for key in ["", "has space", "ключ", "a/b", "a:b", long_key.as_str()] {
            assert_eq!(field(json!({ key: "v" })), "filter.metadata", "{key:?}");
        }
        assert!(Metadata::parse(&json!({ "k".repeat(64): "v" }), "m").is_ok());
        let many: serde_json::Map<String, Value> = (0..65).map(|i| (format!("k{i}"), json!("v"))).collect();
        assert_eq!(field(Value::Object(many.clone())), "filter.metadata");
        let most: serde_json::Map<String, Value> = many.into_iter().take(64).collect();
        assert_eq!(Metadata::parse(&Value::Object(most), "m").unwrap().len(), 64);

        // A long bad key is quoted cut short.
        let message = Metadata::parse(&json!({ "é ".repeat(5000): "v" }), "metadata")
            .unwrap_err()
            .message;
        assert!(message.chars().count() < 300, "{message}");
    }

    #[test]
    fn metadata_round_trips_through_json_and_matches_as_a_filter() {
        let source = Metadata::parse(&json!({"lang": "en", "kind": "faq", "quote": "say \"hi\"\n"}), "m").unwrap();
        assert_eq!(source.to_json(), r#"{"kind":"faq","lang":"en","quote":"say \"hi\"\n"}"#);
        assert_eq!(Metadata::from_json(&source.to_json()), Ok(source.clone()));
        assert_eq!(Metadata::from_json("{}"), Ok(Metadata::default()));
        assert!(Metadata::from_json("[]").is_err());

        let filter = |v: Value| Metadata::parse(&v, "filter.metadata").unwrap();
        assert!(filter(json!({"lang": "en"})).is_within(&source));
        assert!(filter(json!({"lang": "en", "kind": "faq"})).is_within(&source));
        assert!(!filter(json!({"lang": "en", "kind": "guide"})).is_within(&source));
        assert!(
            !filter(json!({"lang": "EN"})).is_within(&source),
            "values match exactly"
        );
        assert!(
            !filter(json!({"missing": ""})).is_within(&source),
            "a key must be there"
        );
        assert!(Metadata::default().is_within(&Metadata::default()));
    }
}
