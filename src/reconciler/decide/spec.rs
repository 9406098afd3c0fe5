//! The spec a reconcile works from.

use kube::ResourceExt;

use crate::api::{Machine, MachineSpec};
use crate::machine::{Catalog, DEFAULTS_ANNOTATION, resolve};

/// The spec the reconciler works from: resolved like the webhook would, so a Machine that
/// bypassed admission is treated the same as one that went through it.
pub fn resolved_spec(machine: &Machine, catalog: &Catalog) -> MachineSpec {
    let recorded = machine
        .annotations()
        .get(DEFAULTS_ANNOTATION)
        .and_then(|s| serde_json::from_str::<MachineSpec>(s).ok());
    resolve(&machine.spec, recorded.as_ref(), catalog).spec
}
