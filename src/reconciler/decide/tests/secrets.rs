//! The derived cloud-init Secret through `decide`: every ownership case.

use super::*;

/// The same verdicts whether the derived Secret was read now or is remembered from this
/// process's last write (its metadata, annotations and all, is the evidence either way). A
/// remembered one is written over never: observe takes it only while it holds what is wanted.
#[test]
fn derived_secrets() {
    for (e, remembered) in ALL.into_iter().flat_map(|e| [(e, false), (e, true)]) {
        let mut o = observed(machine(
            "m",
            json!({"template": "small", "cloudInit": {"secretRef": {"name": "src", "key": "ud"}}}),
        ));
        o.source_secret = Some(Secret {
            data: Some(BTreeMap::from([(
                "ud".to_owned(),
                ByteString(b"#cloud-config".to_vec()),
            )])),
            ..Secret::default()
        });
        let found = existing(e).map(|(c, l)| meta("Secret", "m-cloudinit", c, l));
        o.derived_secret = if remembered {
            Derived::Remembered(Known::of(found.as_ref()))
        } else {
            Derived::Read(found.map(|metadata| {
                Box::new(Secret {
                    metadata,
                    ..Secret::default()
                })
            }))
        };
        let d = decide(&o, &Catalog::default(), &key());
        let writable = matches!(e, Absent | Ours);
        assert_eq!(
            d.secret.is_some(),
            writable && !remembered,
            "{e:?} remembered={remembered}"
        );
        assert_eq!(d.vm.is_some(), writable, "{e:?} remembered={remembered}");
        if !writable {
            assert_eq!(reasons(&d), ["SecretConflict"], "{e:?}");
        }
    }
}

/// Observe takes a remembered derived Secret without a read only while it holds the very
/// Secret `decide` writes: on the local cluster and, without owner references, on a remote one.
#[test]
fn observe_looks_for_the_hash_of_the_secret_decide_writes() {
    use crate::reconciler::decide::desired::cloud_init::derived_secret;
    for remote in [false, true] {
        let mut o = observed(machine(
            "m",
            json!({"template": "small", "cloudInit": {"secretRef": {"name": "src", "key": "ud"}}}),
        ));
        o.remote = remote;
        o.source_secret = Some(Secret {
            data: Some(BTreeMap::from([(
                "ud".to_owned(),
                ByteString(b"#cloud-config".to_vec()),
            )])),
            ..Secret::default()
        });
        o.derived_secret = Derived::Read(None);
        let d = decide(&o, &Catalog::default(), &key());
        let written = d.secret.as_ref().expect("a derived Secret");
        let source = (o.source_secret.as_ref(), remote);
        let want = derived_secret(&o.machine, &o.spec, source, &o.network_configurations);
        assert_eq!(want.as_ref(), Some(written), "remote={remote}");
    }
}

/// A Machine with a static address on an ipam network: the derived Secret carries the
/// network-config with that network's gateway and DNS, and the Secret observe compares a
/// remembered one against is that very Secret only when it is given the NetworkConfigurations
/// decide read (without them it lacks the gateway and would never match, so every reconcile of
/// such a Machine would read its Secret again).
#[test]
fn an_addressed_machines_secret_carries_its_networks_gateway_and_observe_expects_it() {
    use crate::api::network_configuration::Ipam;
    use crate::reconciler::decide::desired::cloud_init::derived_secret;
    let mut o = observed(machine(
        "m",
        json!({"template": "small", "networks": [{"name": "eth0", "networkName": "lan",
            "macAddress": "02:00:00:00:00:01", "addresses": ["10.40.0.10/24"]}]}),
    ));
    let ipam: Ipam = serde_json::from_value(json!({"subnet": "10.40.0.0/24",
        "gateway": "10.40.0.1", "dns": ["10.40.0.2"]}))
    .expect("ipam");
    if let Some(nc) = o.network_configurations.get_mut("lan") {
        nc.spec.ipam = Some(ipam);
    }
    o.derived_secret = Derived::Read(None);
    let d = decide(&o, &lan_catalog(), &key());
    let written = d.secret.as_ref().expect("a derived Secret");
    let config = (written.data.as_ref())
        .and_then(|data| data.get("networkdata"))
        .map(|b| String::from_utf8_lossy(&b.0).into_owned())
        .expect("the network-config under networkdata");
    for want in [
        "10.40.0.10/24",
        "10.40.0.1",
        "10.40.0.2",
        "02:00:00:00:00:01",
    ] {
        assert!(config.contains(want), "{want} missing from {config}");
    }
    let source = (o.source_secret.as_ref(), o.remote);
    let expected = derived_secret(&o.machine, &o.spec, source, &o.network_configurations);
    assert_eq!(expected.as_ref(), Some(written));
    let without = derived_secret(&o.machine, &o.spec, source, &BTreeMap::new());
    assert_ne!(
        without.as_ref(),
        Some(written),
        "the gateway comes from the NetworkConfiguration"
    );
}
