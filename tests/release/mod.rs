//! A chart release on a real control plane, for `tests/chart_install.rs`: helm against it, the
//! chart's ServiceAccount impersonated, what the audit log says about its requests, and what
//! kube-apiserver stored (NetworkPolicies, RBAC answers).

// Each test binary uses its own subset.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::Command;

use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use crate::chart::{NAMESPACE, tool};
use crate::support::{self, ControlPlane};

pub mod operator;

pub const SERVICE_ACCOUNT: &str = "kubevirt-operator-controller-manager";

pub fn helm(cp: &ControlPlane, args: &[&str]) -> Command {
    let mut cmd = tool("helm");
    cmd.args(args)
        .arg("--kubeconfig")
        .arg(cp.admin_kubeconfig())
        .args(["--namespace", NAMESPACE]);
    // Helm keeps its caches and repository config out of $HOME.
    let home = cp.dir().join("helm");
    cmd.env("HELM_CACHE_HOME", home.join("cache"))
        .env("HELM_CONFIG_HOME", home.join("config"))
        .env("HELM_DATA_HOME", home.join("data"));
    cmd
}

pub fn env_of(d: &Deployment, name: &str) -> Option<String> {
    d.spec.as_ref()?.template.spec.as_ref()?.containers[0]
        .env
        .as_ref()?
        .iter()
        .find(|e| e.name == name)?
        .value
        .clone()
}

/// The admin's kubeconfig, impersonating the ServiceAccount `sa` of the release namespace: every
/// request is authorized as that ServiceAccount, so the operator (or the test Pod) holds exactly
/// the chart's RBAC.
pub fn impersonating_kubeconfig_for(cp: &ControlPlane, sa: &str) -> PathBuf {
    let admin = std::fs::read_to_string(cp.admin_kubeconfig()).expect("admin kubeconfig");
    let mut config: Value = serde_yaml::from_str(&admin).expect("kubeconfig YAML");
    for user in config["users"].as_array_mut().expect("users") {
        user["user"]["as"] = json!(format!("system:serviceaccount:{NAMESPACE}:{sa}"));
        user["user"]["as-groups"] = json!([
            "system:serviceaccounts",
            format!("system:serviceaccounts:{NAMESPACE}"),
            "system:authenticated"
        ]);
    }
    support::write_private(
        cp.dir(),
        &format!("{sa}.kubeconfig"),
        &serde_yaml::to_string(&config).expect("YAML"),
    )
    .expect("write kubeconfig")
}

/// Requests made as the ServiceAccount that kube-apiserver refused (from its audit log).
pub fn refused(cp: &ControlPlane) -> Vec<String> {
    let log = std::fs::read_to_string(cp.dir().join("audit.log")).expect("audit log");
    let user = format!("system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}");
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["stage"] == "ResponseComplete" && e["impersonatedUser"]["username"] == user)
        .filter(|e| e["responseStatus"]["code"] == 403)
        .map(|e| {
            format!(
                "{} {}/{} ns={} name={}",
                e["verb"],
                e["objectRef"]["apiGroup"],
                e["objectRef"]["resource"],
                e["objectRef"]["namespace"],
                e["objectRef"]["name"]
            )
        })
        .collect()
}

pub fn requests_as_service_account(cp: &ControlPlane) -> usize {
    let log = std::fs::read_to_string(cp.dir().join("audit.log")).expect("audit log");
    let user = format!("system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}");
    log.lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["impersonatedUser"]["username"] == user)
        .count()
}

/// The chart's NetworkPolicies as kube-apiserver stored them: the webhook and metrics ports
/// only (the probes port stays closed to pods); returns the webhook rule's sources (None: any).
pub async fn webhook_sources(client: &kube::Client) -> Option<Value> {
    use k8s_openapi::api::networking::v1::NetworkPolicy;
    let stored = Api::<NetworkPolicy>::namespaced(client.clone(), NAMESPACE)
        .list(&Default::default())
        .await
        .expect("NetworkPolicies");
    let mut by_name: Vec<(String, Value)> = stored
        .items
        .into_iter()
        .map(|p| {
            let spec = serde_json::to_value(p.spec).expect("JSON");
            (p.metadata.name.unwrap_or_default(), spec)
        })
        .collect();
    by_name.sort_by(|a, b| a.0.cmp(&b.0));
    let names: Vec<&str> = by_name.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["kubevirt-operator-metrics", "kubevirt-operator-webhook"]
    );
    let ports = |spec: &Value| spec["ingress"][0]["ports"].clone();
    assert_eq!(
        ports(&by_name[0].1),
        json!([{"protocol": "TCP", "port": "metrics"}])
    );
    assert_eq!(
        ports(&by_name[1].1),
        json!([{"protocol": "TCP", "port": "webhook"}])
    );
    by_name[1].1["ingress"][0].get("from").cloned()
}

/// Whether the chart's ServiceAccount holds CDI's clone right in `ns`, as CDI would ask.
pub async fn may_clone_from(client: &kube::Client, ns: &str) -> bool {
    use k8s_openapi::api::authorization::v1::{
        ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
    };
    let review = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(format!(
                "system:serviceaccount:{NAMESPACE}:{SERVICE_ACCOUNT}"
            )),
            groups: Some(vec!["system:serviceaccounts".into()]),
            resource_attributes: Some(ResourceAttributes {
                namespace: Some(ns.into()),
                verb: Some("create".into()),
                group: Some("cdi.kubevirt.io".into()),
                resource: Some("datavolumes".into()),
                subresource: Some("source".into()),
                name: Some("golden".into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    Api::<SubjectAccessReview>::all(client.clone())
        .create(&PostParams::default(), &review)
        .await
        .expect("SubjectAccessReview")
        .status
        .is_some_and(|s| s.allowed)
}
