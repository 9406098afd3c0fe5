//! At leader start, the served Machine CRD is read (one GET by name) and its status schema
//! checked for every field the reconciler writes: a CRD older than the operator (Helm never
//! upgrades CRDs) would prune them. Only a warning: the status writes learn what is pruned
//! anyway (`decide::status_write`), and a read that fails or is forbidden stops nothing.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::Client;
use kube::api::Api;

use crate::api::names::{MACHINE_CRD, VERSION};
use crate::reconciler::act::status::STATUS_FIELDS;
use crate::reconciler::decide::status_write::{missing_in_schema, upgrade_warning};

/// Reads the served Machine CRD and warns when its status schema lacks fields we write.
pub async fn check(client: Client) {
    let crds: Api<CustomResourceDefinition> = Api::all(client);
    let crd = match crds.get_opt(MACHINE_CRD).await {
        Ok(Some(crd)) => crd,
        Ok(None) => {
            tracing::warn!(crd = MACHINE_CRD, "the Machine CRD is not installed");
            return;
        }
        Err(e) => {
            tracing::warn!(crd = MACHINE_CRD, error = %e, "cannot read the served Machine CRD; its status schema is not checked");
            return;
        }
    };
    let Some(version) = crd.spec.versions.iter().find(|v| v.name == VERSION) else {
        tracing::warn!(
            crd = MACHINE_CRD,
            version = VERSION,
            "the served Machine CRD lacks the version the operator uses: upgrade the CRD"
        );
        return;
    };
    let status = (version.schema.as_ref())
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .and_then(|s| s.properties.as_ref())
        .and_then(|p| p.get("status"));
    let missing = missing_in_schema(status, STATUS_FIELDS);
    if missing.is_empty() {
        tracing::debug!(
            crd = MACHINE_CRD,
            "the served Machine CRD keeps every status field"
        );
    } else {
        tracing::warn!(crd = MACHINE_CRD, fields = ?missing, "{}", upgrade_warning(&missing));
    }
}
