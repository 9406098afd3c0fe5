//! What one admission request may cost, whatever its body holds.
//!
//! kube-apiserver sends bodies up to 3 MiB, and anyone who reaches the Service can send one. A
//! body is walked once, without building anything, before it is decoded: a review with more JSON
//! values or deeper nesting than any Machine needs is answered at the cost of that walk. What is
//! decoded is then bounded, and so is what is said back: at most [`MAX_CAUSES`] causes, each and
//! the whole message cut to a fixed length.

use std::borrow::Cow;
use std::cell::Cell;
use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::Value;

use crate::machine::{FieldError, FieldPath};

/// JSON values in a whole AdmissionReview (object, oldObject, metadata and managedFields
/// included). A Machine at every array's bound holds about 4,000; its review, with oldObject,
/// under 10,000.
pub const MAX_VALUES: usize = 50_000;
/// Nesting depth of the review. A Machine's deepest field sits at 9 inside the review
/// (request.object.spec.domain.firmware.bootloader.efi) and managedFields' entries at about 20.
pub const MAX_DEPTH: usize = 64;
/// Field errors reported one by one; the rest are counted in one more cause.
pub const MAX_CAUSES: usize = 100;
/// Longest cause message; longer ones (a huge rejected value) are cut.
pub const MAX_CAUSE_BYTES: usize = 512;
/// Longest denial message (the API server shows it to the user, and the log line carries it).
pub const MAX_MESSAGE_BYTES: usize = 16 * 1024;
/// Longest message in a log line.
pub const MAX_LOGGED_BYTES: usize = 2 * 1024;

/// Items in any list of a Machine's spec. The longest list a Machine may have is `disks`, bounded
/// at KubeVirt's 256; tighter bounds per field come from the schema and the rules, which then
/// never see more than this.
pub const MAX_ITEMS: usize = 256;
/// Fields in any object of a Machine's spec (the widest has 8).
pub const MAX_FIELDS: usize = 64;
/// Bytes in any string of a Machine's spec (the longest allowed, `cloudInit.networkData`, is
/// 16 KiB).
pub const MAX_STRING_BYTES: usize = 64 * 1024;

/// A review over the limits, found by [`within_limits`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exceeded {
    Values,
    Depth,
}

impl fmt::Display for Exceeded {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Exceeded::Values => write!(
                f,
                "the AdmissionReview holds more than {MAX_VALUES} JSON values; a Machine at every \
                 limit needs fewer than 10000"
            ),
            Exceeded::Depth => write!(
                f,
                "the AdmissionReview nests deeper than {MAX_DEPTH} levels; a Machine needs fewer \
                 than 24"
            ),
        }
    }
}

/// Walks `body` once, counting values and depth, allocating nothing that grows with the body.
/// `Ok(())` also for bodies that are not JSON: the decoder reports those in its own words.
pub fn within_limits(body: &[u8]) -> Result<(), Exceeded> {
    let found = Cell::new(None);
    let values = Cell::new(0usize);
    let walk = Walk {
        depth: 0,
        values: &values,
        found: &found,
    };
    let mut de = serde_json::Deserializer::from_slice(body);
    // serde_json's own recursion limit (128) stops deeper input first with an error; MAX_DEPTH
    // is below it, so depth is always ours to report.
    let _ = walk.deserialize(&mut de);
    match found.get() {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

struct Walk<'a> {
    depth: usize,
    values: &'a Cell<usize>,
    found: &'a Cell<Option<Exceeded>>,
}

impl Walk<'_> {
    fn count<E: de::Error>(&self) -> Result<(), E> {
        let n = self.values.get() + 1;
        self.values.set(n);
        if n > MAX_VALUES {
            return Err(self.stop(Exceeded::Values));
        }
        if self.depth > MAX_DEPTH {
            return Err(self.stop(Exceeded::Depth));
        }
        Ok(())
    }

    fn stop<E: de::Error>(&self, e: Exceeded) -> E {
        self.found.set(Some(e));
        E::custom(e)
    }

    fn inner(&self) -> Walk<'_> {
        Walk {
            depth: self.depth + 1,
            values: self.values,
            found: self.found,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        self.count()
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        self.count()
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        self.count()
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.count()
    }
    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        self.count()
    }
    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.count()
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.count()?;
        while seq.next_element_seed(self.inner())?.is_some() {}
        Ok(())
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.count()?;
        while map.next_key::<IgnoredAny>()?.is_some() {
            map.next_value_seed(self.inner())?;
        }
        Ok(())
    }
}

/// Lists, objects and strings of `spec` over [`MAX_ITEMS`], [`MAX_FIELDS`] and
/// [`MAX_STRING_BYTES`], at most [`MAX_CAUSES`] of them. A spec with any is refused on these
/// alone: the schema and the rules run only on specs of bounded size.
pub fn shape_errors(spec: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    shape(spec, &FieldPath::new("spec"), &mut errors);
    errors
}

fn shape(value: &Value, path: &FieldPath<'_>, errors: &mut Vec<FieldError>) {
    if errors.len() >= MAX_CAUSES {
        return;
    }
    match value {
        Value::Array(items) if items.len() > MAX_ITEMS => {
            errors.push(FieldError::too_many(path, items.len(), MAX_ITEMS));
        }
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                shape(item, &path.index(i), errors);
            }
        }
        Value::Object(fields) if fields.len() > MAX_FIELDS => errors.push(FieldError::forbidden(
            path,
            format!("must have at most {MAX_FIELDS} fields"),
        )),
        Value::Object(fields) => {
            for (name, field) in fields {
                shape(field, &path.child(name), errors);
            }
        }
        Value::String(s) if s.len() > MAX_STRING_BYTES => {
            errors.push(FieldError::too_long(path, MAX_STRING_BYTES));
        }
        _ => {}
    }
}

/// `s` cut to at most `max` bytes on a character boundary, saying how much was left out.
pub fn truncate(s: &str, max: usize) -> Cow<'_, str> {
    if s.len() <= max {
        return Cow::Borrowed(s);
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    Cow::Owned(format!("{}... ({} more bytes)", &s[..end], s.len() - end))
}

#[cfg(test)]
mod tests;
