//! SPEC's names, defined once: labels, annotations, the finalizer, the field manager and the
//! cloud-init volume, and the claim name of a disk. Every module (admission, reconciler, tests)
//! imports them from here; this module imports nothing.

/// Field manager of every write the operator makes.
pub const FIELD_MANAGER: &str = "kubevirt-operator";
/// On every object the operator makes, with the value [`MANAGED_BY`].
pub const MANAGED_BY_LABEL: &str = "vitistack.io/managed-by";
pub const MANAGED_BY: &str = "kubevirt-operator";
/// On every object made for a Machine: the Machine's name.
pub const MACHINE_LABEL: &str = "vitistack.io/machine";
/// On NetworkAttachmentDefinitions, which serve every Machine on a NetworkConfiguration.
pub const NETWORK_LABEL: &str = "vitistack.io/network-configuration";
/// The Machine finalizer: cleanup before the Machine goes.
pub const FINALIZER: &str = "machine.vitistack.io/cleanup";
/// `"true"` keeps a Machine's PVCs when it is deleted (released, labelled for re-adoption).
pub const RETAIN_DISKS_ANNOTATION: &str = "vitistack.io/retain-disks";
/// On every object the reconciler makes for a Machine: the Machine's uid and an HMAC only the
/// operator can make (see `reconciler::decide::evidence`).
pub const PROOF_ANNOTATION: &str = "vitistack.io/made-for";
/// On a disk kept when its Machine went: an HMAC over its uid and the Machine's name, so only
/// that very object may be adopted by a Machine of that name.
pub const RELEASE_ANNOTATION: &str = "vitistack.io/released-for";
/// The Secret, in the operator's namespace, holding the key of [`PROOF_ANNOTATION`].
pub const OWNERSHIP_KEY_SECRET: &str = "kubevirt-operator-ownership-key";
/// A new value (an RFC 3339 time) restarts the Machine's VM once, like `kubectl rollout restart`.
pub const RESTARTED_AT_ANNOTATION: &str = "vitistack.io/restarted-at";
/// On a Machine, written by `machines/stop` and `machines/forcestop` (an RFC 3339 time): the VM is
/// halted whatever `spec.runStrategy` says, until `machines/start` removes it. An annotation of
/// its own, not a spec field, so a GitOps tool re-applying its manifest never undoes a stop.
pub const STOPPED_AT_ANNOTATION: &str = "vitistack.io/stopped-at";
/// Field manager of the Machine writes the power buttons make (the record of a stop or restart).
pub const POWER_FIELD_MANAGER: &str = "kubevirt-operator-power";
/// On a Machine, written by the mutating webhook: what each `dataSource` volume clones, as
/// resolved and checked at admission (see `api::clone_sources`).
pub const CLONE_SOURCES_ANNOTATION: &str = "vitistack.io/clone-sources";
/// Hash of what was last applied to an object (see `reconciler::decide::drift`).
pub const APPLIED_HASH_ANNOTATION: &str = "vitistack.io/applied-hash";
/// The label kube-apiserver (1.21 and later) sets on every namespace: its name. The webhook
/// configurations select the watched namespaces by it.
pub const NAMESPACE_NAME_LABEL: &str = "kubernetes.io/metadata.name";
/// On a Machine: the KubevirtConfig whose cluster runs its VM. Set at creation (the mutating
/// webhook writes `--default-kubevirt-config` when it is unset) and never changed after.
pub const KUBEVIRT_CONFIG_ANNOTATION: &str = "vitistack.io/kubevirt-config";
/// `"true"` on a Machine whose remote cluster cannot be reached lets its deletion finish without
/// cleaning up there (what it made there is left behind).
pub const ABANDON_REMOTE_ANNOTATION: &str = "vitistack.io/abandon-remote";
/// On a KubevirtConfig: the identity (kube-system uid) of the cluster an admin accepts it now
/// reaches, after it reported `ClusterChanged`.
pub const ACKNOWLEDGE_CLUSTER_ANNOTATION: &str = "vitistack.io/acknowledge-cluster";
/// The Machine kind and its API group/version.
pub const GROUP: &str = "vitistack.io";
pub const VERSION: &str = "v1alpha1";
pub const MACHINE_KIND: &str = "Machine";
/// The cluster-scoped kind of the sizes a Machine names in `spec.template`.
pub const MACHINE_CLASS_KIND: &str = "MachineClass";
/// On a Machine, written by the mutating webhook: the MachineClass it is sized from, as it was
/// when the Machine chose it (JSON: name, cpu, memory, disks, limits). Editing or deleting the
/// class later never changes the Machine (see `machine::classes::record`).
pub const CLASS_ANNOTATION: &str = "vitistack.io/machine-class";
/// The Machine CustomResourceDefinition's name (`<plural>.<group>`).
pub const MACHINE_CRD: &str = "machines.vitistack.io";
/// The VM's cloud-init volume; no Machine disk or CD-ROM may take the name (KubeVirt refuses two).
pub const CLOUD_INIT_VOLUME: &str = "cloudinitdisk";

/// The claim (and DataVolume) of `volume` (a disk or CD-ROM) of Machine `machine`.
pub fn pvc_name(machine: &str, volume: &str) -> String {
    format!("{machine}-{volume}")
}
