//! Transforms of the generated CRD schemas.

/// `serde(default)` keeps a missing name parseable, so validation reports it with every other
/// error; but a schema `default` would fill it in before `required` is checked, so it never fired.
pub(crate) fn required_without_default(schema: &mut schemars::Schema) {
    let required: Vec<String> = schema
        .get("required")
        .and_then(|r| r.as_array())
        .map(|r| {
            r.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    if let Some(props) = schema.get_mut("properties").and_then(|p| p.as_object_mut()) {
        for name in required {
            if let Some(p) = props.get_mut(&name).and_then(|p| p.as_object_mut()) {
                p.remove("default");
            }
        }
    }
}

/// A class's CPU and memory are a Machine's without the hot-plug maxima (`maxSockets`, `maxSize`),
/// which are each Machine's own choice: they stay out of the class's schema, so the API server
/// prunes them (or refuses them, under strict field validation) as it would any unknown field.
pub(crate) fn without_hot_plug_maxima(schema: &mut schemars::Schema) {
    if let Some(props) = schema.get_mut("properties").and_then(|p| p.as_object_mut()) {
        props.remove("maxSockets");
        props.remove("maxSize");
    }
}

/// A class's placement is a Machine's without affinity and priorityClassName: the class bounds
/// where its Machines run (nodeSelector, tolerations); the rest stays each Machine's choice.
pub(crate) fn class_placement(schema: &mut schemars::Schema) {
    if let Some(props) = schema.get_mut("properties").and_then(|p| p.as_object_mut()) {
        props.remove("affinity");
        props.remove("priorityClassName");
    }
}
