//! Integer settings refuse fractions. The `config` crate would round `1.5` to `2` (environment values
//! are parsed as numbers, and TOML has floats), and a fraction for a count, a size or a number of
//! seconds is a mistake worth stopping for; a whole float such as `8.0` is accepted. The error
//! names the key, like every other configuration error.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, Deserializer, Unexpected, Visitor};

pub fn deserialize<'de, D, T>(deserializer: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: TryFrom<i128>,
{
    deserializer.deserialize_any(Whole(PhantomData))
}

struct Whole<T>(PhantomData<T>);

fn fit<T: TryFrom<i128>, E: de::Error>(n: i128) -> Result<T, E> {
    T::try_from(n).map_err(|_| E::custom(format!("{n} is out of range")))
}

impl<'de, T: TryFrom<i128>> Visitor<'de> for Whole<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a whole number")
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<T, E> {
        fit(i128::from(v))
    }

    fn visit_u64<E: de::Error>(self, v: u64) -> Result<T, E> {
        fit(i128::from(v))
    }

    fn visit_i128<E: de::Error>(self, v: i128) -> Result<T, E> {
        fit(v)
    }

    fn visit_u128<E: de::Error>(self, v: u128) -> Result<T, E> {
        i128::try_from(v)
            .map_err(|_| E::custom(format!("{v} is out of range")))
            .and_then(fit)
    }

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<T, E> {
        // Whole and well inside i128: the cast is exact.
        if v.is_finite() && v.fract() == 0.0 && v.abs() < 1e30 {
            fit(v as i128)
        } else {
            Err(E::invalid_value(Unexpected::Float(v), &self))
        }
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        match v.trim().parse::<i128>() {
            Ok(n) => fit(n),
            Err(_) => Err(E::invalid_value(Unexpected::Str(v), &self)),
        }
    }
}

pub mod option {
    use super::*;

    pub fn deserialize<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
    where
        D: Deserializer<'de>,
        T: TryFrom<i128>,
    {
        deserializer.deserialize_option(Maybe(PhantomData))
    }

    struct Maybe<T>(PhantomData<T>);

    impl<'de, T: TryFrom<i128>> Visitor<'de> for Maybe<T> {
        type Value = Option<T>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a whole number or nothing")
        }

        fn visit_none<E: de::Error>(self) -> Result<Option<T>, E> {
            Ok(None)
        }

        fn visit_unit<E: de::Error>(self) -> Result<Option<T>, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Option<T>, D::Error> {
            super::deserialize(deserializer).map(Some)
        }
    }
}
