//! The walk's start: the operator on a wrongly typed serving Secret of its own, then the inputs
//! Machines read, then Machines through its webhooks.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::Path;
use std::time::{Duration, Instant};

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::MutatingWebhookConfiguration;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use k8s_openapi::api::storage::v1::StorageClass;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject};
use serde_json::json;

use crate::operator::eventually;
use crate::support::{self, OPERATOR_NAMESPACE, Proc, Started};
use crate::{USER, WAIT, create, create_machine, dynamic, get, log};
use kubevirt_operator::api::{KubevirtConfig, NetworkConfiguration};
use kubevirt_operator::certs::{SERVING_SECRET, WEBHOOK_CONFIGURATION};
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use kubevirt_operator::reconciler::apis::multus::NetworkAttachmentDefinition;

/// `kubevirt-operator run` as [`USER`]: self-managed certificates, leader election on, filling
/// the webhook configurations installed for its URL; once it has made its serving Secret again
/// (as TLS) and filled them.
pub async fn operator(cp: &Started, admin: &Client) -> Proc {
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
        admin,
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
    let op = Proc::spawn(
        "kubevirt-operator",
        Path::new(env!("CARGO_BIN_EXE_kubevirt-operator")),
        args,
        dir.join("operator.log"),
    )
    .expect("spawn operator");

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
    op
}

/// What Machines read: a StorageClass, a NetworkConfiguration `lan`, a cloud-init Secret, a
/// DataSource; and a KubevirtConfig with a bad kubeconfig and a namespaceSelector.
pub async fn inputs(admin: &Client, ns: &str) {
    // Inputs: a StorageClass, a NetworkConfiguration, a cloud-init Secret with a non-default key.
    let secrets_sys: Api<Secret> = Api::namespaced(admin.clone(), OPERATOR_NAMESPACE);
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
    let ncs: Api<NetworkConfiguration> = Api::namespaced(admin.clone(), ns);
    create(&ncs, &nc).await;
    let mut boot = Secret {
        data: Some(BTreeMap::from([(
            "cfg".to_owned(),
            ByteString(b"#cloud-config\n".to_vec()),
        )])),
        ..Secret::default()
    };
    boot.metadata.name = Some("boot".into());
    create(&Api::<Secret>::namespaced(admin.clone(), ns), &boot).await;
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
    create(&dynamic(admin, ns, &ds_ar), &ds).await;

    // Issue 22: a KubevirtConfig whose Secret (in the operator's namespace) holds no valid
    // kubeconfig: the leader watches it and the Secret, and writes the reason into its status.
    // Issue 31: it takes Machines of the test's namespace only (`namespaceSelector`), which the
    // webhook checks by reading that Namespace (`get namespaces`).
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
        "spec": {"kubeconfigSecretRef": "dc1-kubeconfig", "secretNamespace": OPERATOR_NAMESPACE,
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": ns}}}
    }))
    .expect("KubevirtConfig");
    let kcs: Api<KubevirtConfig> = Api::all(admin.clone());
    create(&kcs, &kc).await;
    eventually(WAIT, "dc1's status to say KubeconfigInvalid", || async {
        let s = get(&kcs, "dc1").await?.status?;
        (s.reason.as_deref() == Some("KubeconfigInvalid")).then_some(())
    })
    .await;
}

/// Machines `alpha`..`zeta` through the webhooks, and what the operator makes of them.
pub async fn machines(admin: &Client, ns: &str, op: &Proc) {
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
        // Placed on dc1 (its cluster unusable: nothing made), from a namespace it selects.
        json!({"metadata": {"name": "zeta", "annotations": {"vitistack.io/kubevirt-config": "dc1"}},
            "spec": {"template": "small"}}),
    ];
    for m in machines_json {
        let t0 = Instant::now();
        loop {
            match create_machine(admin, ns, m.clone()).await {
                Ok(()) => break,
                Err(e) => assert!(
                    t0.elapsed() < WAIT,
                    "creating Machine {}: {e}\n{}",
                    m["metadata"]["name"],
                    log(op)
                ),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), ns);
    let pvcs: Api<PersistentVolumeClaim> = Api::namespaced(admin.clone(), ns);
    let nads: Api<NetworkAttachmentDefinition> = Api::namespaced(admin.clone(), ns);
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), ns);
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
}
