//! The golden files: the seed's four examples, as the operator makes them.

#[allow(unused_imports)]
use crate::*;
use k8s_openapi::api::core::v1::PersistentVolumeClaim;
use kube::ResourceExt;
use kube::api::{ApiResource, ListParams};
use kubevirt_operator::api::{Machine, NetworkConfiguration};
use kubevirt_operator::machine::network_policy::{NetworkPolicy, Vlans};
use kubevirt_operator::machine::{Catalog, resolve};
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use kubevirt_operator::reconciler::apis::multus::NetworkAttachmentDefinition;
use kubevirt_operator::reconciler::decide::desired::{self, Inputs, SecretData};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

// ---------------------------------------------------------------------------------------------
// Golden files: the seed's four examples.

fn golden_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden/reconciler")
}

/// Replaces what differs between runs (uids, versions, times, namespace) by placeholders.
fn normalize(mut v: Value, ns: &str) -> Value {
    let meta = v["metadata"].as_object_mut().expect("metadata");
    for k in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "managedFields",
        "generation",
        "selfLink",
    ] {
        meta.remove(k);
    }
    meta.insert("namespace".into(), "NAMESPACE".into());
    if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut)
        && a.contains_key("vitistack.io/applied-hash")
    {
        a.insert("vitistack.io/applied-hash".into(), "HASH".into());
    }
    // The made-for proof names the Machine's uid, then an HMAC under the operator's key: kept
    // as MACHINE_UID.PROOF when its uid is the controller owner's (anything else shows raw).
    let controller = meta
        .get("ownerReferences")
        .and_then(Value::as_array)
        .and_then(|o| o.iter().find(|o| o["controller"] == true))
        .and_then(|o| o["uid"].as_str())
        .map(str::to_owned);
    if let Some(a) = meta.get_mut("annotations").and_then(Value::as_object_mut)
        && let Some(proof) = a.get("vitistack.io/made-for").and_then(Value::as_str)
        && let Some((uid, tag)) = proof.split_once('.')
        && Some(uid) == controller.as_deref()
        && tag.len() == 43
    {
        a.insert("vitistack.io/made-for".into(), "MACHINE_UID.PROOF".into());
    }
    if let Some(owners) = meta
        .get_mut("ownerReferences")
        .and_then(Value::as_array_mut)
    {
        for o in owners {
            let kind = o["kind"].as_str().unwrap_or_default().to_uppercase();
            o["uid"] = format!("{kind}_UID").into();
        }
    }
    if let Some(obj) = v.as_object_mut() {
        obj.remove("status");
    }
    let text = v.to_string().replace(ns, "NAMESPACE");
    serde_json::from_str(&text).expect("json")
}

async fn raw(env: &Env, ar: &ApiResource, name: &str) -> Value {
    let obj = env.dynamic(ar).get(name).await.expect("get object");
    serde_json::to_value(obj).expect("json")
}

fn compare_golden(name: &str, docs: &[Value]) {
    let text: String = docs
        .iter()
        .map(|d| format!("---\n{}", serde_yaml::to_string(d).expect("yaml")))
        .collect();
    let path = golden_dir().join(format!("{name}.yaml"));
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(golden_dir()).expect("golden dir");
        std::fs::write(&path, &text).expect("write golden");
        return;
    }
    let want = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    assert_eq!(
        text,
        want,
        "{} differs from what the operator wrote (UPDATE_GOLDEN=1 rewrites it)",
        path.display()
    );
}

/// What the reconciler derives for `machine`, computed here with the library's pure core.
fn derived(machine: &Machine, ncs: &BTreeMap<String, NetworkConfiguration>) -> desired::Desired {
    let spec = resolve(&machine.spec, None, &Catalog::default()).spec;
    let scs = spec
        .disks
        .iter()
        .filter_map(|d| d.storage_class.clone())
        .collect();
    desired::derive(&Inputs {
        machine,
        spec: &spec,
        network_configurations: ncs,
        storage_classes: &scs,
        cloud_init_secret: None::<SecretData>,
        network_policy: &NetworkPolicy::new(
            ["br0", "br-prod", "br-storage"].map(str::to_owned),
            Vlans::parse("0-4094").expect("vlans"),
        ),
        eviction_strategy: kubevirt_operator::api::placement::DEFAULT_EVICTION_STRATEGY,
        label_prefixes: &[],
        copy_user_data: false,
        hardware: &Default::default(),
        pins: &kubevirt_operator::api::clone_sources::read(machine.metadata.annotations.as_ref())
            .unwrap_or_default(),
    })
}

async fn golden_example(file: &str, golden: &str) {
    let env = env(&format!("golden-{golden}")).await;
    storage_class(&env.client, "fast-ssd").await;
    env.network_configuration("prod-network", "br-prod", 100)
        .await;
    env.network_configuration("storage-network", "br-storage", 0)
        .await;
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples")
            .join(file),
    )
    .expect("example");
    let mut machine: Value = serde_yaml::from_str(&text).expect("example YAML");
    machine["metadata"]["namespace"] = env.ns.clone().into();
    let name = machine["metadata"]["name"]
        .as_str()
        .expect("name")
        .to_owned();
    env.create_machine_with(machine).await;

    env.wait_status(&name, "phase Creating", |s| {
        s.phase.as_deref() == Some("Creating")
    })
    .await;
    let stored = env.machines().get(&name).await.expect("machine");
    let ncs: BTreeMap<String, NetworkConfiguration> = env
        .api::<NetworkConfiguration>()
        .list(&ListParams::default())
        .await
        .expect("NCs")
        .items
        .into_iter()
        .map(|n| (n.name_any(), n))
        .collect();
    let want = derived(&stored, &ncs);

    // Accepted by KubeVirt's schema as written: nothing pruned, nothing added.
    let vm = raw(&env, &ApiResource::erase::<VirtualMachine>(&()), &name).await;
    let want_vm = serde_json::to_value(want.vm.as_ref().expect("VM derived")).expect("json");
    assert_eq!(
        vm["spec"], want_vm["spec"],
        "the API server stored the VM spec as sent"
    );

    let mut docs = vec![normalize(vm, &env.ns)];
    let pvc_ar = ApiResource::erase::<PersistentVolumeClaim>(&());
    for pvc in &want.pvcs {
        docs.push(normalize(
            raw(&env, &pvc_ar, &pvc.name_any()).await,
            &env.ns,
        ));
    }
    let nad_ar = ApiResource::erase::<NetworkAttachmentDefinition>(&());
    for nad in &want.attachments {
        docs.push(normalize(
            raw(&env, &nad_ar, &nad.name_any()).await,
            &env.ns,
        ));
    }
    assert_eq!(
        env.pvc_names().await.len(),
        want.pvcs.len(),
        "one claim per resolved disk"
    );
    compare_golden(golden, &docs);
}

#[tokio::test]
async fn golden_basic() {
    golden_example("basic.yaml", "basic").await;
}

#[tokio::test]
async fn golden_overrides() {
    golden_example("overrides.yaml", "overrides").await;
}

#[tokio::test]
async fn golden_networking() {
    golden_example("networking.yaml", "networking").await;
}

#[tokio::test]
async fn golden_cloud_init() {
    golden_example("cloud-init.yaml", "cloud-init").await;
}
