//! Apis: the typed slices of the foreign APIs the reconciler writes and reads: KubeVirt
//! ([`kubevirt`]), CDI ([`cdi`]) and Multus ([`multus`]). Types only, no API calls.

pub mod cdi;
pub mod kubevirt;
pub mod multus;
pub mod snapshot;
