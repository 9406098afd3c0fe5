//! Least privilege, proven from the API server's audit log: `kubevirt-operator run` (self-managed
//! certificates, leader election on) runs on a dedicated control plane as a user bound to exactly
//! `manifests/rbac/cluster_role.yaml`, `leader_election_role.yaml`, `certificates_role.yaml`,
//! `ownership_key_role.yaml` and `kubevirt_config_role.yaml`,
//! through a scenario that walks the operator's code paths. Then, for that user's requests:
//! (a) none was forbidden (a grant is missing), and (b) every (apiGroup, resource, verb) the
//! manifests grant was used at least once (a grant is superfluous), except a short, checked list
//! of grants this API server cannot exercise.
//!
//! A grant of a namespaced Role counts as used by a request in the Role's namespace; a grant of
//! the ClusterRole only by a request no Role would have allowed (so the ClusterRole's `secrets`
//! rule must be needed for the Machines' namespaces, not just overlap with the certificates).

mod operator;
mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Secret};
use k8s_openapi::api::rbac::v1::{
    ClusterRole, ClusterRoleBinding, PolicyRule, Role, RoleBinding, RoleRef, Subject,
};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, Patch, PatchParams, PostParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use kubevirt_operator::api::names::{MACHINE_CRD, OWNERSHIP_KEY_SECRET};
use kubevirt_operator::api::{
    KubevirtConfig, Machine, MachineRestore, MachineSnapshot, NetworkConfiguration,
};
use kubevirt_operator::certs::{
    BUNDLE_CONFIGMAP, BUNDLE_KEY, CA_SECRET, SERVING_SECRET, WEBHOOK_CONFIGURATION,
};
use kubevirt_operator::reconciler::apis::kubevirt::{VirtualMachine, VirtualMachineInstance};
use kubevirt_operator::reconciler::apis::multus::NetworkAttachmentDefinition;
use kubevirt_operator::reconciler::apis::snapshot::{
    VirtualMachineRestore, VirtualMachineSnapshot,
};
use operator::eventually;
use support::{AuditedRequest, Fixture, OPERATOR_NAMESPACE, Proc};

const USER: &str = "rbac-least-privilege";
const WAIT: Duration = Duration::from_secs(60);

/// Grants this control plane cannot exercise, with the reason; each reason is checked below.
const EXEMPT: &[(&str, &str, &str, &str)] = &[
    (
        "vitistack.io",
        "machinesnapshots/finalizers",
        "update",
        "needed to set blockOwnerDeletion on owner references to MachineSnapshots (their \
         VirtualMachineSnapshots), which only OwnerReferencesPermissionEnforcement checks",
    ),
    (
        "vitistack.io",
        "machinerestores/finalizers",
        "update",
        "needed to set blockOwnerDeletion on owner references to MachineRestores (their \
         VirtualMachineRestores), which only OwnerReferencesPermissionEnforcement checks",
    ),
    (
        "vitistack.io",
        "machinesnapshots",
        "create",
        "a schedule's snapshot: due at the next cron minute at the soonest, so exercised with a \
         clock moved by hand in tests/snapshot_schedule_e2e.rs instead",
    ),
    (
        "vitistack.io",
        "machinesnapshots",
        "delete",
        "a schedule's snapshot beyond keep: exercised with a clock moved by hand in \
         tests/snapshot_schedule_e2e.rs",
    ),
    (
        "vitistack.io",
        "machinerestores",
        "get",
        "read fresh to record the uid of a disk a restore made again: exercised past the \
         commit point in tests/restore_trust_e2e.rs (this restore fails before it)",
    ),
    (
        "",
        "pods",
        "create",
        "a restore's consumer Pod for claims of a WaitForFirstConsumer class: exercised in \
         tests/restore_trust_e2e.rs",
    ),
    (
        "",
        "pods",
        "delete",
        "a restore's consumer Pod, once the claims are bound: exercised in \
         tests/restore_trust_e2e.rs",
    ),
    (
        "vitistack.io",
        "machines/finalizers",
        "update",
        "needed to set blockOwnerDeletion on owner references to Machines, which only the \
         OwnerReferencesPermissionEnforcement admission plugin checks (not enabled here)",
    ),
    (
        "vitistack.io",
        "networkconfigurations/finalizers",
        "update",
        "needed to set blockOwnerDeletion on owner references to NetworkConfigurations (the \
         attachments), which only OwnerReferencesPermissionEnforcement checks (not enabled here)",
    ),
];

