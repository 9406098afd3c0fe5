//! Store: the watch caches and what the reconciler remembers between reconciles: cache entries
//! kept [`packed`], which names exist ([`presence`]), when the caches are filled ([`caches`]),
//! our own recent writes ([`last_write`]), and what is remembered per Machine ([`per_machine`],
//! [`derived_secrets`]) and per process ([`served_status`]). In-memory state; no API calls of its own (the
//! watches in `run` fill it).

pub mod caches;
pub mod derived_secrets;
pub mod last_write;
pub mod packed;
pub mod per_machine;
pub mod presence;
pub mod served_status;
