//! What a disk without modes depends on, read from the caches: the default StorageClass and
//! CDI's StorageProfiles (the rule itself is `decide::storage_defaults`).

use kube::ResourceExt;
use kube::runtime::reflector::ObjectRef;

use crate::api::MachineSpec;
use crate::reconciler::decide::storage_defaults::StorageDefaults;

/// The annotation that marks the cluster's default StorageClass.
const DEFAULT_CLASS_ANNOTATION: &str = "storageclass.kubernetes.io/is-default-class";

/// The default StorageClass and the StorageProfiles of the classes that `spec`'s disks without
/// modes use; nothing is looked up when every disk has its modes.
pub fn defaults(
    spec: &MachineSpec,
    stores: &crate::reconciler::run::cluster::ClusterStores,
) -> StorageDefaults {
    let open: Vec<&Option<String>> = (spec.disks.iter())
        .filter(|d| d.access_mode.is_none() || d.volume_mode.is_none())
        .map(|d| &d.storage_class)
        .collect();
    if open.is_empty() {
        return StorageDefaults::default();
    }
    // Several marked default: the newest, as kube-apiserver's admission picks it.
    let default_class = (stores.storage_classes.state().iter())
        .filter(|sc| {
            sc.annotations()
                .get(DEFAULT_CLASS_ANNOTATION)
                .map(String::as_str)
                == Some("true")
        })
        .max_by_key(|sc| sc.metadata.creation_timestamp.clone())
        .map(|sc| sc.name_any());
    let profiles = open
        .into_iter()
        .filter_map(|class| class.clone().or_else(|| default_class.clone()))
        .filter_map(|class| {
            let profile = stores.storage_profiles.get(&ObjectRef::new(&class))?;
            let sets = profile.status.as_ref()?.claim_property_sets.clone();
            Some((class, sets))
        })
        .collect();
    StorageDefaults {
        default_class,
        profiles,
    }
}
