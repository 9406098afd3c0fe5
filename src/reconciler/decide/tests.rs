//! Every ownership case of every kind the reconciler writes, through `decide`: what is written,
//! what is a conflict, and when the VM is held back.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{PersistentVolumeClaim, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use serde_json::{Value, json};

use super::*;
use crate::api::names::{PROOF_ANNOTATION, RELEASE_ANNOTATION};
use crate::api::operations::run_strategy;
use crate::api::{Machine, MachineStatus, NetworkConfiguration, NetworkConfigurationSpec};
use crate::machine::Catalog;
use crate::reconciler::apis::kubevirt::VirtualMachineInstance;
use crate::reconciler::apis::multus::NetworkAttachmentDefinitionSpec;
use crate::reconciler::decide::evidence::Target;
use crate::reconciler::decide::ownership::MachineRef;
use crate::reconciler::decide::spec::sized;
use crate::reconciler::observe::{Derived, judged};
use crate::reconciler::store::derived_secrets::Known;
use crate::reconciler::{MACHINE_LABEL, MANAGED_BY, MANAGED_BY_LABEL, RETAIN_DISKS_ANNOTATION};

mod attachments;
mod copies;
mod data_volumes;
mod remote_clones;
mod restoring;
mod retain;
mod secrets;

const UID: &str = "uid-m";

fn machine(name: &str, spec: Value) -> Machine {
    let mut m = Machine::new(name, serde_json::from_value(spec).expect("spec"));
    m.metadata.namespace = Some("ns".into());
    m.metadata.uid = Some(UID.into());
    m.metadata.finalizers = Some(vec![FINALIZER.into()]);
    m
}

/// Allows the NetworkConfiguration `lan` of [`observed`].
fn lan_catalog() -> Catalog {
    let vlans = crate::machine::network_policy::Vlans::parse("10").expect("vlans");
    let policy = crate::machine::network_policy::NetworkPolicy::new(["br0".to_owned()], vlans);
    Catalog::default().with_networks(policy)
}

fn observed(m: Machine) -> Observed {
    let crate::reconciler::decide::spec::Sized { spec, class } = sized(&m, &Catalog::default());
    let mut ncs = BTreeMap::new();
    let mut nc = NetworkConfiguration::new(
        "lan",
        NetworkConfigurationSpec {
            vlan: Some(10),
            bridge: Some("br0".into()),
            ipam: None,
        },
    );
    nc.metadata.namespace = Some("ns".into());
    nc.metadata.uid = Some("uid-nc".into());
    ncs.insert("lan".to_owned(), nc);
    Observed {
        machine: m,
        spec,
        class,
        network_configurations: ncs,
        storage_classes: BTreeSet::new(),
        source_secret: None,
        claims: BTreeMap::new(),
        vm: None,
        vmi: None,
        attachments: BTreeMap::new(),
        derived_secret: Derived::NotLooked,
        multus_installed: true,
        data_volumes: BTreeMap::new(),
        cdi_installed: true,
        unwanted_data_volumes: vec![],
        credentials: Vec::new(),
        removed_copies: BTreeMap::new(),
        unused_attachments: vec![],
        restoring: None,
        snapshots: Default::default(),
        remote: false,
        remote_clones: None,
        clone_sources: Default::default(),
        run_strategy: String::new(),
        eviction_strategy: None,
        node: None,
        node_grace: std::time::Duration::from_secs(60),
        hotplug: Err(super::hotplug::NotServed::NoKubeVirt),
        now: k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
        spec_errors: Vec::new(),
        verdicts: Default::default(),
        sourced: Vec::new(),
    }
}

/// `decide` as the reconciler runs it: on `o` as observe hands it over, its objects' ownership
/// and its spec's errors judged, and the DataVolumes it wants named, as observe does.
fn decide(o: &Observed, catalog: &Catalog, key: &OwnershipKey) -> Decision {
    let found = judged::Found {
        remote: o.remote,
        vm: o.vm.as_ref(),
        vmi: o.vmi.as_ref(),
        derived_secret: o.derived_secret.meta(),
        claims: &o.claims,
        data_volumes: &o.data_volumes,
        unwanted_data_volumes: &o.unwanted_data_volumes,
        attachments: &o.attachments,
        unused_attachments: &o.unused_attachments,
        network_configurations: &o.network_configurations,
        credentials: &o.credentials,
        copies: &o.removed_copies,
    };
    let verdicts = judged::verdicts(&found, MachineRef::of(&o.machine), key);
    let name = o.machine.name_any();
    let spec_errors = judged::spec_errors(&name, &o.spec, o.class.as_ref(), catalog);
    let annotations = o.machine.metadata.annotations.as_ref();
    let ns = o.machine.namespace().unwrap_or_default();
    let found = o.remote_clones.as_ref();
    let clone_sources = super::remote_clones::pins(annotations, &ns, &o.spec, found);
    let run_strategy = run_strategy(o.spec.run_strategy.as_deref(), o.spec.running).to_owned();
    let eviction_strategy = super::eviction::strategy(&o.spec, catalog.eviction_strategy());
    let o = Observed {
        verdicts,
        spec_errors,
        clone_sources,
        run_strategy,
        eviction_strategy: eviction_strategy.map(str::to_owned),
        sourced: crate::reconciler::decide::volumes::wanted(&name, &o.spec),
        ..o.clone()
    };
    super::decide(&o, catalog, key)
}