fn manifest(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(path)
}

fn yaml<T: serde::de::DeserializeOwned>(path: &str) -> T {
    serde_yaml::from_str(&std::fs::read_to_string(manifest(path)).expect(path)).expect(path)
}

/// One granted (apiGroup, resource[/subresource], verb), from a Role (namespace) or the
/// ClusterRole (None).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Grant {
    source: &'static str,
    namespace: Option<String>,
    group: String,
    resource: String,
    verb: String,
    /// resourceNames; empty: any name.
    names: Vec<String>,
}

fn grants(source: &'static str, namespace: Option<&str>, rules: &[PolicyRule]) -> Vec<Grant> {
    let mut out = Vec::new();
    for rule in rules {
        let groups = rule.api_groups.clone().unwrap_or_default();
        let resources = rule.resources.clone().unwrap_or_default();
        let names = rule.resource_names.clone().unwrap_or_default();
        for g in &groups {
            for r in &resources {
                for v in &rule.verbs {
                    assert!(g != "*" && r != "*" && v != "*", "{source}: wildcard grant");
                    out.push(Grant {
                        source,
                        namespace: namespace.map(str::to_owned),
                        group: g.clone(),
                        resource: r.clone(),
                        verb: v.clone(),
                        names: names.clone(),
                    });
                }
            }
        }
    }
    out
}

fn resource_of(r: &AuditedRequest) -> String {
    if r.subresource.is_empty() {
        r.resource.clone()
    } else {
        format!("{}/{}", r.resource, r.subresource)
    }
}

/// The RBAC verbs a request needed: its own, and `create` for a server-side apply that created.
fn verbs_of(r: &AuditedRequest) -> Vec<&str> {
    let mut v = vec![r.verb.as_str()];
    if r.verb == "patch" && r.code == 201 {
        v.push("create");
    }
    v
}

fn allows(g: &Grant, r: &AuditedRequest) -> bool {
    g.group == r.api_group
        && g.resource == resource_of(r)
        && verbs_of(r).contains(&g.verb.as_str())
        && g.namespace.as_ref().is_none_or(|ns| *ns == r.namespace)
        && (g.names.is_empty() || g.names.contains(&r.name))
}

/// Scope as well as verbs: in the operator's namespace and on the cluster-scoped webhook
/// configurations, every right but `create` names the objects the operator owns (create cannot
/// be limited by name: the name is in the body).
#[test]
fn grants_on_the_operators_own_objects_name_them() {
    let cluster_role: ClusterRole = yaml("manifests/rbac/cluster_role.yaml");
    let lease_role: Role = yaml("manifests/rbac/leader_election_role.yaml");
    let certs_role: Role = yaml("manifests/rbac/certificates_role.yaml");
    let key_role: Role = yaml("manifests/rbac/ownership_key_role.yaml");
    let kc_role: Role = yaml("manifests/rbac/kubevirt_config_role.yaml");
    let mut checked = 0;
    let named = |g: &Grant, expected: &[&str]| {
        if g.verb == "create" {
            assert!(g.names.is_empty(), "{g:?}");
        } else {
            assert_eq!(
                g.names, expected,
                "{g:?}: limited to the operator's own objects"
            );
        }
    };
    for g in grants(
        "cluster_role.yaml",
        None,
        cluster_role.rules.as_deref().unwrap_or_default(),
    ) {
        if g.group == "admissionregistration.k8s.io" {
            // Issue 24: the manifests install the webhook configurations; the operator only
            // fills their caBundle, so no create (which cannot be limited by name) at all.
            assert_ne!(
                g.verb, "create",
                "{g:?}: the operator creates no webhook configuration"
            );
            named(&g, &[WEBHOOK_CONFIGURATION]);
            checked += 1;
        } else if g.group == "apiextensions.k8s.io" {
            // Read only, and only the Machine CRD (its status schema, at leader start).
            assert_eq!(
                (g.verb.as_str(), g.resource.as_str()),
                ("get", "customresourcedefinitions")
            );
            named(&g, &[MACHINE_CRD]);
            checked += 1;
        } else {
            assert!(g.names.is_empty(), "{g:?}");
        }
    }
    for g in grants(
        "leader_election_role.yaml",
        Some(OPERATOR_NAMESPACE),
        lease_role.rules.as_deref().unwrap_or_default(),
    ) {
        named(&g, &[kubevirt_operator::leader::LEASE_NAME]);
        checked += 1;
    }
    for g in grants(
        "certificates_role.yaml",
        Some(OPERATOR_NAMESPACE),
        certs_role.rules.as_deref().unwrap_or_default(),
    ) {
        match g.resource.as_str() {
            "secrets" => named(&g, &[CA_SECRET, SERVING_SECRET]),
            "configmaps" => named(&g, &[BUNDLE_CONFIGMAP]),
            other => panic!("certificates_role.yaml grants {other}"),
        }
        checked += 1;
    }
    for g in grants(
        "ownership_key_role.yaml",
        Some(OPERATOR_NAMESPACE),
        key_role.rules.as_deref().unwrap_or_default(),
    ) {
        assert_eq!(g.resource, "secrets", "{g:?}");
        named(&g, &[OWNERSHIP_KEY_SECRET]);
        checked += 1;
    }
    // Issue 22: KubevirtConfigs' kubeconfig Secrets. Their names are the KubevirtConfigs', so
    // not in the Role; list and watch only (each config's Secret is watched by a field
    // selector), no get and no write.
    for g in grants(
        "kubevirt_config_role.yaml",
        Some(OPERATOR_NAMESPACE),
        kc_role.rules.as_deref().unwrap_or_default(),
    ) {
        assert_eq!(
            (g.group.as_str(), g.resource.as_str()),
            ("", "secrets"),
            "{g:?}"
        );
        assert!(matches!(g.verb.as_str(), "list" | "watch"), "{g:?}");
        checked += 1;
    }
    // Webhook configurations: 2 kinds x (get, list, watch, update); the Machine CRD: get; the
    // Lease: get, patch, create; Secrets: get, list, watch, update, delete, create; the
    // ConfigMap: 5; the ownership key: get, create; kubeconfig Secrets: list, watch.
    assert_eq!(
        checked,
        8 + 1 + 3 + 6 + 5 + 2 + 2,
        "every grant on the operator's own objects was checked"
    );
}

