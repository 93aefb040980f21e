//! Conditions on a source's metadata beyond exact matches, as Dify's External Knowledge API
//! sends them (`metadata_condition`): each names one or more metadata keys and a comparison;
//! the list holds when all (`and`) or any (`or`) of its conditions hold.
//!
//! # Decisions
//! - **Metadata values are text.** Text comparisons (`is`, `contains`, `start with`, ...) are
//!   exact and case-sensitive. Numeric ones (`=`, `>`, ...) read both sides as numbers, dates
//!   (`before`, `after`) as RFC 3339 times or `YYYY-MM-DD` dates; a stored value that does not
//!   read so does not match, while a condition value that does not is refused.
//! - **A missing key** is empty: `empty` holds, the negations (`is not`, `not in`,
//!   `not contains`) hold, every other comparison does not.
//! - **Several names** (Dify's older form sends a list): the condition holds when it holds for
//!   any of them.

use chrono::{DateTime, NaiveDate, Utc};
use serde_json::Value;

use crate::domain::Metadata;

/// The most conditions one list takes.
pub const MAX_CONDITIONS: usize = 64;

/// A comparison with its value, parsed.
#[derive(Clone, Debug, PartialEq)]
pub enum Comparison {
    Is(String),
    IsNot(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Contains(String),
    NotContains(String),
    StartsWith(String),
    EndsWith(String),
    Empty,
    NotEmpty,
    Equal(f64),
    NotEqual(f64),
    Greater(f64),
    Less(f64),
    AtLeast(f64),
    AtMost(f64),
    Before(DateTime<Utc>),
    After(DateTime<Utc>),
}

/// Every operator [`Comparison::parse`] takes, as sent.
pub const OPERATORS: &[&str] = &[
    "is",
    "is not",
    "in",
    "not in",
    "contains",
    "not contains",
    "start with",
    "end with",
    "empty",
    "not empty",
    "=",
    "≠",
    "!=",
    ">",
    "<",
    "≥",
    ">=",
    "≤",
    "<=",
    "before",
    "after",
];

fn text(value: Option<&Value>, op: &str) -> Result<String, String> {
    match value {
        Some(Value::String(s)) => Ok(s.clone()),
        Some(Value::Number(n)) => Ok(n.to_string()),
        Some(Value::Bool(b)) => Ok(b.to_string()),
        _ => Err(format!("`{op}` needs a string value")),
    }
}

fn list(value: Option<&Value>, op: &str) -> Result<Vec<String>, String> {
    match value {
        Some(Value::Array(items)) if items.len() <= 1000 => items.iter().map(|v| text(Some(v), op)).collect(),
        Some(Value::Array(_)) => Err(format!("`{op}` takes at most 1000 values")),
        // A single value, or a comma-separated list as Dify's form sends it.
        Some(Value::String(s)) => Ok(s.split(',').map(|v| v.trim().to_owned()).collect()),
        other => text(other, op).map(|v| vec![v]),
    }
}

fn number(value: Option<&Value>, op: &str) -> Result<f64, String> {
    let parsed = match value {
        Some(Value::Number(n)) => n.as_f64(),
        Some(Value::String(s)) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    parsed
        .filter(|n| n.is_finite())
        .ok_or_else(|| format!("`{op}` needs a number"))
}

/// A time from RFC 3339, or a date (its midnight, UTC).
fn time_of(raw: &str) -> Option<DateTime<Utc>> {
    let raw = raw.trim();
    DateTime::parse_from_rfc3339(raw)
        .map(|t| t.with_timezone(&Utc))
        .ok()
        .or_else(|| {
            NaiveDate::parse_from_str(raw, "%Y-%m-%d")
                .ok()
                .and_then(|d| d.and_hms_opt(0, 0, 0))
                .map(|t| t.and_utc())
        })
}

fn time(value: Option<&Value>, op: &str) -> Result<DateTime<Utc>, String> {
    match value {
        Some(Value::String(s)) => time_of(s),
        // Dify sends dates as Unix seconds too.
        Some(Value::Number(n)) => n.as_i64().and_then(|s| DateTime::from_timestamp(s, 0)),
        _ => None,
    }
    .ok_or_else(|| format!("`{op}` needs a date (RFC 3339, YYYY-MM-DD or Unix seconds)"))
}

impl Comparison {
    /// `op` with its `value`; the message says what is wrong.
    pub fn parse(op: &str, value: Option<&Value>) -> Result<Self, String> {
        Ok(match op {
            "is" => Comparison::Is(text(value, op)?),
            "is not" => Comparison::IsNot(text(value, op)?),
            "in" => Comparison::In(list(value, op)?),
            "not in" => Comparison::NotIn(list(value, op)?),
            "contains" => Comparison::Contains(text(value, op)?),
            "not contains" => Comparison::NotContains(text(value, op)?),
            "start with" => Comparison::StartsWith(text(value, op)?),
            "end with" => Comparison::EndsWith(text(value, op)?),
            "empty" => Comparison::Empty,
            "not empty" => Comparison::NotEmpty,
            "=" => Comparison::Equal(number(value, op)?),
            "≠" | "!=" => Comparison::NotEqual(number(value, op)?),
            ">" => Comparison::Greater(number(value, op)?),
            "<" => Comparison::Less(number(value, op)?),
            "≥" | ">=" => Comparison::AtLeast(number(value, op)?),
            "≤" | "<=" => Comparison::AtMost(number(value, op)?),
            "before" => Comparison::Before(time(value, op)?),
            "after" => Comparison::After(time(value, op)?),
            other => {
                return Err(format!(
                    "unknown comparison_operator `{other}` (one of: {})",
                    OPERATORS.join(", ")
                ));
            }
        })
    }

    /// Whether a stored value (`None`: the key is missing) satisfies the comparison.
    pub fn holds(&self, stored: Option<&str>) -> bool {
        let num = || stored.and_then(|s| s.trim().parse::<f64>().ok());
        let at = || stored.and_then(time_of);
        match self {
            Comparison::Is(v) => stored == Some(v.as_str()),
            Comparison::IsNot(v) => stored != Some(v.as_str()),
            Comparison::In(vs) => stored.is_some_and(|s| vs.iter().any(|v| v == s)),
            Comparison::NotIn(vs) => stored.is_none_or(|s| vs.iter().all(|v| v != s)),
            Comparison::Contains(v) => stored.is_some_and(|s| s.contains(v.as_str())),
            Comparison::NotContains(v) => stored.is_none_or(|s| !s.contains(v.as_str())),
            Comparison::StartsWith(v) => stored.is_some_and(|s| s.starts_with(v.as_str())),
            Comparison::EndsWith(v) => stored.is_some_and(|s| s.ends_with(v.as_str())),
            Comparison::Empty => stored.is_none_or(str::is_empty),
            Comparison::NotEmpty => stored.is_some_and(|s| !s.is_empty()),
            Comparison::Equal(v) => num().is_some_and(|n| n == *v),
            Comparison::NotEqual(v) => num().is_some_and(|n| n != *v),
            Comparison::Greater(v) => num().is_some_and(|n| n > *v),
            Comparison::Less(v) => num().is_some_and(|n| n < *v),
            Comparison::AtLeast(v) => num().is_some_and(|n| n >= *v),
            Comparison::AtMost(v) => num().is_some_and(|n| n <= *v),
            Comparison::Before(t) => at().is_some_and(|s| s < *t),
            Comparison::After(t) => at().is_some_and(|s| s > *t),
        }
    }
}

/// One condition: metadata keys and a comparison.
#[derive(Clone, Debug, PartialEq)]
pub struct Condition {
    pub names: Vec<String>,
    pub comparison: Comparison,
}

/// Conditions joined by `and` (`any: false`) or `or`.
#[derive(Clone, Debug, PartialEq)]
pub struct Conditions {
    pub any: bool,
    pub list: Vec<Condition>,
}

impl Conditions {
    pub fn holds(&self, metadata: &Metadata) -> bool {
        let one = |c: &Condition| c.names.iter().any(|name| c.comparison.holds(metadata.get(name)));
        if self.any {
            self.list.iter().any(one)
        } else {
            self.list.iter().all(one)
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn metadata(pairs: &[(&str, &str)]) -> Metadata {
        let object: serde_json::Map<String, Value> =
            pairs.iter().map(|(k, v)| ((*k).to_owned(), Value::from(*v))).collect();
        Metadata::parse(&Value::Object(object), "metadata").unwrap()
    }

    fn holds(op: &str, value: Value, stored: Option<&str>) -> bool {
        Comparison::parse(op, Some(&value)).unwrap().holds(stored)
    }

    #[test]
    fn text_comparisons_are_exact_and_a_missing_key_is_empty() {
        assert!(holds("is", json!("guide"), Some("guide")));
        assert!(!holds("is", json!("guide"), Some("Guide")));
        assert!(!holds("is", json!("guide"), None));
        assert!(holds("is not", json!("guide"), None));
        assert!(holds("in", json!(["a", "b"]), Some("b")));
        assert!(holds("in", json!("a, b"), Some("b")), "Dify's comma-separated form");
        assert!(holds("not in", json!(["a", "b"]), Some("c")));
        assert!(holds("not in", json!(["a", "b"]), None));
        assert!(holds("contains", json!("light"), Some("lighthouse")));
        assert!(holds("not contains", json!("light"), Some("harbour")));
        assert!(holds("start with", json!("light"), Some("lighthouse")));
        assert!(holds("end with", json!("house"), Some("lighthouse")));
        let empty = Comparison::parse("empty", None).unwrap();
        assert!(empty.holds(None) && empty.holds(Some("")) && !empty.holds(Some("x")));
        let not_empty = Comparison::parse("not empty", None).unwrap();
        assert!(!not_empty.holds(None) && not_empty.holds(Some("x")));
    }

    #[test]
    fn numbers_and_dates_compare_as_such_and_bad_stored_values_do_not_match() {
        assert!(holds(">", json!(9), Some("10")), "10 > 9 as numbers, not as text");
        assert!(holds("≤", json!("10"), Some("10.0")));
        assert!(holds("≠", json!(3), Some("4")));
        assert!(!holds(">", json!(1), Some("many")));
        assert!(holds("before", json!("2024-06-01"), Some("2024-05-31T23:00:00Z")));
        assert!(holds("after", json!(1_700_000_000), Some("2024-01-01")));
        assert!(!holds("after", json!("2024-01-01"), Some("soon")));
    }

    #[test]
    fn bad_conditions_are_refused_with_a_reason() {
        assert!(
            Comparison::parse("like", Some(&json!("x")))
                .unwrap_err()
                .contains("unknown")
        );
        assert!(Comparison::parse("is", None).unwrap_err().contains("string"));
        assert!(
            Comparison::parse(">", Some(&json!("ten")))
                .unwrap_err()
                .contains("number")
        );
        assert!(
            Comparison::parse("before", Some(&json!("someday")))
                .unwrap_err()
                .contains("date")
        );
    }

    #[test]
    fn and_needs_every_condition_or_needs_one_and_several_names_need_one() {
        let m = metadata(&[("lang", "en"), ("kind", "guide")]);
        let cond = |names: &[&str], op: &str, v: Value| Condition {
            names: names.iter().map(|n| (*n).to_owned()).collect(),
            comparison: Comparison::parse(op, Some(&v)).unwrap(),
        };
        let both = vec![cond(&["lang"], "is", json!("en")), cond(&["kind"], "is", json!("faq"))];
        assert!(
            !Conditions {
                any: false,
                list: both.clone()
            }
            .holds(&m)
        );
        assert!(Conditions { any: true, list: both }.holds(&m));
        let names = vec![cond(&["category", "kind"], "is", json!("guide"))];
        assert!(
            Conditions {
                any: false,
                list: names
            }
            .holds(&m)
        );
    }
}
