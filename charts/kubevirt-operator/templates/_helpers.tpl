{{/* Names: with the release named kubevirt-operator every object is named as in manifests/. */}}
{{- define "kubevirt-operator.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kubevirt-operator.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "kubevirt-operator.controllerName" -}}
{{- printf "%s-controller-manager" (include "kubevirt-operator.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kubevirt-operator.webhookServiceName" -}}
{{- default (printf "%s-webhook" (include "kubevirt-operator.fullname" .)) .Values.webhook.serviceName | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "kubevirt-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "kubevirt-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "kubevirt-operator.labels" -}}
{{ include "kubevirt-operator.selectorLabels" . }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.extraLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* metadata.labels and, when set, metadata.annotations of every object. */}}
{{- define "kubevirt-operator.meta" -}}
labels:
  {{- include "kubevirt-operator.labels" . | nindent 2 }}
{{- with .Values.extraAnnotations }}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "kubevirt-operator.certManager" -}}
{{- eq .Values.certificates.mode "cert-manager" -}}
{{- end -}}

{{/* The operator's image: repository:tag, and @digest when one is given. */}}
{{- define "kubevirt-operator.image" -}}
{{- $image := printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) -}}
{{- with .Values.image.digest -}}
{{- $image = printf "%s@%s" $image . -}}
{{- end -}}
{{- $image -}}
{{- end -}}