async fn create<K>(api: &Api<K>, obj: &K)
where
    K: kube::Resource + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.create(&PostParams::default(), obj)
        .await
        .unwrap_or_else(|e| panic!("creating {}: {e}", obj.name_any()));
}

/// Installs the three manifests and binds them to `USER` (a User subject instead of the
/// ServiceAccount). Returns the grants.
async fn bind_manifests(client: &Client) -> Vec<Grant> {
    let cluster_role: ClusterRole = yaml("manifests/rbac/cluster_role.yaml");
    let lease_role: Role = yaml("manifests/rbac/leader_election_role.yaml");
    let certs_role: Role = yaml("manifests/rbac/certificates_role.yaml");
    let key_role: Role = yaml("manifests/rbac/ownership_key_role.yaml");
    let kc_role: Role = yaml("manifests/rbac/kubevirt_config_role.yaml");
    let subject = Subject {
        kind: "User".into(),
        name: USER.into(),
        api_group: Some("rbac.authorization.k8s.io".into()),
        namespace: None,
    };
    create(&Api::<ClusterRole>::all(client.clone()), &cluster_role).await;
    let mut crb = ClusterRoleBinding {
        role_ref: RoleRef {
            api_group: "rbac.authorization.k8s.io".into(),
            kind: "ClusterRole".into(),
            name: cluster_role.name_any(),
        },
        subjects: Some(vec![subject.clone()]),
        ..Default::default()
    };
    crb.metadata.name = Some(format!("{USER}-cluster"));
    create(&Api::<ClusterRoleBinding>::all(client.clone()), &crb).await;
    let mut out = grants(
        "cluster_role.yaml",
        None,
        cluster_role.rules.as_deref().unwrap_or_default(),
    );
    for (file, role) in [
        ("leader_election_role.yaml", &lease_role),
        ("certificates_role.yaml", &certs_role),
        ("ownership_key_role.yaml", &key_role),
        ("kubevirt_config_role.yaml", &kc_role),
    ] {
        let ns = role.namespace().expect("Roles name their namespace");
        assert_eq!(ns, OPERATOR_NAMESPACE, "{file}");
        create(&Api::<Role>::namespaced(client.clone(), &ns), role).await;
        let mut rb = RoleBinding {
            role_ref: RoleRef {
                api_group: "rbac.authorization.k8s.io".into(),
                kind: "Role".into(),
                name: role.name_any(),
            },
            subjects: Some(vec![subject.clone()]),
            ..Default::default()
        };
        rb.metadata.name = Some(format!("{USER}-{}", role.name_any()));
        create(&Api::<RoleBinding>::namespaced(client.clone(), &ns), &rb).await;
        out.extend(grants(
            file,
            Some(&ns),
            role.rules.as_deref().unwrap_or_default(),
        ));
    }
    out
}

