//! Deserializers for request bodies where serde's defaults and the OpenAPI document (JSON
//! Schema) would disagree.
//!
//! - **Integral numbers.** JSON Schema counts `2261.0` as an integer (a number whose fractional
//!   part is zero), and so do the generators and validators that read the document; serde's
//!   integer types refuse it. quarry takes an integral number as the integer it is, so that
//!   every body valid by the document is taken: [`integer`] on the integer fields. A fractional
//!   value (`2261.5`) or one out of range is still refused, naming the field.
//! - **Objects only.** serde reads a struct from a JSON array too, field by position
//!   (`"chunking": [null, null]`), which the document forbids; `deny_unknown_fields` does not
//!   stop it. [`object`] reads a struct from a JSON object and nothing else.
//!
//! Both are used as `#[serde(default, deserialize_with = "…")]` on `Option` fields: absent and
//! `null` are `None`.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserialize, Deserializer, MapAccess, Unexpected, Visitor};

/// An optional integer field: a JSON integer, or a number with no fractional part (`2261.0`),
/// in `i64`'s range.
pub fn integer<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<i64>, D::Error> {
    deserializer.deserialize_option(OptionOf(Integral))
}

/// A required integer (in a list, say): as [`integer`], but present and not `null`.
pub fn required_integer<'de, D: Deserializer<'de>>(deserializer: D) -> Result<i64, D::Error> {
    deserializer.deserialize_any(Integral)
}

/// An optional struct field that must be a JSON object (not an array).
pub fn object<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    deserializer.deserialize_option(OptionOf(ObjectOnly(PhantomData)))
}

/// A required struct field that must be a JSON object (not an array).
pub fn required_object<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de>,
{
    deserializer.deserialize_map(ObjectOnly(PhantomData))
}

/// `null` (or absent, with `#[serde(default)]`) is `None`; anything else is read by `V`.
struct OptionOf<V>(V);

impl<'de, V> Visitor<'de> for OptionOf<V>
where
    V: Visitor<'de> + SomeValue<'de>,
{
    type Value = Option<V::Value>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.expecting(f)?;
        f.write_str(" or null")
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        self.0.read(deserializer).map(Some)
    }
}

/// How a visitor reads the value inside a `Some`.
trait SomeValue<'de>: Visitor<'de> + Sized {
    fn read<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error>;
}

/// A JSON number with no fractional part, in `i64`'s range.
struct Integral;

/// What the error says was expected.
const AN_INTEGER: &str = "an integer (a number without a fractional part)";

impl<'de> Visitor<'de> for Integral {
    type Value = i64;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(AN_INTEGER)
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
        Ok(v)
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
        i64::try_from(v).map_err(|_| E::invalid_value(Unexpected::Unsigned(v), &"an integer of at most 2^63 - 1"))
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
        // 2^63 is exactly representable; every f64 below it with no fractional part is an i64.
        const LIMIT: f64 = 9_223_372_036_854_775_808.0;
        if v.fract() != 0.0 || !v.is_finite() {
            return Err(E::invalid_value(Unexpected::Float(v), &AN_INTEGER));
        }
        if !(-LIMIT..LIMIT).contains(&v) {
            return Err(E::invalid_value(
                Unexpected::Float(v),
                &"an integer from -2^63 to 2^63 - 1",
            ));
        }
        Ok(v as i64)
    }
}

impl<'de> SomeValue<'de> for Integral {
    fn read<D: Deserializer<'de>>(self, deserializer: D) -> Result<i64, D::Error> {
        deserializer.deserialize_any(self)
    }
}

/// A struct read from a JSON object only.
struct ObjectOnly<T>(PhantomData<T>);

impl<'de, T: Deserialize<'de>> Visitor<'de> for ObjectOnly<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a JSON object")
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        T::deserialize(de::value::MapAccessDeserializer::new(map))
    }
}

impl<'de, T: Deserialize<'de>> SomeValue<'de> for ObjectOnly<T> {
    fn read<D: Deserializer<'de>>(self, deserializer: D) -> Result<T, D::Error> {
        deserializer.deserialize_map(self)
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Inner {
        #[serde(default, deserialize_with = "super::integer")]
        n: Option<i64>,
    }

    #[derive(Debug, Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Outer {
        #[serde(default, deserialize_with = "super::object")]
        inner: Option<Inner>,
        #[serde(deserialize_with = "super::required_object")]
        needed: Inner,
    }

    fn parse(json: &str) -> Result<Outer, String> {
        serde_json::from_str(json).map_err(|e| e.to_string())
    }

    #[test]
    fn integral_numbers_are_integers() {
        let o = parse(r#"{"inner": {"n": 2261.0}, "needed": {"n": -3}}"#).unwrap();
        assert_eq!(o.inner.unwrap().n, Some(2261));
        assert_eq!(o.needed.n, Some(-3));
        let o = parse(r#"{"inner": {"n": null}, "needed": {}}"#).unwrap();
        assert_eq!(o.inner.unwrap().n, None);
        assert_eq!(parse(r#"{"needed": {"n": -0.0}}"#).unwrap().needed.n, Some(0));
        assert_eq!(
            parse(r#"{"needed": {"n": 9223372036854775807}}"#).unwrap().needed.n,
            Some(i64::MAX)
        );
    }

    #[test]
    fn fractions_strings_and_huge_numbers_are_refused() {
        for bad in [
            "2261.5",
            "\"12\"",
            "true",
            "1e19",
            "9223372036854775808",
            "-1e300",
            "[1]",
        ] {
            let err = parse(&format!(r#"{{"needed": {{"n": {bad}}}}}"#)).unwrap_err();
            assert!(err.contains("expected") || err.contains("invalid"), "{bad}: {err}");
        }
    }

    #[test]
    fn arrays_are_not_objects() {
        let err = parse(r#"{"inner": [null], "needed": {}}"#).unwrap_err();
        assert!(err.contains("expected a JSON object"), "{err}");
        let err = parse(r#"{"needed": [null]}"#).unwrap_err();
        assert!(err.contains("expected a JSON object"), "{err}");
        assert!(parse(r#"{"inner": null, "needed": {}}"#).unwrap().inner.is_none());
        assert!(parse(r#"{"needed": {}}"#).unwrap().inner.is_none());
    }
}
