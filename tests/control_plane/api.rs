//! The API server is up, and KubeVirt's schema in force.

use crate::support::{ControlPlane, OPERATOR_NAMESPACE, crd_fixtures};
#[allow(unused_imports)]
use crate::*;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, PostParams};
use serde_json::json;

#[tokio::test]
async fn api_server_is_up_and_reports_v1_20_2() {
    let cp = ControlPlane::shared()
        .await
        .expect("shared control plane starts");
    let client = cp.client().await.expect("admin client");
    let version = client.apiserver_version().await.expect("GET /version");
    assert_eq!(version.git_version, "v1.20.2");
    assert_eq!(
        (version.major.as_str(), version.minor.as_str()),
        ("1", "20")
    );

    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(client);
    namespaces
        .get(OPERATOR_NAMESPACE)
        .await
        .expect("the operator namespace is created at start-up");

    // The Go client reads the same kubeconfig file: kubectl sees the same server version.
    let out = cp
        .kubectl()
        .expect("kubectl is provided with the assets")
        .args(["version", "-o", "json"])
        .output()
        .expect("run kubectl");
    assert!(
        out.status.success(),
        "kubectl version failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let versions: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("kubectl version json");
    assert_eq!(versions["serverVersion"]["gitVersion"], "v1.20.2");
    assert_eq!(versions["clientVersion"]["gitVersion"], "v1.20.2");
    eprintln!("shared control plane start-up: {:?}", cp.startup());
}

#[tokio::test]
async fn kubevirt_schema_rejects_invalid_and_accepts_valid_virtual_machines() {
    let cp = ControlPlane::shared()
        .await
        .expect("shared control plane starts");
    let installed = cp
        .install_crds(&crd_fixtures().expect("list CRD fixtures"))
        .await
        .expect("install the fixture CRDs");
    for name in [
        "virtualmachines.kubevirt.io",
        "virtualmachineinstances.kubevirt.io",
        "network-attachment-definitions.k8s.cni.cncf.io",
    ] {
        assert!(
            installed.iter().any(|n| n == name),
            "{name} not installed: {installed:?}"
        );
    }
    let ns = cp.namespace("kubevirt-schema").await.expect("namespace");
    let vms: Api<DynamicObject> =
        Api::namespaced_with(cp.client().await.expect("client"), &ns, &vm_resource());

    let vm = |name: &str, cores: serde_json::Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1",
            "kind": "VirtualMachine",
            "metadata": { "name": name },
            "spec": {
                "runStrategy": "Halted",
                "template": { "spec": { "domain": {
                    "cpu": { "cores": cores },
                    "memory": { "guest": "1Gi" },
                    "devices": {},
                } } },
            },
        }))
        .expect("VirtualMachine object")
    };

    let err = vms
        .create(&PostParams::default(), &vm("invalid", json!("four")))
        .await
        .expect_err("the API server must reject cores: \"four\"");
    let status = api_error(err);
    assert_eq!(status.code, 422, "{status:?}");
    assert!(
        status
            .message
            .contains("spec.template.spec.domain.cpu.cores"),
        "message should name the field: {}",
        status.message
    );

    vms.create(&PostParams::default(), &vm("valid", json!(4)))
        .await
        .expect("a minimal valid VirtualMachine is accepted");
    let stored = vms.get("valid").await.expect("read it back");
    assert_eq!(
        stored.data["spec"]["template"]["spec"]["domain"]["cpu"]["cores"],
        4
    );

    // The Multus CRD enforces its one field too.
    let nads: Api<DynamicObject> = Api::namespaced_with(
        cp.client().await.expect("client"),
        &ns,
        &ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk("k8s.cni.cncf.io", "v1", "NetworkAttachmentDefinition"),
            "network-attachment-definitions",
        ),
    );
    let nad = |config: serde_json::Value| -> DynamicObject {
        serde_json::from_value(json!({
            "apiVersion": "k8s.cni.cncf.io/v1",
            "kind": "NetworkAttachmentDefinition",
            "metadata": { "name": "br-vlan10" },
            "spec": { "config": config },
        }))
        .expect("NetworkAttachmentDefinition object")
    };
    let status = api_error(
        nads.create(&PostParams::default(), &nad(json!({ "type": "bridge" })))
            .await
            .expect_err("spec.config must be a string"),
    );
    assert_eq!(status.code, 422, "{status:?}");
    nads.create(
        &PostParams::default(),
        &nad(json!(
            r#"{"cniVersion":"0.3.1","type":"bridge","bridge":"br0","vlan":10}"#
        )),
    )
    .await
    .expect("a NetworkAttachmentDefinition with a string config is accepted");
}
