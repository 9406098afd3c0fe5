//! What each `dataSource` volume of a Machine clones, pinned at admission
//! ([`CLONE_SOURCES_ANNOTATION`](super::names::CLONE_SOURCES_ANNOTATION)): the webhook resolves
//! each DataSource, asks the author about what it points to, and records that here; the
//! reconciler clones exactly that, so a DataSource edited after admission cannot redirect the
//! clone. Each entry has the shape of CDI's DataVolume source (`{"pvc": {...}}` or
//! `{"snapshot": {...}}`).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A PVC or VolumeSnapshot, by namespace and name.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum PinnedSource {
    Pvc { namespace: String, name: String },
    Snapshot { namespace: String, name: String },
}

/// Volume (disk or CD-ROM) name to what it clones.
pub type CloneSources = BTreeMap<String, PinnedSource>;

/// The pins recorded in `annotations`: none when the annotation is absent; an error when it
/// does not parse (only the webhook writes it).
pub fn read(
    annotations: Option<&BTreeMap<String, String>>,
) -> Result<CloneSources, serde_json::Error> {
    match annotations.and_then(|a| a.get(super::names::CLONE_SOURCES_ANNOTATION)) {
        Some(raw) => serde_json::from_str(raw),
        None => Ok(CloneSources::new()),
    }
}

/// The pins as the annotation's value.
pub fn encode(pins: &CloneSources) -> String {
    // A map of strings and plain enums always encodes.
    serde_json::to_string(pins).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_pin_has_the_shape_of_cdis_datavolume_source() {
        let pins = CloneSources::from([
            (
                "root".to_owned(),
                PinnedSource::Pvc {
                    namespace: "os-images".into(),
                    name: "debian-12".into(),
                },
            ),
            (
                "iso".to_owned(),
                PinnedSource::Snapshot {
                    namespace: "media".into(),
                    name: "win-2025".into(),
                },
            ),
        ]);
        let encoded = encode(&pins);
        assert_eq!(
            serde_json::from_str::<serde_json::Value>(&encoded).expect("json"),
            json!({"iso": {"snapshot": {"namespace": "media", "name": "win-2025"}},
                   "root": {"pvc": {"namespace": "os-images", "name": "debian-12"}}})
        );
        let annotations = BTreeMap::from([(
            super::super::names::CLONE_SOURCES_ANNOTATION.to_owned(),
            encoded,
        )]);
        assert_eq!(read(Some(&annotations)).expect("pins"), pins);
        assert_eq!(read(None).expect("none"), CloneSources::new());
        let garbled = BTreeMap::from([(
            super::super::names::CLONE_SOURCES_ANNOTATION.to_owned(),
            "{\"root\": \"elsewhere\"}".to_owned(),
        )]);
        assert!(read(Some(&garbled)).is_err());
    }
}
