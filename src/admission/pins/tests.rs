use serde_json::json;

use super::*;

#[test]
fn only_objects_naming_a_data_source_or_carrying_pins_are_looked_at() {
    let cases = [
        (
            json!({"spec": {"disks": [{"name": "a", "size": "1Gi"}]}}),
            false,
        ),
        (
            json!({"spec": {"disks": [{"name": "a", "source": {"pvc": {"name": "p"}}}]}}),
            false,
        ),
        (
            json!({"spec": {"disks": [{"name": "a", "source": {"dataSource": {"name": "d"}}}]}}),
            true,
        ),
        (
            json!({"spec": {"cdroms": [{"name": "i", "source": {"dataSource": {"name": "d"}}}]}}),
            true,
        ),
        (
            json!({"metadata": {"annotations": {CLONE_SOURCES_ANNOTATION: "{}"}}, "spec": {}}),
            true,
        ),
    ];
    for (object, want) in cases {
        assert_eq!(concerned(&object), want, "{object}");
    }
}

#[test]
fn the_annotation_is_set_replaced_or_removed_to_say_exactly_the_pins() {
    use json_patch::PatchOperation;
    let pins = CloneSources::from([(
        "root".to_owned(),
        clone_sources::PinnedSource::Pvc {
            namespace: "os".into(),
            name: "debian".into(),
        },
    )]);
    let encoded = clone_sources::encode(&pins);
    let apply = |object: serde_json::Value, pins: &CloneSources| {
        let mut patched = object.clone();
        if let Some(op) = set_or_remove(&object, pins) {
            json_patch::patch(&mut patched, &[op]).expect("applies");
        }
        patched
    };
    // No annotations yet, a forged value, the right value already, none wanted.
    let bare = json!({"metadata": {"name": "m"}});
    assert_eq!(
        apply(bare.clone(), &pins)["metadata"]["annotations"][CLONE_SOURCES_ANNOTATION],
        encoded.as_str()
    );
    let forged = json!({"metadata": {"annotations": {CLONE_SOURCES_ANNOTATION: "{\"root\":{\"pvc\":{\"namespace\":\"hr\",\"name\":\"payroll\"}}}", "keep": "me"}}});
    let replaced = apply(forged.clone(), &pins);
    assert_eq!(
        replaced["metadata"]["annotations"][CLONE_SOURCES_ANNOTATION],
        encoded.as_str()
    );
    assert_eq!(replaced["metadata"]["annotations"]["keep"], "me");
    let right = json!({"metadata": {"annotations": {CLONE_SOURCES_ANNOTATION: encoded}}});
    assert!(set_or_remove(&right, &pins).is_none(), "already says it");
    let removed = apply(forged, &CloneSources::new());
    assert_eq!(
        removed["metadata"]["annotations"],
        json!({"keep": "me"}),
        "no dataSource volume: no pins"
    );
    assert!(matches!(
        set_or_remove(&right, &CloneSources::new()),
        Some(PatchOperation::Remove(_))
    ));
    assert!(set_or_remove(&bare, &CloneSources::new()).is_none());
    assert_eq!(pinned(&right), pins);
    assert_eq!(pinned(&bare), CloneSources::new());
}
