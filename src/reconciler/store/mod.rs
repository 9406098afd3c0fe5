//! Store: the watch caches and what the reconciler remembers between reconciles: cache entries
//! kept [`packed`], which names exist ([`presence`]), when the caches are filled ([`caches`]),
//! and our own recent writes ([`last_write`]). In-memory state; no API calls of its own (the
//! watches in `run` fill it).

pub mod caches;
pub mod last_write;
pub mod packed;
pub mod presence;
