//! Kubernetes resource quantities (`20Gi`, `1.5G`, `1e9`), as the Machine API accepts them.
//!
//! The string form is kept verbatim (it is what the user wrote and what the PVC gets); parsing
//! to a comparable value is only needed for the rules (memory >= 64Mi, disks may only grow).

use std::{borrow::Cow, cmp::Ordering, fmt};

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Deserializer, Serialize, Serializer, de};

/// A quantity as written in a manifest: a string such as `40Gi`, or a plain integer.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Quantity(pub String);

/// A parsed quantity in nano-units (10^-9), exact for every value Kubernetes can represent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Amount(i128);

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Syntax,
    #[error("quantity is too large")]
    Overflow,
}

const NANO: i128 = 1_000_000_000;

impl Amount {
    pub const fn from_bytes(bytes: i128) -> Self {
        Amount(bytes * NANO)
    }

    pub fn is_positive(self) -> bool {
        self.0 > 0
    }

    /// Whether this is a whole number of `unit`s (a zero unit divides nothing).
    pub fn is_multiple_of(self, unit: Amount) -> bool {
        unit.0 != 0 && self.0 % unit.0 == 0
    }

    /// Whether this is a whole number of units (no fractional bytes).
    pub fn is_whole(self) -> bool {
        self.0 % NANO == 0
    }
}

impl Quantity {
    pub fn new(s: impl Into<String>) -> Self {
        Quantity(s.into())
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }

    pub fn parse(&self) -> Result<Amount, QuantityError> {
        parse(&self.0)
    }

    /// Numeric comparison; `None` when either side does not parse.
    pub fn compare(&self, other: &Quantity) -> Option<Ordering> {
        Some(self.parse().ok()?.cmp(&other.parse().ok()?))
    }
}

impl From<&str> for Quantity {
    fn from(s: &str) -> Self {
        Quantity(s.to_owned())
    }
}

impl fmt::Display for Quantity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Parses the Kubernetes quantity grammar (see `k8s.io/apimachinery/pkg/api/resource`).
pub fn parse(input: &str) -> Result<Amount, QuantityError> {
    let s = input;
    let (negative, rest) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let number_len = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(rest.len());
    let (number, suffix) = rest.split_at(number_len);
    let (int_part, frac_part) = number.split_once('.').unwrap_or((number, ""));
    if int_part.is_empty() && frac_part.is_empty() || frac_part.contains('.') {
        return Err(QuantityError::Syntax);
    }
    let (base, exp): (i128, i32) = match suffix {
        "" => (10, 0),
        "n" => (10, -9),
        "u" => (10, -6),
        "m" => (10, -3),
        "k" => (10, 3),
        "M" => (10, 6),
        "G" => (10, 9),
        "T" => (10, 12),
        "P" => (10, 15),
        "E" => (10, 18),
        "Ki" => (2, 10),
        "Mi" => (2, 20),
        "Gi" => (2, 30),
        "Ti" => (2, 40),
        "Pi" => (2, 50),
        "Ei" => (2, 60),
        other => match other.strip_prefix(['e', 'E']) {
            Some(e)
                if !e.is_empty()
                    && e.trim_start_matches(['+', '-'])
                        .chars()
                        .all(|c| c.is_ascii_digit()) =>
            {
                (10, e.parse::<i32>().map_err(|_| QuantityError::Overflow)?)
            }
            _ => return Err(QuantityError::Syntax),
        },
    };
    // mantissa = int_part.frac_part as an integer scaled by 10^-frac_digits.
    let digits = format!("{int_part}{frac_part}");
    let digits = digits.trim_start_matches('0');
    if digits.len() > 30 {
        return Err(QuantityError::Overflow);
    }
    let mantissa: i128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| QuantityError::Syntax)?
    };
    let frac_digits = frac_part.len() as i32;
    // value in nanos = mantissa * base^exp * 10^(9 - frac_digits), rounded up like Kubernetes.
    let mut numerator = mantissa;
    let mut denominator: i128 = 1;
    let mut scale_by = |factor: i128, power: i32| -> Result<(), QuantityError> {
        let p = factor
            .checked_pow(power.unsigned_abs())
            .ok_or(QuantityError::Overflow)?;
        if power >= 0 {
            numerator = numerator.checked_mul(p).ok_or(QuantityError::Overflow)?;
        } else {
            denominator = denominator.checked_mul(p).ok_or(QuantityError::Overflow)?;
        }
        Ok(())
    };
    scale_by(base, exp)?;
    scale_by(10, 9 - frac_digits)?;
    let nanos = numerator / denominator + i128::from(numerator % denominator != 0);
    // Kubernetes caps quantities at 2^63-1 of the unit.
    if nanos > i128::from(i64::MAX) * NANO {
        return Err(QuantityError::Overflow);
    }
    Ok(Amount(if negative { -nanos } else { nanos }))
}

