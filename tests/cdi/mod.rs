//! CDI's part in the tests of Machines with disk images: its CRDs, its DataVolumes, the status
//! it writes.

use kube::api::{ApiResource, GroupVersionKind, Patch, PatchParams};
use serde_json::{Value, json};

use crate::ownership::Env;
#[allow(unused_imports)] // Not every test binary installs them through this module.
pub use crate::support::all_crds;

pub const IMAGE: &str =
    "https://cloud.debian.org/images/cloud/bookworm/latest/debian-12-generic-amd64.qcow2";

pub fn dv_ar() -> ApiResource {
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("cdi.kubevirt.io", "v1beta1", "DataVolume"),
        "datavolumes",
    )
}

/// CDI's part: the DataVolume's status.
pub async fn cdi_status(env: &Env, dv: &str, status: Value) {
    env.api(&dv_ar())
        .patch_status(
            dv,
            &PatchParams::default(),
            &Patch::Merge(json!({"status": status})),
        )
        .await
        .unwrap_or_else(|e| panic!("DataVolume {dv} status: {e}"));
}
