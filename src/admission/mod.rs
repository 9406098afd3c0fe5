//! Admission webhooks: AdmissionReview decoding, the CRD schema check, the mutate and validate
//! decisions, and the HTTP routes that serve them.

pub mod access;
pub mod addresses;
pub mod clones;
pub mod decide;
pub mod denials;
pub mod lanes;
pub mod limits;
pub mod low_priority;
pub mod machine_class;
pub mod macs;
pub mod network;
pub mod patch_ops;
pub mod pins;
pub mod refusals;
pub mod remote;
pub mod review;
pub mod routes;
pub mod schema;
pub mod sizing;
pub mod snapshot_access;
pub mod snapshots;
pub mod status;

pub use decide::Admission;

pub const MUTATE_PATH: &str = "/mutate-vitistack-io-v1alpha1-machine";
pub const VALIDATE_PATH: &str = "/validate-vitistack-io-v1alpha1-machine";
pub const NETWORK_VALIDATE_PATH: &str = "/validate-vitistack-io-v1alpha1-networkconfiguration";
pub const MACHINE_CLASS_VALIDATE_PATH: &str = "/validate-vitistack-io-v1alpha1-machineclass";
pub const SNAPSHOT_VALIDATE_PATH: &str = "/validate-vitistack-io-v1alpha1-machinesnapshot";
pub const RESTORE_VALIDATE_PATH: &str = "/validate-vitistack-io-v1alpha1-machinerestore";
