//! Leftovers: VMs, claims and DataVolumes on the local cluster and every KubevirtConfig's that
//! carry the operator's labels or proofs but belong to no live Machine (`kubevirt-operator
//! check --orphans`). Listed with how to adopt or delete them; nothing is ever deleted here.
//!
//! - [`decide`] (pure, table-tested): one object's verdict against the live Machines.
//! - [`scan`] (I/O): the Machines, the ownership key and each cluster's objects, listed.

pub mod decide;
pub mod scan;

pub use decide::{LiveMachines, Verdict, Why, advice, judge};
