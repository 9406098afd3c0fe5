//! Run: the reconciler's I/O shell. [`scopes::run`] starts one controller per watch scope and
//! checks the served Machine CRD ([`served_crd`]); [`controller`] finds the optional APIs
//! ([`crate::discovery`]) and wires the watches ([`watches`]) to each [`reconcile`] (observe -> decide
//! -> act), with the shared [`context`], cache [`readiness`] and [`metrics`]. Not pure: it talks
//! to the API server.

pub mod cluster;
pub mod cluster_watches;
pub mod context;
pub mod controller;
pub mod first_pass;
pub mod key_evidence;
pub mod metrics;
pub mod nodes;
pub mod ownership_key;
pub mod placement;
pub mod readiness;
pub mod reconcile;
pub mod remotes;
pub mod reprove;
pub mod restart_budget;
pub mod scopes;
pub mod served_crd;
pub mod status;
pub mod watches;
