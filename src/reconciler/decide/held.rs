//! A failed volume write holds back only the VM changes that need that volume (pure): the run
//! strategy, CPU, memory and every other change still reach the VM.

use crate::reconciler::apis::kubevirt::{VirtualMachine, Volume};

/// The claim (or DataVolume) a VM volume mounts.
fn claim_of(v: &Volume) -> Option<&str> {
    v.persistent_volume_claim
        .as_ref()
        .map(|p| p.claim_name.as_str())
        .or_else(|| v.data_volume.as_ref().map(|d| d.name.as_str()))
}

/// The claims `vm` mounts.
pub fn mounted(vm: &VirtualMachine) -> Vec<&str> {
    vm.spec
        .template
        .spec
        .volumes
        .iter()
        .filter_map(claim_of)
        .collect()
}

/// `desired` without the volumes whose claim or DataVolume write `failed` and that the `live` VM
/// does not mount yet (one it mounts keeps its mount: only its change waits). Without a live VM
/// and with a failed volume, no VM: one made without a disk would boot without it.
pub fn without_failed(
    mut desired: VirtualMachine,
    live: Option<&VirtualMachine>,
    failed: &[&str],
) -> Option<VirtualMachine> {
    if failed.is_empty() {
        return Some(desired);
    }
    let live_mounts = mounted(live?);
    let spec = &mut desired.spec.template.spec;
    let dropped: Vec<String> = spec
        .volumes
        .iter()
        .filter(|v| claim_of(v).is_some_and(|c| failed.contains(&c) && !live_mounts.contains(&c)))
        .map(|v| v.name.clone())
        .collect();
    spec.volumes.retain(|v| !dropped.contains(&v.name));
    spec.domain
        .devices
        .disks
        .retain(|d| !dropped.contains(&d.name));
    Some(desired)
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    fn vm(run: &str, volumes: &[(&str, &str)]) -> VirtualMachine {
        let disks: Vec<Value> = volumes
            .iter()
            .map(|(n, _)| json!({"name": n, "disk": {"bus": "virtio"}}))
            .collect();
        let vols: Vec<Value> = volumes
            .iter()
            .map(|(n, c)| json!({"name": n, "persistentVolumeClaim": {"claimName": c}}))
            .collect();
        serde_json::from_value(json!({
            "apiVersion": "kubevirt.io/v1", "kind": "VirtualMachine",
            "metadata": {"name": "m"},
            "spec": {"runStrategy": run, "template": {"spec": {
                "domain": {"devices": {"disks": disks}}, "volumes": vols}}}
        }))
        .expect("vm")
    }

    fn names(vm: &VirtualMachine) -> (Vec<&str>, Vec<&str>) {
        let s = &vm.spec.template.spec;
        (
            s.domain
                .devices
                .disks
                .iter()
                .map(|d| d.name.as_str())
                .collect(),
            mounted(vm),
        )
    }

    #[test]
    fn only_the_new_volume_whose_write_failed_waits() {
        let live = vm("Always", &[("root", "m-root")]);
        let desired = vm("Halted", &[("root", "m-root"), ("data", "m-data")]);
        // (failed writes, expected disks, expected mounts)
        let cases: &[(&[&str], &[&str], &[&str])] = &[
            (&[], &["root", "data"], &["m-root", "m-data"]),
            // The new disk's claim failed: the VM changes without it.
            (&["m-data"], &["root"], &["m-root"]),
            // A mounted claim's change failed (a grow refused): its mount stays.
            (&["m-root"], &["root", "data"], &["m-root", "m-data"]),
        ];
        for (failed, disks, mounts) in cases {
            let out = without_failed(desired.clone(), Some(&live), failed).expect("a VM");
            assert_eq!(names(&out), (disks.to_vec(), mounts.to_vec()), "{failed:?}");
            assert_eq!(
                out.spec.run_strategy.as_deref(),
                Some("Halted"),
                "{failed:?}"
            );
        }
        assert!(
            without_failed(desired.clone(), None, &["m-data"]).is_none(),
            "no live VM: none made without its disk"
        );
        assert!(without_failed(desired, None, &[]).is_some());
    }
}
