//! Issue 21, restores end to end on a real control plane with `kubevirt-operator run`, playing
//! KubeVirt's VM, snapshot and restore controllers through the API server (KubeVirt's CRDs check
//! what is written): a restore KubeVirt fails leaves the old disks mounted and the VM running
//! again; a restore that succeeds stops the VM, is never reverted by the reconciler mid-way, and
//! ends with the VM running on claims `<machine>-<disk>` with new uids, controlled by the Machine,
//! proven its own and cloned from the restored claims. A Machine with a blank disk, a disk with a
//! source and a CD-ROM is restored too (playing CDI as well: the disk's DataVolume is made again
//! as a clone of its restored claim, the CD-ROM's is left alone); a Machine halted by its user
//! during a restore ends restored and halted; a restored claim lost after its old claim was
//! deleted holds the Machine, says so, and nothing empty is made in its place. A snapshot of an
//! earlier Machine of the same name is restored into the new one only when asked for.

mod access;
mod kubevirt;
mod snapshots;
mod support;

const IMAGE: &str =
    "https://cloud.debian.org/images/cloud/bookworm/latest/debian-12-generic-amd64.qcow2";
const ISO: &str = "https://cdimage.debian.org/debian-cd/current/amd64/iso-cd/debian-netinst.iso";

/// The tests, by subject, in tests/restores_e2e/ (still one test binary).
mod restores_e2e {
    mod earlier;
    mod interrupted;
    mod replace;
    mod sources;
}
