//! The CustomResourceDefinitions, as `kubevirt-operator crd` prints them and `manifests/` holds them.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use super::{
    KubevirtConfig, Machine, MachineClass, MachineRestore, MachineSnapshot, NetworkConfiguration,
};

/// Every CRD this operator owns, in a stable order.
pub fn all() -> Vec<CustomResourceDefinition> {
    vec![
        Machine::crd(),
        NetworkConfiguration::crd(),
        MachineClass::crd(),
        MachineSnapshot::crd(),
        MachineRestore::crd(),
        KubevirtConfig::crd(),
    ]
}

/// The CRDs as one multi-document YAML stream.
pub fn to_yaml() -> Result<String, serde_yaml::Error> {
    let mut out = String::new();
    for crd in all() {
        out.push_str("---\n");
        out.push_str(&serde_yaml::to_string(&crd)?);
    }
    Ok(out)
}

/// The Machine CRD's openAPIV3Schema, which the mutating webhook checks raw objects against.
pub fn machine_openapi_schema() -> serde_json::Value {
    Machine::crd()
        .spec
        .versions
        .into_iter()
        .next()
        .and_then(|v| v.schema)
        .and_then(|s| s.open_api_v3_schema)
        .map(|s| serde_json::to_value(s).unwrap_or_default())
        .unwrap_or_default()
}
