//! The `vitistack.io/v1alpha1` KubevirtConfig: a remote KubeVirt cluster the operator reaches
//! through a kubeconfig kept in a Secret. Cluster-scoped, as in vitistack/common. The leader
//! probes each one and writes what it found into its status (`crate::clusters`).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema::required_without_default;

/// The Secret key holding the kubeconfig.
pub const KUBECONFIG_KEY: &str = "kubeconfig";
/// The one condition type of a KubevirtConfig.
pub const READY_CONDITION: &str = "Ready";
/// Messages are cut to this many bytes, so a long error never bloats the object.
pub const MAX_MESSAGE: usize = 1024;
/// A DNS-1123 subdomain (a Secret's name), as the API server checks object names.
const DNS_SUBDOMAIN: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$";
/// A DNS-1123 label (a namespace's name).
const DNS_LABEL: &str = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$";

/// Phases of a KubevirtConfig.
pub mod phase {
    pub const READY: &str = "Ready";
    pub const NOT_READY: &str = "NotReady";
}

/// A remote KubeVirt cluster, reached with the kubeconfig in a Secret.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "vitistack.io",
    version = "v1alpha1",
    kind = "KubevirtConfig",
    plural = "kubevirtconfigs",
    status = "KubevirtConfigStatus",
    doc = "A remote KubeVirt cluster the operator makes Machines' VMs on, reached with the kubeconfig in a Secret. The status says whether it is reachable and what it serves.",
    printcolumn = r#"{"name":"Phase","type":"string","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Reason","type":"string","priority":1,"jsonPath":".status.reason"}"#,
    printcolumn = r#"{"name":"Machines","type":"integer","jsonPath":".status.machines"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("required" = ["kubeconfigSecretRef", "secretNamespace"]), transform = required_without_default)]
pub struct KubevirtConfigSpec {
    /// Name of the Secret holding the remote cluster's kubeconfig under the key `kubeconfig`
    /// (credentials inline: no exec plugins, no file paths). Updating the Secret rotates the
    /// credentials without a restart.
    #[serde(default)]
    #[schemars(extend("pattern" = DNS_SUBDOMAIN, "maxLength" = 253))]
    pub kubeconfig_secret_ref: String,
    /// Namespace of that Secret (the operator must be allowed to read Secrets there).
    #[serde(default)]
    #[schemars(extend("pattern" = DNS_LABEL, "maxLength" = 63))]
    pub secret_namespace: String,
    /// Whether a Machine on this cluster may clone a volume from another namespace of it (the
    /// author cannot be checked on the remote cluster). Default false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub allow_cross_namespace_clones: Option<bool>,
}

/// What the operator last found; written by the operator only.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KubevirtConfigStatus {
    /// Ready or NotReady.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
    /// Why, in one CamelCase word: Ready, SecretNotFound, SecretForbidden, KeyMissing,
    /// KubeconfigInvalid, Unreachable, Unauthorized or ClusterChanged.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What was found, or what is wrong and how to fix it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("maxLength" = MAX_MESSAGE))]
    pub message: Option<String>,
    /// KubeVirt's VirtualMachines (kubevirt.io/v1) are served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kubevirt_installed: Option<bool>,
    /// CDI's DataVolumes (cdi.kubevirt.io/v1beta1) are served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cdi_installed: Option<bool>,
    /// Multus' NetworkAttachmentDefinitions (k8s.cni.cncf.io/v1) are served.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub multus_installed: Option<bool>,
    /// Machines placed on this cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("minimum" = 0))]
    pub machines: Option<i64>,
    /// The cluster's identity (the uid of its kube-system namespace), recorded at first Ready.
    /// Another one found later stops all work (ClusterChanged) until an admin annotates the
    /// KubevirtConfig `vitistack.io/acknowledge-cluster: <the new uid>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster_identity: Option<String>,
    /// When the cluster was last probed with this outcome (refreshed alone at most every few
    /// minutes, so a healthy cluster costs few writes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_checked: Option<Time>,
    /// One condition, Ready, whose reason is the same word as `reason`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend("maxItems" = 8))]
    pub conditions: Vec<Condition>,
}
