//! What the chart's values tell the operator, rendered by the real `helm template`: the admin's
//! allow-lists (bridges, VLANs, machine types) and client authentication for the webhooks.

mod chart;

use chart::{docs, env, helm_template, kustomize, one};
use serde_json::Value;

/// Issue 25: the admin's lists reach the operator from the chart and the manifests alike, and
/// allow no bridge, untagged traffic and KubeVirt's default machine types until set.
#[test]
fn the_admins_allow_lists_reach_the_operator() {
    let lists = |objs: &[Value]| {
        let d = one(objs, "Deployment");
        ["ALLOWED_BRIDGES", "ALLOWED_VLANS", "ALLOWED_MACHINE_TYPES"].map(|n| env(d, n))
    };
    let defaults = [Some(""), Some("0"), Some("q35*,pc-q35*")].map(|v| v.map(str::to_owned));
    assert_eq!(lists(&docs(&helm_template(&[], &[]))), defaults);
    assert_eq!(
        lists(&docs(&kustomize(&chart::repo("manifests")))),
        defaults
    );
    let set = helm_template(
        &[],
        &[
            "--set",
            "allowedBridges={br-vms,br-prod}",
            "--set-string",
            "allowedVlans=0\\,100-199\\,300",
            "--set-string",
            "allowedMachineTypes=q35*\\,pc-q35-rhel9*",
        ],
    );
    assert_eq!(
        lists(&docs(&set)),
        [
            Some("br-vms,br-prod"),
            Some("0,100-199,300"),
            Some("q35*,pc-q35-rhel9*")
        ]
        .map(|v| v.map(str::to_owned))
    );
}

/// `webhook.clientCAConfigMap`: the CA is mounted and CLIENT_CA_FILE names it; unset, neither.
#[test]
fn the_client_ca_reaches_the_operator_only_when_set() {
    let plain = docs(&helm_template(&[], &[]));
    let d = one(&plain, "Deployment");
    assert_eq!(env(d, "CLIENT_CA_FILE"), None);
    assert!(!d.to_string().contains("client-ca"), "{d}");
    for certs in [&[][..], &["--set", "certificates.mode=cert-manager"][..]] {
        let mut args = vec!["--set", "webhook.clientCAConfigMap=apiserver-client-ca"];
        args.extend_from_slice(certs);
        let set = docs(&helm_template(&[], &args));
        let d = one(&set, "Deployment");
        assert_eq!(
            env(d, "CLIENT_CA_FILE").as_deref(),
            Some("/client-ca/ca.crt")
        );
        let pod = &d["spec"]["template"]["spec"];
        let volume = pod["volumes"]
            .as_array()
            .and_then(|v| v.iter().find(|v| v["name"] == "client-ca"))
            .unwrap_or_else(|| panic!("a client-ca volume: {pod}"));
        assert_eq!(volume["configMap"]["name"], "apiserver-client-ca");
        let mounts = pod["containers"][0]["volumeMounts"].to_string();
        assert!(mounts.contains("/client-ca"), "{mounts}");
    }
}
