//! Anything at all, and Machines with wrong types in random places.

#[allow(unused_imports)]
use crate::*;
use proptest::sample::select;
use serde_json::{Value, json};

// ------------------------------------------------------------------------------------------
// Anything at all, and Machines with wrong types in random places.

pub(crate) fn arb_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_map(|f| json!(f)),
        ".{0,12}".prop_map(Value::String),
        select(vec![
            "small",
            "huge",
            "64Mi",
            "0",
            "-1Gi",
            "1e400",
            "ReadWriteAll",
            "cdrom",
            "pc-q35-",
            "01:00:5e:00:00:01",
            "..",
            "",
        ])
        .prop_map(|s| json!(s)),
    ];
    leaf.prop_recursive(3, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                select(vec![
                    "name", "size", "template", "cores", "spec", "x", "type", "key"
                ])
                .prop_map(str::to_owned),
                inner,
                0..4
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Every JSON pointer inside `v`, the root included.
pub(crate) fn pointers(v: &Value, here: String, out: &mut Vec<String>) {
    out.push(here.clone());
    match v {
        Value::Object(m) => m
            .iter()
            .for_each(|(k, c)| pointers(c, format!("{here}/{k}"), out)),
        Value::Array(a) => a
            .iter()
            .enumerate()
            .for_each(|(i, c)| pointers(c, format!("{here}/{i}"), out)),
        _ => {}
    }
}

/// A valid spec with one to three places replaced by anything.
pub(crate) fn corrupted_spec() -> impl Strategy<Value = Value> {
    (
        valid_spec(),
        prop::collection::vec((any::<prop::sample::Index>(), arb_json()), 1..=3),
    )
        .prop_map(|(mut spec, edits)| {
            for (at, replacement) in edits {
                let mut all = Vec::new();
                pointers(&spec, String::new(), &mut all);
                let pointer = at.get(&all).clone();
                if pointer.is_empty() {
                    spec = replacement;
                } else if let Some(slot) = spec.pointer_mut(&pointer) {
                    *slot = replacement;
                }
            }
            spec
        })
}

pub(crate) fn any_machine() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => corrupted_spec().prop_map(machine),
        1 => arb_json().prop_map(machine),
        1 => arb_json(),
    ]
}
