//! Issue 35's addresses on a real control plane: a NetworkConfiguration with ipam hands out
//! distinct addresses from its range (written into the Machines' specs), keeps them through an
//! operator restart (the index is rebuilt from the Machines), and never hands out a held one
//! after it; a Machine asking an address another Machine holds is refused naming it; the VM gets
//! the address, gateway and DNS through the derived cloud-init Secret, and KubeVirt's real CRD
//! accepts the VM that refers to it. The tenants are non-admin users with Machine rights only.

mod access;
mod support;

use std::collections::BTreeSet;

use k8s_openapi::api::core::v1::Secret;
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};

use access::{OP_NS, WAIT, machine_object, machines, rule, start_operator, wait_status};
use kubevirt_operator::api::NetworkConfiguration;
use kubevirt_operator::reconciler::apis::kubevirt::VirtualMachine;
use support::{Fixture, Proc};

const NS: &str = "team-a";

fn network(name: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "vitistack.io/v1alpha1", "kind": "NetworkConfiguration",
        "metadata": {"name": name}, "spec": spec
    }))
    .expect("network")
}

fn on(network: &str, addresses: &[&str]) -> Value {
    let mut nic = json!({"name": "eth0", "networkName": network});
    if !addresses.is_empty() {
        nic["addresses"] = json!(addresses);
    }
    json!({"template": "small", "networks": [nic]})
}

fn addresses(m: &DynamicObject) -> Vec<String> {
    let list = m
        .data
        .pointer("/spec/networks/0/addresses")
        .and_then(Value::as_array);
    (list.into_iter().flatten())
        .filter_map(|a| Some(a.as_str()?.to_owned()))
        .collect()
}

/// [`access::create_answered`], the refusal's message only.
async fn create(
    api: &Api<DynamicObject>,
    obj: &DynamicObject,
    op: &Proc,
) -> Result<DynamicObject, String> {
    access::create_answered(api, obj, op)
        .await
        .map_err(|(_, message)| message)
}

