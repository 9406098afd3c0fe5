//! API types: the resources this operator defines, and the CRDs generated from them.

pub mod clone_from;
pub mod clone_sources;
pub mod crd;
pub mod domain;
pub mod hardware;
pub mod hotplug;
pub mod kubevirt_config;
pub mod machine;
pub mod machine_class;
pub mod names;
pub mod network_configuration;
pub mod operations;
pub mod placement;
pub mod quantity;
pub mod schema;
pub mod snapshots;
pub mod source;

pub use kubevirt_config::{KubevirtConfig, KubevirtConfigSpec, KubevirtConfigStatus};
pub use machine::{Machine, MachineSpec, MachineStatus};
pub use machine_class::{MachineClass, MachineClassSpec};
pub use network_configuration::{NetworkConfiguration, NetworkConfigurationSpec};
pub use quantity::Quantity;
pub use snapshots::{MachineRestore, MachineRestoreSpec, MachineSnapshot, MachineSnapshotSpec};
