//! MachineSnapshot and MachineRestore: a Machine's disks protected by KubeVirt's
//! VirtualMachineSnapshot and VirtualMachineRestore, with their own observe → decide → act,
//! on the leader beside the Machine reconciler.
//!
//! Pure (no API calls, table-tested): [`schedule`] (what a Machine's schedule asks for at an
//! instant), [`mirror`] (a MachineSnapshot's status from its VirtualMachineSnapshot) and
//! [`restore`] (the next step of a restore).

pub mod mirror;
pub mod restore;
pub mod schedule;