/// The key the tests' objects are proven with.
fn key() -> OwnershipKey {
    OwnershipKey::new(&[9; 32], None).expect("key")
}

/// Metadata of an existing object of `kind`: controller owner uid (if any) and labels for
/// `machine`. One labelled for a Machine was made by the operator for it: it carries the made-for
/// proof for that Machine and its controller, and, without a controller, the release proof (a
/// gone Machine's disk the operator kept).
fn meta(
    kind: &str,
    name: &str,
    controller: Option<&str>,
    labelled_for: Option<&str>,
) -> ObjectMeta {
    let target = Target {
        kind,
        namespace: "ns",
        name,
    };
    let uid = format!("uid-{name}");
    let proof = labelled_for.filter(|_| !kind.is_empty()).map(|m| {
        let k = key();
        let mut a = BTreeMap::from([(
            PROOF_ANNOTATION.to_owned(),
            k.proof(&target, m, controller.unwrap_or("uid-gone")),
        )]);
        if controller.is_none() {
            a.insert(
                RELEASE_ANNOTATION.to_owned(),
                k.release_proof(&target, &uid, m),
            );
        }
        a
    });
    ObjectMeta {
        annotations: proof,
        name: Some(name.into()),
        namespace: Some("ns".into()),
        uid: Some(format!("uid-{name}")),
        owner_references: controller.map(|uid| {
            vec![OwnerReference {
                uid: uid.into(),
                controller: Some(true),
                kind: "Machine".into(),
                name: "x".into(),
                api_version: "vitistack.io/v1alpha1".into(),
                ..OwnerReference::default()
            }]
        }),
        labels: labelled_for.map(|m| {
            BTreeMap::from([
                (MANAGED_BY_LABEL.to_owned(), MANAGED_BY.to_owned()),
                (MACHINE_LABEL.to_owned(), m.to_owned()),
            ])
        }),
        ..ObjectMeta::default()
    }
}

fn claim(
    name: &str,
    controller: Option<&str>,
    labelled_for: Option<&str>,
) -> PersistentVolumeClaim {
    PersistentVolumeClaim {
        metadata: meta("PersistentVolumeClaim", name, controller, labelled_for),
        ..PersistentVolumeClaim::default()
    }
}

fn reasons(d: &Decision) -> Vec<&'static str> {
    d.problems.iter().map(Problem::reason).collect()
}

#[derive(Clone, Copy, Debug)]
enum Existing {
    Absent,
    Ours,
    ReleasedForThisMachine,
    ReleasedForAnother,
    AnotherOwner,
    Unlabelled,
}

use Existing::*;

const ALL: [Existing; 6] = [
    Absent,
    Ours,
    ReleasedForThisMachine,
    ReleasedForAnother,
    AnotherOwner,
    Unlabelled,
];

fn existing(e: Existing) -> Option<(Option<&'static str>, Option<&'static str>)> {
    match e {
        Absent => None,
        Ours => Some((Some(UID), Some("m"))),
        ReleasedForThisMachine => Some((None, Some("m"))),
        ReleasedForAnother => Some((None, Some("a"))),
        AnotherOwner => Some((Some("uid-a"), Some("a"))),
        Unlabelled => Some((None, None)),
    }
}

#[test]
fn claims() {
    for e in ALL {
        let mut o = observed(machine("m", json!({"template": "small"})));
        if let Some((c, l)) = existing(e) {
            o.claims.insert("m-root".into(), claim("m-root", c, l));
        }
        let d = decide(&o, &Catalog::default(), &key());
        let writable = matches!(e, Absent | Ours | ReleasedForThisMachine);
        assert_eq!(d.claims.len(), usize::from(writable), "{e:?}");
        assert_eq!(d.vm.is_some(), writable, "{e:?}: VM only with its claim");
        if writable {
            assert!(d.problems.is_empty(), "{e:?}: {:?}", d.problems);
            // Adopted or ours: the claim is written with this Machine as controller.
            let refs = d.claims[0].metadata.owner_references.as_ref().unwrap();
            assert_eq!(refs[0].uid, UID);
        } else {
            assert_eq!(reasons(&d), ["ClaimConflict"], "{e:?}");
            assert!(d.problems[0].to_string().contains("m-root"));
        }
    }
}

