//! Run: the reconciler's I/O shell. [`scopes::run`] starts one controller per watch scope;
//! [`controller`] wires the watches ([`watches`]) to observe -> decide -> act, with the shared
//! [`context`], cache [`readiness`] and [`metrics`]. Not pure: it talks to the API server.

pub mod context;
pub mod controller;
pub mod metrics;
pub mod ownership_key;
pub mod readiness;
pub mod scopes;
pub mod watches;