async fn secret_network_data(admin: &Client, machine: &str, op: &Proc) -> Value {
    let secrets: Api<Secret> = Api::namespaced(admin.clone(), NS);
    let name = format!("{machine}-cloudinit");
    support::eventually_with(
        WAIT,
        &format!("the derived Secret {name}"),
        || op.log_tail(40),
        || async {
            let s = secrets.get_opt(&name).await.ok().flatten()?;
            let bytes = s.data?.get("networkdata")?.0.clone();
            serde_yaml::from_slice::<Value>(&bytes).ok()
        },
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipam_hands_out_distinct_addresses_that_survive_a_restart_and_taken_ones_are_refused() {
    let extra = ["--allowed-bridges", "br0"];
    let tenant = || vec![rule("vitistack.io", "machines", &["create", "get", "list"])];
    let env = Fixture::new()
        .with_all_crds()
        .namespace(OP_NS)
        .namespace(NS)
        .user("alice", &["devs"])
        .user("bob", &["devs"])
        .grant(NS, "alice", tenant())
        .grant(NS, "bob", tenant())
        .start()
        .await;
    let admin = env.admin_client().await;
    let ncs: Api<DynamicObject> = Api::namespaced_with(
        admin.clone(),
        NS,
        &ApiResource::erase::<NetworkConfiguration>(&()),
    );
    let lab = json!({"bridge": "br0", "ipam": {
        "subnet": "10.30.0.0/24", "gateway": "10.30.0.1", "dns": ["10.30.0.2"],
        "ranges": [{"start": "10.30.0.10", "end": "10.30.0.12"}]}});
    ncs.create(&PostParams::default(), &network("lab", lab))
        .await
        .expect("lab");
    ncs.create(
        &PostParams::default(),
        &network("plain", json!({"bridge": "br0"})),
    )
    .await
    .expect("plain");
    let mut op = start_operator(&env, OP_NS, &extra).await;

    // A NetworkConfiguration whose range leaves its subnet is refused, naming the field.
    let bad = network(
        "bad",
        json!({"bridge": "br0", "ipam": {"subnet": "10.40.0.0/24",
        "ranges": [{"start": "10.40.0.10", "end": "10.41.0.1"}]}}),
    );
    let denied = access::first_denial(&ncs, &PostParams::default(), &bad, &op).await;
    assert!(denied.contains("spec.ipam.ranges[0].end"), "{denied}");

    // Two tenants asking the same address: the second is refused, naming the first.
    let alice = machines(&env.client_of("alice").await, NS);
    let bob = machines(&env.client_of("bob").await, NS);
    let first = create(
        &alice,
        &machine_object("first", on("plain", &["192.168.5.5/24"])),
        &op,
    )
    .await
    .expect("first");
    assert_eq!(addresses(&first), ["192.168.5.5/24"]);
    let second = machine_object("second", on("plain", &["192.168.5.5/24"]));
    let said = create(&bob, &second, &op)
        .await
        .expect_err("the address is held");
    assert!(
        said.contains("spec.networks[0].addresses[0]") && said.contains("by Machine team-a/first"),
        "{said}"
    );

    // The range hands out distinct addresses, written into the specs.
    let mut given = BTreeSet::new();
    for name in ["m1", "m2"] {
        let m = create(&alice, &machine_object(name, on("lab", &[])), &op)
            .await
            .expect(name);
        let a = addresses(&m);
        assert_eq!(a.len(), 1, "{name}: {a:?}");
        assert!(
            given.insert(a[0].clone()),
            "{name} got a held address {a:?}"
        );
    }
    let range: BTreeSet<String> = (10..=12).map(|n| format!("10.30.0.{n}/24")).collect();
    assert!(given.is_subset(&range), "{given:?}");

    // The guest gets its address, the gateway and the DNS server, matched by its MAC; the VM
    // (accepted by KubeVirt's CRD) refers to the Secret.
    let m1 = alice.get("m1").await.expect("m1");
    let mac = m1
        .data
        .pointer("/spec/networks/0/macAddress")
        .and_then(Value::as_str)
        .expect("a MAC")
        .to_owned();
    let data = secret_network_data(&admin, "m1", &op).await;
    assert_eq!(
        data,
        json!({"version": 2, "ethernets": {"nic0": {
            "match": {"macaddress": mac},
            "addresses": addresses(&m1),
            "routes": [{"to": "0.0.0.0/0", "via": "10.30.0.1"}],
            "nameservers": {"addresses": ["10.30.0.2"]}}}})
    );
    let vms: Api<VirtualMachine> = Api::namespaced(admin.clone(), NS);
    let vm = support::eventually_with(
        WAIT,
        "the VM of m1",
        || op.log_tail(40),
        || async { vms.get_opt("m1").await.ok().flatten() },
    )
    .await;
    let vm = serde_json::to_value(&vm).expect("vm");
    let volumes = vm
        .pointer("/spec/template/spec/volumes")
        .cloned()
        .unwrap_or_default();
    assert!(
        volumes
            .to_string()
            .contains(r#""networkDataSecretRef":{"name":"m1-cloudinit"}"#),
        "{volumes}"
    );
    wait_status(
        &admin,
        NS,
        "m1",
        &op,
        "the desired address in status",
        |s| {
            s.interfaces
                .iter()
                .any(|i| i.desired_addresses == addresses(&m1))
        },
    )
    .await;

    // After an operator restart the index is rebuilt from the Machines: the next Machine gets
    // the one address left, and the one after finds the range full.
    op.kill();
    let op = start_operator(&env, OP_NS, &extra).await;
    let m3 = create(&alice, &machine_object("m3", on("lab", &[])), &op)
        .await
        .expect("m3");
    let left: Vec<&String> = range.difference(&given).collect();
    assert_eq!(
        addresses(&m3).iter().collect::<Vec<_>>(),
        left,
        "held: {given:?}"
    );
    let full = create(&bob, &machine_object("m4", on("lab", &[])), &op)
        .await
        .expect_err("full");
    assert!(full.contains("no free address left"), "{full}");
    // Nor can a tenant take a held one by asking for it.
    let taken = given.iter().next().expect("one").clone();
    let said = create(&bob, &machine_object("m5", on("lab", &[&taken])), &op)
        .await
        .expect_err("held");
    assert!(said.contains("by Machine team-a/m"), "{said}");
}