fn dynamic(client: &Client, ns: &str, ar: &ApiResource) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, ar)
}

async fn create_machine(client: &Client, ns: &str, object: Value) -> Result<(), String> {
    let mut object = object;
    object["apiVersion"] = "vitistack.io/v1alpha1".into();
    object["kind"] = "Machine".into();
    let obj: DynamicObject = serde_json::from_value(object).expect("machine object");
    dynamic(client, ns, &ApiResource::erase::<Machine>(&()))
        .create(&PostParams::default(), &obj)
        .await
        .map(drop)
        .map_err(|e| e.to_string())
}

async fn get<K>(api: &Api<K>, name: &str) -> Option<K>
where
    K: kube::Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.get_opt(name).await.ok().flatten()
}

async fn phase(machines: &Api<Machine>, name: &str) -> Option<String> {
    get(machines, name).await?.status?.phase
}

fn condition_reason(m: &Machine, type_: &str) -> Option<String> {
    m.status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.reason.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_manifests_grant_exactly_what_the_operator_uses() {
    let started = Instant::now();
    let cp = Fixture::new().with_all_crds().user(USER, &[]).start().await;
    let admin = cp.admin_client().await;
    let granted = bind_manifests(&admin).await;
    let user = cp.user(USER);

    // A managed but wrongly typed serving Secret: the leader must delete and recreate it.
    let mut wrong = Secret {
        type_: Some("Opaque".into()),
        data: Some(BTreeMap::from([(
            "junk".to_owned(),
            ByteString(b"x".to_vec()),
        )])),
        ..Secret::default()
    };
    wrong.metadata.name = Some(SERVING_SECRET.into());
    wrong.metadata.labels = Some(kubevirt_operator::certs::managed_labels());
    create(
        &Api::<Secret>::namespaced(admin.clone(), OPERATOR_NAMESPACE),
        &wrong,
    )
    .await;

    // The operator, self-managed certificates, leader election on, filling the webhook
    // configurations installed for its URL (in a cluster: manifests/webhooks.yaml).
    let port = support::free_port().expect("port");
    support::webhooks::install_for_url(
        &admin,
        OPERATOR_NAMESPACE,
        &format!("https://127.0.0.1:{port}"),
    )
    .await;
    let dir = cp.dir().join("operator");
    std::fs::create_dir_all(&dir).expect("operator dir");
    let kubeconfig = cp.write_kubeconfig(user, None).expect("kubeconfig");
    let args: Vec<OsString> = [
        "--log-format",
        "json",
        "run",
        "--kubeconfig",
        kubeconfig.to_str().expect("utf-8 path"),
        "--namespace",
        OPERATOR_NAMESPACE,
        "--identity",
        "rbac",
        "--allowed-bridges",
        "br0",
        "--allowed-vlans",
        "3",
        "--leader-election",
        "true",
        "--reconcile-interval",
        "2s",
        "--webhook-url",
        &format!("https://127.0.0.1:{port}"),
        "--listen",
        &format!("127.0.0.1:{port}"),
        "--metrics-bind-address",
        "127.0.0.1:0",
        "--health-probe-bind-address",
        "127.0.0.1:0",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    let mut op = Proc::spawn(
        "kubevirt-operator",
        Path::new(env!("CARGO_BIN_EXE_kubevirt-operator")),
        args,
        dir.join("operator.log"),
    )
    .expect("spawn operator");
    let log = |op: &Proc| op.log_tail(80);

    // The serving Secret replaced by a TLS one; the webhook configurations filled.
    let secrets_sys: Api<Secret> = Api::namespaced(admin.clone(), OPERATOR_NAMESPACE);
    eventually(
        WAIT,
        "the serving Secret to be recreated as TLS",
        || async {
            let s = get(&secrets_sys, SERVING_SECRET).await?;
            (s.type_.as_deref() == Some("kubernetes.io/tls")).then_some(())
        },
    )
    .await;
    let mutating: Api<MutatingWebhookConfiguration> = Api::all(admin.clone());
    eventually(
        WAIT,
        "the mutating webhook configuration filled",
        || async {
            let m = get(&mutating, WEBHOOK_CONFIGURATION).await?;
            m.webhooks?
                .first()?
                .client_config
                .ca_bundle
                .clone()
                .map(drop)
        },
    )
    .await;

    // Inputs: a StorageClass, a NetworkConfiguration, a cloud-init Secret with a non-default key.
    let ns = cp.namespace("rbac").await.expect("namespace");
    let sc: StorageClass = serde_json::from_value(json!({
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": "fast"}, "provisioner": "example.com/none"
    }))
    .expect("SC");
    create(&Api::<StorageClass>::all(admin.clone()), &sc).await;
    let nc: NetworkConfiguration = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "NetworkConfiguration",
        "metadata": {"name": "lan"}, "spec": {"bridge": "br0", "vlan": 3}
    }))
    .expect("NC");
    let ncs: Api<NetworkConfiguration> = Api::namespaced(admin.clone(), &ns);
    create(&ncs, &nc).await;
    let mut boot = Secret {
        data: Some(BTreeMap::from([(
            "cfg".to_owned(),
            ByteString(b"#cloud-config\n".to_vec()),
        )])),
        ..Secret::default()
    };
    boot.metadata.name = Some("boot".into());
    create(&Api::<Secret>::namespaced(admin.clone(), &ns), &boot).await;
    // A DataSource: the webhook reads it to ask the author about the PVC it points to.
    let ds_ar = ApiResource::from_gvk_with_plural(
        &kube::api::GroupVersionKind::gvk("cdi.kubevirt.io", "v1beta1", "DataSource"),
        "datasources",
    );
    let ds: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "cdi.kubevirt.io/v1beta1", "kind": "DataSource",
        "metadata": {"name": "golden"},
        "spec": {"source": {"pvc": {"name": "golden-disk", "namespace": ns}}}
    }))
    .expect("DataSource");
    create(&dynamic(&admin, &ns, &ds_ar), &ds).await;

    // Issue 22: a KubevirtConfig whose Secret (in the operator's namespace) holds no valid
    // kubeconfig: the leader watches it and the Secret, and writes the reason into its status.
    let mut kc_secret = Secret {
        data: Some(BTreeMap::from([(
            "kubeconfig".to_owned(),
            ByteString(b"clusters: [unclosed".to_vec()),
        )])),
        ..Secret::default()
    };
    kc_secret.metadata.name = Some("dc1-kubeconfig".into());
    create(&secrets_sys, &kc_secret).await;
    let kc: KubevirtConfig = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "KubevirtConfig",
        "metadata": {"name": "dc1"},
        "spec": {"kubeconfigSecretRef": "dc1-kubeconfig", "secretNamespace": OPERATOR_NAMESPACE}
    }))
    .expect("KubevirtConfig");
    let kcs: Api<KubevirtConfig> = Api::all(admin.clone());
    create(&kcs, &kc).await;
    eventually(WAIT, "dc1's status to say KubeconfigInvalid", || async {
        let s = get(&kcs, "dc1").await?.status?;
        (s.reason.as_deref() == Some("KubeconfigInvalid")).then_some(())
    })
    .await;

    // Machines, through the webhooks (retried until kube-apiserver trusts the certificate).
    let machines_json = [
        json!({"metadata": {"name": "alpha"}, "spec": {"template": "small",
            "disks": [{"name": "data", "size": "1Gi", "storageClass": "fast"}],
            "networks": [{"name": "eth0", "networkName": "lan"}],
            "cloudInit": {"secretRef": {"name": "boot", "key": "cfg"}}}}),
        json!({"metadata": {"name": "beta", "annotations": {"vitistack.io/retain-disks": "true"}},
            "spec": {"template": "small", "disks": [{"name": "data", "size": "1Gi"}]}}),
        json!({"metadata": {"name": "gamma"}, "spec": {"template": "small",
            "networks": [{"name": "eth0", "networkName": "lan"}]}}),
        // A disk image: its DataVolume is applied, watched, read and deleted.
        json!({"metadata": {"name": "delta"}, "spec": {"template": "small",
            "disks": [{"name": "root", "source": {"http": {"url": "https://example.com/a.qcow2"}}}]}}),
        // A clone through a DataSource, which the webhook resolves.
        json!({"metadata": {"name": "epsilon"}, "spec": {"template": "small",
            "disks": [{"name": "root", "source": {"dataSource": {"name": "golden"}}}]}}),
    ];
    for m in machines_json {
        let t0 = Instant::now();
        loop {
            match create_machine(&admin, &ns, m.clone()).await {
                Ok(()) => break,
                Err(e) => assert!(
                    t0.elapsed() < WAIT,
                    "creating Machine {}: {e}\n{}",
                    m["metadata"]["name"],
                    log(&op)
                ),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), &ns);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), &ns);
    let nads: Api<NetworkAttachmentDefinition> = Api::namespaced(admin.clone(), &ns);
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), &ns);
    for name in ["alpha", "beta", "gamma", "delta"] {
        eventually(WAIT, &format!("VirtualMachine {name}"), || async {
            get(&vms, name).await.map(drop)
        })
        .await;
    }
    for name in ["alpha-root", "alpha-data", "beta-root", "beta-data"] {
        eventually(WAIT, &format!("PVC {name}"), || async {
            get(&pvcs, name).await.map(drop)
        })
        .await;
    }
    eventually(WAIT, "NAD lan", || async {
        get(&nads, "lan").await.map(drop)
    })
    .await;
    eventually(WAIT, "the derived Secret", || async {
        get(&secrets, "alpha-cloudinit").await.map(drop)
    })
    .await;

    // KubeVirt's part: a VMI for alpha, running, then gone; twice, so that the repeated
    // "Running" Event is patched (a series) rather than created.
    let machines: Api<Machine> = Api::namespaced(admin.clone(), &ns);
    let vmis = dynamic(
        &admin,
        &ns,
        &ApiResource::erase::<VirtualMachineInstance>(&()),
    );
    // KubeVirt's VMIs are controlled by their VM; only such a VMI feeds the Machine's status.
    let vm_uid = dynamic(&admin, &ns, &ApiResource::erase::<VirtualMachine>(&()))
        .get("alpha")
        .await
        .expect("alpha's VM")
        .metadata
        .uid;
    for _ in 0..2 {
        let vmi: DynamicObject = serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
            "metadata": {"name": "alpha", "labels": {
                "vitistack.io/machine": "alpha", "vitistack.io/managed-by": "kubevirt-operator"},
                "ownerReferences": [{"apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
                    "name": "alpha", "uid": vm_uid, "controller": true}]},
            "spec": {"domain": {"devices": {}}}
        }))
        .expect("VMI");
        vmis.create(&PostParams::default(), &vmi)
            .await
            .expect("create VMI");
        vmis.patch_status(
            "alpha",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Running", "nodeName": "node-a"}})),
        )
        .await
        .expect("VMI status");
        eventually(WAIT, "alpha Running", || async {
            (phase(&machines, "alpha").await.as_deref() == Some("Running")).then_some(())
        })
        .await;
        vmis.delete("alpha", &DeleteParams::default())
            .await
            .expect("delete VMI");
        eventually(WAIT, "alpha no longer Running", || async {
            (phase(&machines, "alpha").await.as_deref() != Some("Running")).then_some(())
        })
        .await;
    }

    // Issue 21: a snapshot of alpha, KubeVirt's snapshot controller reporting it taken, and a
    // restore from it that KubeVirt fails (the VM is stopped, the VirtualMachineRestore made).
    let snapshot_ar = ApiResource::erase::<MachineSnapshot>(&());
    let restore_ar = ApiResource::erase::<MachineRestore>(&());
    let snap: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineSnapshot",
        "metadata": {"name": "alpha-snap"}, "spec": {"machineName": "alpha"}
    }))
    .expect("MachineSnapshot");
    dynamic(&admin, &ns, &snapshot_ar)
        .create(&PostParams::default(), &snap)
        .await
        .expect("MachineSnapshot");
    let vmsnaps: Api<VirtualMachineSnapshot> = Api::namespaced(admin.clone(), &ns);
    eventually(WAIT, "the VirtualMachineSnapshot", || async {
        get(&vmsnaps, "alpha-snap").await.map(drop)
    })
    .await;
    vmsnaps
        .patch_status(
            "alpha-snap",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Succeeded", "readyToUse": true}})),
        )
        .await
        .expect("VirtualMachineSnapshot status");
    let msnaps: Api<MachineSnapshot> = Api::namespaced(admin.clone(), &ns);
    eventually(WAIT, "alpha-snap ready", || async {
        let s = get(&msnaps, "alpha-snap").await?.status?;
        (s.ready_to_use == Some(true)).then_some(())
    })
    .await;
    let undo: DynamicObject = serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "MachineRestore",
        "metadata": {"name": "alpha-undo"},
        "spec": {"machineName": "alpha", "snapshotName": "alpha-snap"}
    }))
    .expect("MachineRestore");
    dynamic(&admin, &ns, &restore_ar)
        .create(&PostParams::default(), &undo)
        .await
        .expect("MachineRestore");
    let vmrestores: Api<VirtualMachineRestore> = Api::namespaced(admin.clone(), &ns);
    eventually(WAIT, "the VirtualMachineRestore", || async {
        get(&vmrestores, "alpha-undo").await.map(drop)
    })
    .await;
    vmrestores
        .patch_status(
            "alpha-undo",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"complete": false, "conditions": [
                {"type": "Failure", "status": "True", "message": "no VolumeSnapshotClass"}]}})),
        )
        .await
        .expect("VirtualMachineRestore status");
    let mrestores: Api<MachineRestore> = Api::namespaced(admin.clone(), &ns);
    eventually(WAIT, "alpha-undo Failed", || async {
        let s = get(&mrestores, "alpha-undo").await?.status?;
        (s.phase.as_deref() == Some("Failed")).then_some(())
    })
    .await;

    // The NetworkConfiguration goes: its Machines report it (repeated Events are patched).
    ncs.delete("lan", &DeleteParams::default())
        .await
        .expect("delete NC");
    eventually(WAIT, "gamma to miss its NetworkConfiguration", || async {
        let m = get(&machines, "gamma").await?;
        (condition_reason(&m, "NetworkReady").as_deref() == Some("NetworkConfigurationNotFound"))
            .then_some(())
    })
    .await;
    tokio::time::sleep(Duration::from_secs(6)).await;

    // Certificates: a CA rotation on demand (as the admin), and a tampered caBundle put back.
    let cli = {
        let kubeconfig = cp.admin_kubeconfig().to_owned();
        tokio::task::spawn_blocking(move || {
            std::process::Command::new(env!("CARGO_BIN_EXE_kubevirt-operator"))
                .args(["certs", "rotate", "--ca", "--timeout", "90s"])
                .env("KUBECONFIG", kubeconfig)
                .env("NAMESPACE", OPERATOR_NAMESPACE)
                .env("LOG_FORMAT", "text")
                .output()
        })
        .await
        .expect("join")
        .expect("run certs rotate")
    };
    assert!(
        cli.status.success(),
        "certs rotate --ca: {}\n{}\n{}",
        String::from_utf8_lossy(&cli.stdout),
        String::from_utf8_lossy(&cli.stderr),
        log(&op)
    );
    let tampered = ByteString(b"tampered".to_vec());
    mutating
        .patch(
            WEBHOOK_CONFIGURATION,
            &PatchParams::default(),
            &Patch::Json::<()>(
                serde_json::from_value(json!([{"op": "replace",
                    "path": "/webhooks/0/clientConfig/caBundle", "value": tampered}]))
                .expect("json patch"),
            ),
        )
        .await
        .expect("tamper caBundle");
    let bundles: Api<ConfigMap> = Api::namespaced(admin.clone(), OPERATOR_NAMESPACE);
    eventually(WAIT, "the caBundle to be restored", || async {
        let live = get(&mutating, WEBHOOK_CONFIGURATION).await?;
        let pem = get(&bundles, BUNDLE_CONFIGMAP)
            .await?
            .data?
            .remove(BUNDLE_KEY)?;
        let ca = live.webhooks?.first()?.client_config.ca_bundle.clone()?;
        (ca.0 == pem.as_bytes()).then_some(())
    })
    .await;

    // Deletions: alpha (disks deleted), beta (disks retained), gamma (last user of the NAD),
    // delta (its DataVolume deleted).
    for name in ["alpha", "beta", "gamma", "delta"] {
        machines
            .delete(name, &DeleteParams::default())
            .await
            .expect("delete Machine");
    }
    for name in ["alpha", "beta", "gamma", "delta"] {
        eventually(WAIT, &format!("Machine {name} to go"), || async {
            machines
                .get_opt(name)
                .await
                .ok()
                .and_then(|m| m.is_none().then_some(()))
        })
        .await;
    }
    assert!(
        get(&pvcs, "alpha-data").await.is_none(),
        "alpha's disks deleted"
    );
    assert!(
        get(&pvcs, "beta-data").await.is_some(),
        "beta's disks retained"
    );
    assert!(get(&secrets, "alpha-cloudinit").await.is_none());
    eventually(WAIT, "NAD lan to go", || async {
        nads.get_opt("lan")
            .await
            .ok()
            .and_then(|n| n.is_none().then_some(()))
    })
    .await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(op.exited().is_none(), "the operator exited\n{}", log(&op));
    let operator_log = log(&op);
    op.kill();

    // The audit log. A watch is audited (ResponseComplete) only when it ends: wait for the
    // API server to record the watches the kill cut off.
    let audited = || -> Vec<AuditedRequest> {
        cp.audited_requests()
            .expect("audit log")
            .into_iter()
            .filter(|r| r.user == USER)
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    let watched = |rs: &[AuditedRequest]| {
        rs.iter()
            .filter(|r| r.verb == "watch")
            .map(|r| (r.api_group.clone(), r.resource.clone()))
            .collect::<BTreeSet<_>>()
    };
    let mut requests = audited();
    let mut quiet = 0;
    while quiet < 4 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let again = audited();
        let same = again.len() == requests.len() && watched(&again) == watched(&requests);
        quiet = if same { quiet + 1 } else { 0 };
        requests = again;
    }
    assert!(!requests.is_empty(), "no request by {USER} audited");
    let forbidden: BTreeSet<String> = requests
        .iter()
        .filter(|r| r.code == 403)
        .map(|r| {
            format!(
                "{} {}/{} ns={:?} name={:?}",
                r.verb,
                r.api_group,
                resource_of(r),
                r.namespace,
                r.name
            )
        })
        .collect();

    let role_grants: Vec<&Grant> = granted.iter().filter(|g| g.namespace.is_some()).collect();
    let used = |g: &Grant| {
        requests.iter().any(|r| {
            r.code != 403
                && allows(g, r)
                && (g.namespace.is_some() || !role_grants.iter().any(|rg| allows(rg, r)))
        })
    };
    let mut unused = Vec::new();
    let mut usage = Vec::new();
    for g in &granted {
        let count = requests
            .iter()
            .filter(|r| r.code != 403 && allows(g, r))
            .count();
        usage.push(format!(
            "{:28} {:>24} {:45} {:7} {:?} {count}",
            g.source,
            g.namespace.as_deref().unwrap_or("*"),
            format!("{}/{}", g.group, g.resource),
            g.verb,
            g.names
        ));
        if used(g) {
            continue;
        }
        if EXEMPT
            .iter()
            .any(|(gr, res, v, _)| *gr == g.group && *res == g.resource && *v == g.verb)
        {
            continue;
        }
        unused.push(format!(
            "{}: {}/{} {} (namespace {})",
            g.source,
            g.group,
            g.resource,
            g.verb,
            g.namespace.as_deref().unwrap_or("any")
        ));
    }
    eprintln!(
        "{} requests by {USER} in {:?}; grants and matching requests:\n{}",
        requests.len(),
        started.elapsed(),
        usage.join("\n")
    );

    // The exemptions hold: the plugin that would exercise them is not loaded.
    let apiserver_log =
        std::fs::read_to_string(cp.dir().join("kube-apiserver.log")).expect("API server log");
    assert!(
        apiserver_log.contains("admission controller(s) successfully in the following order"),
        "the API server log no longer lists its admission plugins: the exemptions are unchecked"
    );
    assert!(
        !apiserver_log.contains("OwnerReferencesPermissionEnforcement"),
        "OwnerReferencesPermissionEnforcement runs here: drop the exemptions and exercise them"
    );
    for (group, resource, verb, _) in EXEMPT {
        assert!(
            granted
                .iter()
                .any(|g| g.group == *group && g.resource == *resource && g.verb == *verb),
            "exemption {group}/{resource} {verb} is not granted any more: remove it"
        );
    }

    assert!(
        forbidden.is_empty(),
        "the operator was refused (a grant is missing):\n{}\noperator log:\n{operator_log}",
        forbidden.into_iter().collect::<Vec<_>>().join("\n")
    );
    assert!(
        unused.is_empty(),
        "granted but never used (remove from the manifest, or exempt with a reason):\n{}",
        unused.join("\n")
    );
}
