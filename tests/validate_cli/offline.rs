//! The webhook subcommand, and what `validate` knows offline.

#[allow(unused_imports)]
use crate::*;
use serde_json::Value;

/// `webhook --cert-file --key-file --listen 127.0.0.1:0` serves verified HTTPS and stops on
/// SIGTERM. The port comes from its start-up log line.
#[tokio::test]
async fn webhook_subcommand_serves_the_pem_pair_and_stops_on_sigterm() {
    let ca = common::TestCa::new("cli CA");
    let mut webhook = common::WebhookProcess::start(&ca);
    let addr = webhook.addr;

    let url = format!(
        "https://{addr}{}",
        kubevirt_operator::admission::MUTATE_PATH
    );
    let response = ca
        .reqwest_client()
        .post(url)
        .json(&common::valid_review("cli"))
        .send()
        .await
        .expect("verified HTTPS request");
    assert_eq!(response.status(), 200);
    let review: Value = response.json().await.unwrap();
    assert_eq!(review["response"]["uid"], "cli");
    assert_eq!(review["response"]["allowed"], true);
    assert_eq!(review["response"]["patchType"], "JSONPatch");

    webhook.sigterm();
    let status = webhook.wait_for_exit("webhook did not stop on SIGTERM");
    assert!(status.success(), "clean exit on SIGTERM, got {status:?}");
}

#[test]
fn validate_knows_eviction_and_placement_offline() {
    let out = validate_file(&example("migratable.yaml"));
    assert_ok(&out);
    let doc = &documents(&out)[0];
    assert_eq!(doc["spec"]["evictionStrategy"], "LiveMigrate");
    assert_eq!(doc["spec"]["placement"]["priorityClassName"], "vm-high");
    let bad = "apiVersion: vitistack.io/v1alpha1\nkind: Machine\nmetadata: {name: m}\n\
               spec: {evictionStrategy: Sometimes, placement: {tolerations: [{key: k, effect: NoRun}]}}\n";
    let out = run(&["validate", "-f", "-"], Some(bad));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains("spec.evictionStrategy")
            && err.contains("spec.placement.tolerations[0].effect"),
        "{err}"
    );
}

#[test]
fn validate_knows_run_update_strategies_and_hot_plug_maxima_offline() {
    let out = validate_file(&example("operated.yaml"));
    assert_ok(&out);
    let doc = &documents(&out)[0];
    assert_eq!(doc["spec"]["updateStrategy"], "Restart");
    assert_eq!(doc["spec"]["resources"]["cpu"]["maxSockets"], 8);
    assert_eq!(doc["spec"]["resources"]["memory"]["maxSize"], "16Gi");
    let bad = "apiVersion: vitistack.io/v1alpha1\nkind: Machine\nmetadata: {name: m}\n\
               spec: {updateStrategy: Often, resources: {cpu: {sockets: 4, maxSockets: 2}, memory: {size: 4Gi, maxSize: 2Gi}}}\n";
    let out = run(&["validate", "-f", "-"], Some(bad));
    assert!(!out.status.success());
    let err = stderr(&out);
    for field in [
        "spec.updateStrategy",
        "spec.resources.cpu.sockets: Invalid value: 4: must be at most spec.resources.cpu.maxSockets (2)",
        "spec.resources.memory.size: Invalid value: \"4Gi\": must be at most spec.resources.memory.maxSize (2Gi)",
    ] {
        assert!(err.contains(field), "{field}: {err}");
    }
}

/// Issue 35's clones offline: `examples/clones.yaml` passes, the clone filled from the Machine
/// before it (its disk a clone of the source's claim, the source's network, its own run
/// strategy); a clone of a Machine not before it in the input, or with a
/// malformed source name, is refused naming the field.
#[test]
fn validate_fills_a_clone_from_an_earlier_document() {
    let out = validate_file(&example("clones.yaml"));
    assert_ok(&out);
    let docs = documents(&out);
    assert_eq!(docs.len(), 2, "{}", stderr(&out));
    let (source, copy) = (&docs[0], &docs[1]);
    assert_eq!(copy["spec"]["cloneFrom"]["machine"], "shop");
    assert_eq!(copy["spec"]["runStrategy"], "Halted");
    assert_eq!(
        copy["spec"]["disks"][0],
        json!({"name": "root", "size": source["spec"]["disks"][0]["size"],
               "source": {"pvc": {"name": "shop-root"}}})
    );
    let nic = &copy["spec"]["networks"][0];
    assert_eq!(nic["networkName"], "lab-network");
    // Offline nothing hands out MACs (no cluster index): none is copied either.
    assert!(
        nic.get("addresses").is_none() && nic.get("macAddress").is_none(),
        "{nic}"
    );

    let stream = "apiVersion: vitistack.io/v1alpha1\nkind: Machine\nmetadata: {name: a, namespace: default}\n\
                  spec: {cloneFrom: {machine: later}}\n---\n\
                  apiVersion: vitistack.io/v1alpha1\nkind: Machine\nmetadata: {name: b, namespace: default}\n\
                  spec: {cloneFrom: {machine: Bad_Name}}\n";
    let out = run(&["validate", "-f", "-"], Some(stream));
    assert!(!out.status.success());
    let err = stderr(&out);
    assert!(
        err.contains(r#"spec.cloneFrom.machine: Invalid value: "later": no valid Machine later before it in the input"#),
        "{err}"
    );
    assert!(
        err.contains(r#"spec.cloneFrom.machine: Invalid value: "Bad_Name""#),
        "{err}"
    );
}

/// Issue 35's hot-plug example validates offline; a Machine read back from a cluster, its
/// `status.disks[].hotplug` included, is passed through as the operator wrote it.
#[test]
fn validate_knows_the_hot_plug_example_and_keeps_a_hot_plugged_disks_status() {
    let out = validate_file(&example("hotplug.yaml"));
    assert_ok(&out);
    let doc = &documents(&out)[0];
    assert_eq!(doc["spec"]["disks"][1]["name"], "data");
    let exported = "apiVersion: vitistack.io/v1alpha1\nkind: Machine\nmetadata: {name: m}\n\
                    spec: {template: small, disks: [{name: data, size: 5Gi}]}\n\
                    status: {disks: [{name: data, claimName: m-data, hotplug: {phase: Ready}}]}\n";
    let out = run(&["validate", "-f", "-"], Some(exported));
    assert_ok(&out);
    let doc = &documents(&out)[0];
    assert_eq!(doc["status"]["disks"][0]["hotplug"]["phase"], "Ready");
}