#[test]
fn colliding_claim_names_block_the_second_machine() {
    // `a` + disk `b-root` made `a-b-root`; `a-b` + disk `root` wants the same name.
    let mut o = observed(machine("a-b", json!({"template": "small"})));
    o.claims.insert(
        "a-b-root".into(),
        claim("a-b-root", Some("uid-a"), Some("a")),
    );
    let d = decide(&o, &Catalog::default(), &key());
    assert!(d.claims.is_empty() && d.vm.is_none());
    assert_eq!(
        d.problems[0].to_string(),
        "PersistentVolumeClaim a-b-root exists and is not controlled by this Machine"
    );
}

#[test]
fn retain_disks_claims_carry_no_owner_reference() {
    let mut m = machine("m", json!({"template": "small"}));
    m.metadata.annotations = Some(BTreeMap::from([(
        RETAIN_DISKS_ANNOTATION.to_owned(),
        "true".to_owned(),
    )]));
    for e in [Absent, Ours, ReleasedForThisMachine] {
        let mut o = observed(m.clone());
        if let Some((c, l)) = existing(e) {
            o.claims.insert("m-root".into(), claim("m-root", c, l));
        }
        let d = decide(&o, &Catalog::default(), &key());
        assert_eq!(d.claims.len(), 1, "{e:?}");
        assert_eq!(d.claims[0].metadata.owner_references, None, "{e:?}");
        assert!(d.vm.is_some(), "{e:?}");
    }
}

#[test]
fn virtual_machines() {
    for e in ALL {
        let mut o = observed(machine("m", json!({"template": "small"})));
        if let Some((c, l)) = existing(e) {
            let mut vm = VirtualMachine::new("m", Default::default());
            vm.metadata = meta("VirtualMachine", "m", c, l);
            o.vm = Some(vm);
        }
        let d = decide(&o, &Catalog::default(), &key());
        // A released VM is not adopted: only claims are.
        let writable = matches!(e, Absent | Ours);
        assert_eq!(d.vm.is_some(), writable, "{e:?}");
        if !writable {
            assert_eq!(reasons(&d), ["VirtualMachineConflict"], "{e:?}");
        }
        // The claims are still ours to write.
        assert_eq!(d.claims.len(), 1, "{e:?}");
    }
}

#[test]
fn the_finalizer_is_added_only_before_the_first_reconcile() {
    let mut m = machine("m", json!({"template": "small"}));
    m.metadata.finalizers = None;
    assert!(decide(&observed(m.clone()), &Catalog::default(), &key()).add_finalizer);
    // Reconciled before: a finalizer someone removed stays removed.
    m.status = Some(MachineStatus::default());
    assert!(!decide(&observed(m), &Catalog::default(), &key()).add_finalizer);
}

#[test]
fn a_vmi_reports_only_when_its_vm_controls_it() {
    let mut vm = VirtualMachine::new("m", Default::default());
    vm.metadata.uid = Some("uid-vm".into());
    let mut vmi: VirtualMachineInstance = serde_json::from_value(json!({
        "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachineInstance",
        "metadata": {"name": "m", "namespace": "ns",
                     "labels": {MACHINE_LABEL: "m", MANAGED_BY_LABEL: MANAGED_BY}},
        "spec": {}
    }))
    .unwrap();
    assert!(
        own_vmi(Some(&vm), Some(&vmi)).is_none(),
        "forged: labels only"
    );
    vmi.metadata.owner_references = meta("", "m", Some("uid-vm"), None).owner_references;
    assert!(own_vmi(Some(&vm), Some(&vmi)).is_some());
    assert!(own_vmi(None, Some(&vmi)).is_none());
}

#[test]
fn an_invalid_spec_makes_nothing() {
    let o = observed(machine("m", json!({"template": "huge"})));
    let d = decide(&o, &Catalog::default(), &key());
    assert_eq!(reasons(&d), ["TemplateNotFound"]);
    assert!(d.claims.is_empty() && d.vm.is_none() && !d.add_finalizer);
}

/// A Machine stored with a machine type KubeVirt refuses (no webhook ran, or it predates
/// `--allowed-machine-types`) gets no VM KubeVirt would refuse: InvalidSpec naming the setting.
#[test]
fn a_stored_machine_type_outside_the_allow_list_makes_nothing() {
    let m = machine(
        "m",
        json!({"template": "small", "domain": {"machine": {"type": "pc-i440fx"}}}),
    );
    let d = decide(&observed(m), &Catalog::default(), &key());
    assert_eq!(reasons(&d), ["InvalidSpec"]);
    assert!(d.vm.is_none() && d.claims.is_empty());
    assert!(
        format!("{:?}", d.problems).contains("ALLOWED_MACHINE_TYPES"),
        "{:?}",
        d.problems
    );
}
