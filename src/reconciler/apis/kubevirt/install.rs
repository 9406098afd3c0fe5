//! KubeVirt's own install resource (`kubevirts.kubevirt.io`, usually `kubevirt/kubevirt`): only
//! the configuration that says whether a disk can be hot-plugged is read (its feature gates and
//! `vmRolloutStrategy`). Never written.

use serde::{Deserialize, Serialize};

foreign_resource! {
    /// A KubeVirt install; only `spec.configuration` is read.
    #[kube(
        group = "kubevirt.io",
        version = "v1",
        kind = "KubeVirt",
        plural = "kubevirts",
        namespaced
    )]
    pub struct KubeVirtSpec {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub configuration: Option<KubeVirtConfiguration>,
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct KubeVirtConfiguration {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub developer_configuration: Option<DeveloperConfiguration>,
    /// `Stage` (KubeVirt's default) or `LiveUpdate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_rollout_strategy: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub struct DeveloperConfiguration {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub feature_gates: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub disabled_feature_gates: Vec<String>,
}

impl KubeVirt {
    /// Its feature gates listed as enabled, and its rollout strategy.
    pub fn gates_and_rollout(&self) -> (&[String], Option<&str>) {
        let c = self.spec.configuration.as_ref();
        let gates = c
            .and_then(|c| c.developer_configuration.as_ref())
            .map_or(&[][..], |d| d.feature_gates.as_slice());
        (gates, c.and_then(|c| c.vm_rollout_strategy.as_deref()))
    }
}
