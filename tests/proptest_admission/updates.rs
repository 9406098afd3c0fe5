//! Allowed updates never remove or shrink a stored disk.

#[allow(unused_imports)]
use crate::*;
use kubevirt_operator::api::Quantity;
use proptest::sample::select;
use serde_json::{Value, json};
use std::cmp::Ordering;

/// A change to a stored Machine, as a user might make it.
#[derive(Clone, Debug)]
enum Edit {
    ToggleRunning,
    Template(&'static str),
    ResizeDisk(prop::sample::Index, Value),
    RemoveDisk(prop::sample::Index),
    AddDisk,
}

fn edit() -> impl Strategy<Value = Edit> {
    prop_oneof![
        Just(Edit::ToggleRunning),
        select(TEMPLATES.to_vec()).prop_map(Edit::Template),
        (any::<prop::sample::Index>(), disk_size()).prop_map(|(i, s)| Edit::ResizeDisk(i, s)),
        any::<prop::sample::Index>().prop_map(Edit::RemoveDisk),
        Just(Edit::AddDisk),
    ]
}

fn apply(edit: &Edit, object: &mut Value) {
    let spec = &mut object["spec"];
    match edit {
        Edit::ToggleRunning => spec["running"] = json!(!spec["running"].as_bool().unwrap_or(true)),
        Edit::Template(t) => spec["template"] = json!(t),
        Edit::ResizeDisk(i, size) => {
            let disks = spec["disks"].as_array_mut().expect("resolved disks");
            let n = i.index(disks.len());
            disks[n]["size"] = size.clone();
        }
        Edit::RemoveDisk(i) => {
            let disks = spec["disks"].as_array_mut().expect("resolved disks");
            let n = i.index(disks.len());
            disks.remove(n);
        }
        Edit::AddDisk => spec["disks"]
            .as_array_mut()
            .expect("resolved disks")
            .push(json!({"name": "added", "size": "1Gi"})),
    }
}

fn size_of(disk: &Value) -> Quantity {
    Quantity::new(quantity_string(&disk["size"]).as_str().expect("a size"))
}

proptest! {
    #![proptest_config(config())]

    /// Data safety (SPEC.md "Update rules"): whatever the edit, and even when the operator's
    /// default template was changed between creation and update (it is configurable), an update
    /// that the webhooks let through keeps every stored disk at its size or larger.
    #[test]
    fn allowed_updates_never_remove_or_shrink_a_stored_disk(
        spec in valid_spec(),
        created_with in select(TEMPLATES.to_vec()),
        updated_with in select(TEMPLATES.to_vec()),
        edit in edit(),
    ) {
        let stored = mutated(&admission(created_with), &request("CREATE", Some(machine(spec)), None))?;
        let a = admission(updated_with);
        let mut edited = stored.clone();
        apply(&edit, &mut edited);
        let m = a.mutate(&request("UPDATE", Some(edited.clone()), Some(stored.clone())));
        if !m.allowed {
            return Ok(());
        }
        let mut new = edited;
        if let Some(patch) = &m.patch {
            json_patch::patch(&mut new, patch).expect("patch applies");
        }
        if !a.validate(&request("UPDATE", Some(new.clone()), Some(stored.clone()))).allowed {
            return Ok(());
        }
        for old_disk in stored["spec"]["disks"].as_array().expect("disks") {
            let new_disk = new["spec"]["disks"]
                .as_array()
                .and_then(|ds| ds.iter().find(|d| d["name"] == old_disk["name"]));
            let Some(new_disk) = new_disk else {
                return Err(TestCaseError::fail(format!("disk {} was removed", old_disk["name"])));
            };
            prop_assert_ne!(
                size_of(old_disk).compare(&size_of(new_disk)),
                Some(Ordering::Greater),
                "disk {} shrank from {} to {} (created with default {}, updated with default {})",
                old_disk["name"], old_disk["size"], new_disk["size"], created_with, updated_with
            );
        }
    }
}