{{/*
Rules on namespaced objects: in a ClusterRole (every namespace) or, with watchNamespaces, in a
Role per watched namespace. Keep in step with manifests/rbac/cluster_role.yaml (a test compares).
*/}}
{{- define "kubevirt-operator.namespacedRules" -}}
# Machines: watched; the finalizer is added and removed with a merge patch; read by name by the
# snapshot and restore controllers.
- apiGroups: ["vitistack.io"]
  resources: ["machines"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["vitistack.io"]
  resources: ["machines/status"]
  verbs: ["patch"]
# Owner references with blockOwnerDeletion (OwnerReferencesPermissionEnforcement).
- apiGroups: ["vitistack.io"]
  resources: ["machines/finalizers", "networkconfigurations/finalizers"]
  verbs: ["update"]
- apiGroups: ["vitistack.io"]
  resources: ["networkconfigurations"]
  verbs: ["list", "watch"]
- apiGroups: ["kubevirt.io"]
  resources: ["virtualmachines"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# VMIs are deleted (by uid) to restart a VM; KubeVirt starts the new one.
- apiGroups: ["kubevirt.io"]
  resources: ["virtualmachineinstances"]
  verbs: ["get", "list", "watch", "delete"]
# Claims: also read by name by the validating webhook, to learn whether a new disk would adopt
# one that exists (its author is then asked for update and delete on it).
- apiGroups: [""]
  resources: ["persistentvolumeclaims"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# A restore's consumer Pod, binding claims of a WaitForFirstConsumer class (read, made, deleted).
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get", "create", "delete"]
# Cloud-init Secrets are read one by one (never listed); the derived Secret is applied and deleted.
# A remote Machine's disk-source credentials are read by name too, and copied to its cluster.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "create", "patch", "delete"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get"]
- apiGroups: ["k8s.cni.cncf.io"]
  resources: ["network-attachment-definitions"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# CDI DataVolumes for disks with a source and CD-ROMs: watched, applied, read and deleted (or
# released) by the finalizer.
- apiGroups: ["cdi.kubevirt.io"]
  resources: ["datavolumes"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# MachineSnapshots: watched, read by a restore, made by schedules and deleted beyond keep,
# patched for the finalizer of one taken on a remote cluster; MachineRestores watched, read and
# patched (their finalizer); their status written (src/snapshots/).
- apiGroups: ["vitistack.io"]
  resources: ["machinesnapshots"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["vitistack.io"]
  resources: ["machinerestores"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["vitistack.io"]
  resources: ["machinesnapshots/status", "machinerestores/status"]
  verbs: ["patch"]
- apiGroups: ["vitistack.io"]
  resources: ["machinesnapshots/finalizers", "machinerestores/finalizers"]
  verbs: ["update"]
# KubeVirt's snapshots and restores, one per MachineSnapshot and MachineRestore, controlled by it.
- apiGroups: ["snapshot.kubevirt.io"]
  resources: ["virtualmachinesnapshots", "virtualmachinerestores"]
  verbs: ["get", "list", "watch", "create"]
# Read by the mutating webhook for a clone from a MachineSnapshot: each disk's VolumeSnapshot.
- apiGroups: ["snapshot.kubevirt.io"]
  resources: ["virtualmachinesnapshotcontents"]
  verbs: ["get"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create"]
{{- end -}}

{{- define "kubevirt-operator.clusterRules" -}}
# MachineClasses: listed and watched by every replica, whose webhooks size and bound Machines by
# them (src/classes/watch.rs); never written.
- apiGroups: ["vitistack.io"]
  resources: ["machineclasses"]
  verbs: ["list", "watch"]
- apiGroups: ["storage.k8s.io"]
  resources: ["storageclasses"]
  verbs: ["list", "watch"]
# CDI's StorageProfiles, watched when CDI is installed: the modes of a disk that sets none.
- apiGroups: ["cdi.kubevirt.io"]
  resources: ["storageprofiles"]
  verbs: ["list", "watch"]
# KubeVirt's install resource, watched (never written): whether a disk added to a running
# Machine can be hot-plugged (its feature gates and vmRolloutStrategy).
- apiGroups: ["kubevirt.io"]
  resources: ["kubevirts"]
  verbs: ["list", "watch"]
# Nodes, watched for their Ready condition only: a VM on a node NotReady past the grace is
# reported (NodeUnreachable); never written.
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["list", "watch"]
# DataSources, read by name by the validating webhook in whatever namespace a Machine names, to
# ask its author about the PVC or snapshot a dataSource clone points to.
- apiGroups: ["cdi.kubevirt.io"]
  resources: ["datasources"]
  verbs: ["get"]
# The validating webhook asks, as a Machine's author, whether they may reach what the Machine
# refers to (Secrets, ConfigMaps, a clone's source) or would adopt (an existing claim):
# src/access/review.rs.
- apiGroups: ["authorization.k8s.io"]
  resources: ["subjectaccessreviews"]
  verbs: ["create"]
# At leader start the served Machine CRD is read, by name only, to warn when its status schema
# lacks fields the operator writes: src/reconciler/run/served_crd.rs.
- apiGroups: ["apiextensions.k8s.io"]
  resources: ["customresourcedefinitions"]
  resourceNames: ["machines.vitistack.io"]
  verbs: ["get"]
# KubevirtConfigs (remote clusters), cluster-scoped: watched by the leader, which writes what it
# found into their status (src/clusters/).
- apiGroups: ["vitistack.io"]
  resources: ["kubevirtconfigs"]
  verbs: ["list", "watch"]
- apiGroups: ["vitistack.io"]
  resources: ["kubevirtconfigs/status"]
  verbs: ["patch"]
# Namespaces, read by name (never listed or watched) when a KubevirtConfig sets a
# namespaceSelector: by the validating webhook at a Machine's CREATE (src/admission/remote.rs)
# and by the reconciler for each Machine placed there (src/reconciler/run/placement.rs).
- apiGroups: [""]
  resources: ["namespaces"]
  verbs: ["get"]
{{- if ne (include "kubevirt-operator.certManager" .) "true" }}
# The release's own webhook configurations (templates/webhooks.yaml), by name only: read,
# watched and updated to fill their caBundle. No create: the chart installs them.
- apiGroups: ["admissionregistration.k8s.io"]
  resources: ["mutatingwebhookconfigurations", "validatingwebhookconfigurations"]
  resourceNames: [{{ include "kubevirt-operator.fullname" . | quote }}]
  verbs: ["get", "list", "watch", "update"]
{{- end }}
{{- end -}}

{{/*
The webhooks' namespaceSelector: every namespace, or with watchNamespaces only those, by the name
label kube-apiserver 1.21+ sets on every namespace (as the operator writes it: src/certs/scope.rs).
*/}}
{{- define "kubevirt-operator.namespaceSelector" -}}
{{- if .Values.watchNamespaces }}
namespaceSelector:
  matchExpressions:
  - key: kubernetes.io/metadata.name
    operator: In
    values: {{ toJson .Values.watchNamespaces }}
{{- else }}
namespaceSelector: {}
{{- end }}
{{- end }}

{{/*
KubeVirt's power subresources of the VMIs on the operator's own cluster, which the aggregated API
calls for the Machines there (src/subresources/relay.rs), and the VMs' stop, asked with a stop's
grace period (src/subresources/power_through_machine.rs). A force stop's VMI deletion is the
operator's own right (its ClusterRole: restarts delete VMIs too).
*/}}
{{- define "kubevirt-operator.vmiPowerRule" -}}
- apiGroups: ["subresources.kubevirt.io"]
  resources: ["virtualmachineinstances/pause", "virtualmachineinstances/unpause", "virtualmachineinstances/softreboot", "virtualmachines/stop"]
  verbs: ["update"]
- apiGroups: ["subresources.kubevirt.io"]
  resources: ["virtualmachineinstances/console", "virtualmachineinstances/vnc"]
  verbs: ["get"]
{{- end -}}