impl Serialize for Quantity {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Quantity {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct Visitor;
        impl de::Visitor<'_> for Visitor {
            type Value = Quantity;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a quantity such as \"20Gi\" or an integer")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Quantity, E> {
                Ok(Quantity(v.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Quantity, E> {
                Ok(Quantity(v.to_string()))
            }
        }
        deserializer.deserialize_any(Visitor)
    }
}

impl JsonSchema for Quantity {
    fn schema_name() -> Cow<'static, str> {
        "Quantity".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        // Structural schemas forbid `type` inside anyOf, so the marker stands alone here;
        // the admission schema check expands it (see `admission::schema`).
        json_schema!({ "x-kubernetes-int-or-string": true })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nanos(s: &str) -> i128 {
        parse(s).unwrap().0
    }

    #[test]
    fn binary_and_decimal_suffixes() {
        assert_eq!(nanos("1Ki"), 1024 * NANO);
        assert_eq!(nanos("64Mi"), 64 * 1024 * 1024 * NANO);
        assert_eq!(nanos("2Gi"), 2 * (1 << 30) * NANO);
        assert_eq!(nanos("1Ei"), (1i128 << 60) * NANO);
        assert_eq!(nanos("1k"), 1000 * NANO);
        assert_eq!(nanos("1G"), 1_000_000_000 * NANO);
        assert_eq!(nanos("500m"), NANO / 2);
        assert_eq!(nanos("3n"), 3);
        assert_eq!(nanos("7"), 7 * NANO);
    }

    #[test]
    fn fractions_exponents_and_signs() {
        assert_eq!(nanos("1.5Gi"), 3 * (1 << 29) * NANO);
        assert_eq!(nanos(".5"), NANO / 2);
        assert_eq!(nanos("5."), 5 * NANO);
        assert_eq!(nanos("1e3"), 1000 * NANO);
        assert_eq!(nanos("1E3"), 1000 * NANO);
        assert_eq!(nanos("1E"), 1_000_000_000_000_000_000 * NANO);
        assert_eq!(nanos("2e-3"), 2_000_000);
        assert_eq!(nanos("-1Gi"), -(1 << 30) * NANO);
        assert_eq!(nanos("+1Gi"), (1 << 30) * NANO);
        // Below a nano rounds up, as Kubernetes does.
        assert_eq!(nanos("0.1n"), 1);
    }

    #[test]
    fn rejects_malformed() {
        for bad in [
            "", "Gi", "1GB", "1.2.3", "abc", "1 Gi", "--1", "1e", "1ee3", "1Gi3",
        ] {
            assert_eq!(parse(bad), Err(QuantityError::Syntax), "{bad:?}");
        }
        assert_eq!(parse("99999999999Ei"), Err(QuantityError::Overflow));
    }

    #[test]
    fn compares_across_units() {
        let q = |s: &str| Quantity::from(s);
        assert_eq!(q("1Gi").compare(&q("1024Mi")), Some(Ordering::Equal));
        assert_eq!(q("1G").compare(&q("1Gi")), Some(Ordering::Less));
        assert_eq!(q("100Gi").compare(&q("40Gi")), Some(Ordering::Greater));
        assert_eq!(q("x").compare(&q("1Gi")), None);
    }

    #[test]
    fn deserializes_strings_and_integers() {
        let q: Quantity = serde_json::from_str("\"20Gi\"").unwrap();
        assert_eq!(q.as_str(), "20Gi");
        let q: Quantity = serde_json::from_str("1073741824").unwrap();
        assert_eq!(q.as_str(), "1073741824");
        assert!(serde_json::from_str::<Quantity>("true").is_err());
        assert_eq!(
            serde_json::to_string(&Quantity::from("4Gi")).unwrap(),
            "\"4Gi\""
        );
    }
}
