//! Apis: the typed slices of the foreign APIs the reconciler writes and reads: KubeVirt
//! ([`kubevirt`], its snapshots [`snapshot`]), CDI ([`cdi`]) and Multus ([`multus`]). Types only,
//! no API calls.

/// Another project's resource, typed for the fields read and written: the same derives for each,
/// and no schema of ours (the CRD is theirs; the integration tests install it from
/// `tests/fixtures/crds/`). The `#[kube(...)]` attribute names the group, version and kind.
macro_rules! foreign_resource {
    (
        $(#[doc = $doc:literal])*
        #[kube($($kube:tt)*)]
        $(#[$attr:meta])*
        $vis:vis struct $spec:ident $body:tt
    ) => {
        $(#[doc = $doc])*
        #[derive(
            kube::CustomResource, serde::Serialize, serde::Deserialize, Clone, Debug, Default, PartialEq,
        )]
        #[kube($($kube)*, schema = "disabled")]
        $(#[$attr])*
        $vis struct $spec $body
    };
}

pub mod cdi;
pub mod kubevirt;
pub mod multus;
pub mod snapshot;
