//! Pruned fields, the served schema, and the pace of progress-only writes.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use serde_json::json;

use super::*;
use crate::api::source::DiskStatus;

fn disk(phase: &str, progress: Option<&str>) -> DiskStatus {
    DiskStatus {
        name: "root".into(),
        claim_name: "m-root".into(),
        phase: Some(phase.into()),
        progress: progress.map(Into::into),
        ..DiskStatus::default()
    }
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
        observed_generation: Some(1),
        last_transition_time: Time(Timestamp::from_second(1_700_000_000).unwrap()),
    }
}

/// A Machine importing its root disk, as `status::compute` words it.
fn importing(phase: &str, progress: Option<&str>) -> MachineStatus {
    let detail = match progress {
        Some(p) => format!("disk root: {phase} {p}"),
        None => format!("disk root: {phase}"),
    };
    MachineStatus {
        phase: Some("Creating".into()),
        conditions: vec![
            condition("Ready", "False", phase, &detail),
            condition("StorageReady", "False", phase, &detail),
        ],
        disks: vec![disk(phase, progress)],
        last_updated: Some(Time(Timestamp::from_second(1_700_000_100).unwrap())),
        ..MachineStatus::default()
    }
}

/// Why, the stored status, the computed one, the last write, now, and what to do.
type Case<'a> = (
    &'a str,
    Option<&'a MachineStatus>,
    &'a MachineStatus,
    Option<Instant>,
    Instant,
    StatusWrite,
);

#[test]
fn only_progress_waits_for_its_turn() {
    let t0 = Instant::now();
    let secs = |s: u64| t0 + Duration::from_secs(s);
    let at_45 = importing("ImportInProgress", Some("45.20%"));
    let at_47 = importing("ImportInProgress", Some("47.00%"));
    let mut other_change = at_47.clone();
    other_change.node_name = Some("node-1".into());
    let succeeded = importing("Succeeded", Some("100.0%"));
    let no_progress = importing("ImportInProgress", None);
    let mut newer_stamp = at_45.clone();
    newer_stamp.last_updated = Some(Time(Timestamp::from_second(1_700_000_200).unwrap()));
    let cases: Vec<Case> = vec![
        (
            "nothing changed",
            Some(&at_45),
            &at_45,
            Some(secs(0)),
            secs(1),
            StatusWrite::Unchanged,
        ),
        (
            "only lastUpdated",
            Some(&at_45),
            &newer_stamp,
            Some(secs(0)),
            secs(1),
            StatusWrite::Unchanged,
        ),
        (
            "progress, 2 s after the last write",
            Some(&at_45),
            &at_47,
            Some(secs(0)),
            secs(2),
            StatusWrite::Later(secs(10)),
        ),
        (
            "progress, 10 s after",
            Some(&at_45),
            &at_47,
            Some(secs(0)),
            secs(10),
            StatusWrite::Now,
        ),
        (
            "progress, never written by this process",
            Some(&at_45),
            &at_47,
            None,
            secs(2),
            StatusWrite::Now,
        ),
        (
            "progress and something else",
            Some(&at_45),
            &other_change,
            Some(secs(0)),
            secs(2),
            StatusWrite::Now,
        ),
        (
            "no status yet",
            None,
            &at_45,
            Some(secs(0)),
            secs(2),
            StatusWrite::Now,
        ),
        (
            "a new phase",
            Some(&at_45),
            &succeeded,
            Some(secs(0)),
            secs(2),
            StatusWrite::Now,
        ),
        (
            "the first progress appears",
            Some(&no_progress),
            &at_45,
            Some(secs(0)),
            secs(2),
            StatusWrite::Now,
        ),
        (
            "the progress goes",
            Some(&at_45),
            &no_progress,
            Some(secs(0)),
            secs(2),
            StatusWrite::Now,
        ),
    ];
    for (why, old, new, last, now, want) in cases {
        assert_eq!(pace(old, new, last, now), want, "{why}");
    }
}

