//! MachineSnapshot and MachineRestore: a Machine's disks protected by KubeVirt's
//! VirtualMachineSnapshot and VirtualMachineRestore, with their own observe → decide → act,
//! on the leader beside the Machine reconciler ([`run()`]).
//!
//! Pure (no API calls, table-tested): [`schedule`] (what a Machine's schedule asks for at an
//! instant), [`mirror`] (a MachineSnapshot's status from its VirtualMachineSnapshot),
//! [`restore`] (the next step of a restore) and [`site`] (which cluster a Machine's snapshot or
//! restore runs on: a remote Machine's runs on its cluster, through [`workload`]), [`copies`]
//! (which VolumeSnapshot holds each disk, for a clone from a MachineSnapshot). I/O: [`snapshot`] (the MachineSnapshot
//! controller), [`scheduler`] (the schedules, on a [`clock`]), [`restorer`] (the MachineRestore
//! controller) and [`mod@run`] (all of them per watch scope).

pub mod clock;
pub mod context;
pub mod copies;
pub mod error;
pub mod mirror;
pub mod restore;
pub mod restorer;
pub mod run;
pub mod schedule;
pub mod scheduler;
pub mod site;
pub mod snapshot;
pub mod workload;

pub use clock::{Clock, SystemClock};
pub use context::Settings;
pub use run::run;
