//! Leftovers: VMs, claims and DataVolumes on the local cluster and every KubevirtConfig's that
//! carry the operator's labels or proofs but belong to no live Machine (`kubevirt-operator
//! check --orphans`). Listed with how to adopt or delete them; nothing is ever deleted here.
//!
//! - [`decide`] (pure, table-tested): one object's verdict against the live Machines, and the
//!   gauges' counts per cluster.
//! - [`scan`] (I/O): the ownership key, each cluster's objects and the Machines, listed.
//! - [`run`] (I/O, the leader): the gauges `kubevirt_operator_orphans...`, recounted every
//!   `--orphan-check-interval`.

pub mod decide;
pub mod run;
pub mod scan;

pub use decide::{Found, LiveMachines, Verdict, Why, advice, judge};