#[test]
fn a_message_quoting_something_other_than_progress_is_a_change() {
    let old = importing("ImportInProgress", Some("45.20%"));
    let mut new = importing("ImportInProgress", Some("47.00%"));
    new.conditions[1].message = "disk root: ImportInProgress 47.00% (retrying)".into();
    assert!(!progress_only(&old, &new));
    let mut reasons = importing("ImportInProgress", Some("47.00%"));
    reasons.conditions[1].reason = "ImportScheduled".into();
    assert!(!progress_only(&old, &reasons));
}

#[test]
fn fields_the_server_dropped_are_found_at_any_depth() {
    let sent = json!({"phase": "Creating", "vmStatus": "Provisioning", "nodeName": null,
        "disks": [{"name": "root", "claimName": "m-root", "progress": "5%"}],
        "conditions": [{"type": "Ready", "observedGeneration": 1}]});
    let cases = [
        ("all kept", sent.clone(), vec![]),
        (
            "an old CRD",
            json!({"phase": "Creating", "conditions": [{"type": "Ready", "observedGeneration": 1}]}),
            vec!["disks", "vmStatus"],
        ),
        (
            "a field inside list entries",
            json!({"phase": "Creating", "vmStatus": "Provisioning",
                "disks": [{"name": "root", "claimName": "m-root"}],
                "conditions": [{"type": "Ready"}]}),
            vec!["conditions[].observedGeneration", "disks[].progress"],
        ),
    ];
    for (why, stored, want) in cases {
        let got: Vec<String> = pruned(&sent, &stored).into_iter().collect();
        assert_eq!(got, want, "{why}");
    }
}

#[test]
fn pruned_fields_are_left_out_so_the_stored_status_compares_equal() {
    let computed = importing("ImportInProgress", Some("45.20%"));
    let mut stored = computed.clone();
    stored.disks.clear();
    assert!(
        differs(Some(&stored), &computed),
        "the loop: differs forever"
    );
    let paths: BTreeSet<String> = ["disks".to_owned(), "vmStatus".to_owned()].into();
    assert!(!differs(Some(&stored), &without(&computed, &paths)));

    let mut no_progress = computed.clone();
    no_progress.disks[0].progress = None;
    let nested: BTreeSet<String> = ["disks[].progress".to_owned()].into();
    assert_eq!(without(&computed, &nested), no_progress);
    assert_eq!(without(&computed, &BTreeSet::new()), computed);
    // Leaving out a field a disk requires would not be a status: nothing is left out.
    let required: BTreeSet<String> = ["disks[].claimName".to_owned()].into();
    assert_eq!(without(&computed, &required), computed);
}

fn schema(status: serde_json::Value) -> JSONSchemaProps {
    serde_json::from_value(status).unwrap()
}

#[test]
fn the_served_schema_names_what_it_would_prune() {
    let written = ["phase", "disks", "vmStatus"];
    let props = |names: &[&str]| {
        let p: BTreeMap<&str, serde_json::Value> = names
            .iter()
            .map(|n| (*n, json!({"type": "string"})))
            .collect();
        schema(json!({"type": "object", "properties": p}))
    };
    let keeps_all = schema(json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    let cases: Vec<(&str, Option<JSONSchemaProps>, Vec<&str>)> = vec![
        (
            "current",
            Some(props(&["phase", "disks", "vmStatus"])),
            vec![],
        ),
        ("older", Some(props(&["phase"])), vec!["disks", "vmStatus"]),
        ("keeps unknown fields", Some(keeps_all), vec![]),
        ("no status schema", None, vec!["phase", "disks", "vmStatus"]),
    ];
    for (why, status, want) in cases {
        assert_eq!(missing_in_schema(status.as_ref(), &written), want, "{why}");
    }
}

#[test]
fn the_warning_names_each_field_and_the_cure() {
    let w = upgrade_warning(&["disks".into(), "vmStatus".into()]);
    assert!(
        w.starts_with(
            "the served Machine CRD lacks status.disks, status.vmStatus: upgrade the CRD"
        ),
        "{w}"
    );
}
